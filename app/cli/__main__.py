"""`hami-scheduler inspect|explain|admit|migrate-values|keys ...` (also `python -m app.cli ...`): parse,
run one command, print.

Every problem with the arguments or the input is one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app.cli import admit, explain, inspect, keytable, migrate
from app.cli.common import CliError

PROG = "hami-scheduler"
MIGRATE_EXAMPLE = """examples:
  helm get values hami -n kube-system -o yaml > hami-values.yaml
  hami-scheduler migrate-values hami-values.yaml > values.yaml
  hami-scheduler migrate-values --table                      # the mapping table (Markdown)"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """The description and examples as written; `(default: X)` after an option's help when it has a
    default worth saying (not None, empty or False) and the help does not already name one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if "default" in text or default in (None, "", False, [], argparse.SUPPRESS):
            return text
        return f"{text} (default: {default})"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


# name -> (module with add_arguments and run, one-line description, examples)
COMMANDS = {
    "inspect": (
        inspect,
        "what the scheduler holds: devices, pods, locks per node, and a cluster summary",
        inspect.EXAMPLE,
    ),
    "explain": (explain, "where would this pod go, and why not elsewhere?", explain.EXAMPLE),
    "admit": (admit, "what would the admission webhook do to this pod?", admit.EXAMPLE),
    "migrate-values": (migrate, "our chart's values for HAMi's chart values", MIGRATE_EXAMPLE),
    "keys": (
        keytable,
        "the pod annotations each vendor writes, by role, and who may change them",
        keytable.EXAMPLE,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Operator commands of hami-scheduler-py (read-only; nothing is written to the cluster).",
        epilog=f"run '{PROG} COMMAND --help' for a command's options and examples",
        formatter_class=_Formatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for name, (module, summary, example) in COMMANDS.items():
        sub = commands.add_parser(
            name, help=summary, description=summary, epilog=example, formatter_class=_Formatter
        )
        module.add_arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module = COMMANDS[args.command][0]
    try:
        output = module.run(args)
    except CliError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)  # as argparse words its errors
        return 2
    except KeyboardInterrupt:
        return 130
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
