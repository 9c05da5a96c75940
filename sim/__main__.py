"""`python -m sim <command> ...`: the simulator's commands, one registry entry each.

Add a command by adding a line to COMMANDS: `"name": ("module:ATTRIBUTE", "one-line help")`, where the
attribute is a `sim.kit.command.Command` (its `add_arguments(parser)` and `run(args) -> exit status`). Only
the chosen command's module is imported. The API emulator keeps its own entry point, `python -m sim.emulator`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from sim.kit.command import Command, DefaultsHelpFormatter

COMMANDS: dict[str, tuple[str, str]] = {
    "chaos": (
        "sim.chaos.run:COMMAND",
        "the chaos storm: load, API faults, crashes and leader loss; a verdict",
    ),
    "down": ("sim.scenarios.down:COMMAND", "stop the playground `sim up --detach` left running"),
    "demo": (
        "sim.scenarios.demo:COMMAND",
        "the playground: emulator, worker, service, GPU nodes, kube-scheduler",
    ),
    "fuzz": ("sim.fuzz.run:COMMAND", "bad inputs and corrupt cluster state against the running service"),
    "nodes": ("sim.cluster.actors:NODES", "simulated GPU nodes: kubelet + HAMi device plugin (Allocate)"),
    "scheduler": ("sim.cluster.actors:SCHEDULER", "simulated kube-scheduler calling the extender"),
    "up": (
        "sim.scenarios.up:COMMAND",
        "the whole stack for kubectl, in the foreground or --detach (real or emulated control plane)",
    ),
}


def load(name: str) -> Command:
    target, _ = COMMANDS[name]
    module_name, _, attribute = target.partition(":")
    command = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(command, Command):
        raise TypeError(f"{target} is not a sim.kit.command.Command")
    return command


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__.splitlines()[0])
    parser.add_argument(
        "command", choices=sorted(COMMANDS), help="; ".join(f"{k}: {v[1]}" for k, v in COMMANDS.items())
    )
    if not args or args[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if args else 2
    if args[0] not in COMMANDS:
        parser.parse_args(args[:1])  # exits with status 2 and the list of commands
        return 2
    command = load(args[0])
    sub = argparse.ArgumentParser(
        prog=f"python -m sim {args[0]}",
        description=COMMANDS[args[0]][1],
        formatter_class=DefaultsHelpFormatter,
    )
    command.add_arguments(sub)
    return command.run(sub.parse_args(args[1:]))


if __name__ == "__main__":
    sys.exit(main())
