"""What a `python -m sim <name>` subcommand is, and the helpers long-running simulator processes share:
stop on SIGTERM/SIGINT, and a stats file rewritten periodically and once more at the end."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from sim.kit.kube import atomic_write_json


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """`--help` with each option's default, except where there is none to show (None, "", a flag's
    True or False, a required option)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        default = action.default
        if default is None or isinstance(default, bool) or default == "" or action.required:
            return action.help
        return super()._get_help_string(action)


@dataclass(frozen=True)
class Command:
    """One subcommand: its arguments and its entry point (returns the exit status)."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (call from the main thread)."""
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return done


def serve_stats(
    done: threading.Event, path: Path | None, stats: Callable[[], dict[str, Any]], every: float = 1.0
) -> None:
    """Until ``done``: write ``stats()`` to ``path`` every ``every`` seconds; once more at the end."""
    while not done.wait(every):
        if path is not None:
            atomic_write_json(path, stats())
    if path is not None:
        atomic_write_json(path, stats())
