"""`python -m app.cli explain|admit|migrate-values ...`: parse arguments, run one command, map errors to exit
status 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app.cli import admit, explain, migrate
from app.cli.common import CliError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m app.cli", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    explain.add_arguments(
        commands.add_parser("explain", help="where would this pod go, and why not elsewhere?")
    )
    admit.add_arguments(commands.add_parser("admit", help="what would the webhook do to this pod?"))
    migrate.add_arguments(
        commands.add_parser("migrate-values", help="our chart's values for HAMi's chart values")
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        run = {"explain": explain.run, "admit": admit.run, "migrate-values": migrate.run}[args.command]
        output = run(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
