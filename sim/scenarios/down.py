"""`python -m sim down --workdir D`: stop the playground `python -m sim up --detach` left running in D.

SIGTERM to the `sim up` process (its PID file, `D/sim-up.pid`), which stops every process it started by PID
and process group; waits until it is gone and says so in one line. Nothing running in D is not an error.

Exit status: 0 when stopped (or nothing ran), 1 when it did not stop within `--timeout` seconds.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from sim.kit.command import Command
from sim.scenarios.up import DETACHED_LOG, running_pid


def run(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir).resolve()
    pid = running_pid(workdir)
    if pid is None:
        print(f"sim down: no playground runs in {workdir}")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while running_pid(workdir) == pid:
        if time.monotonic() > deadline:
            print(f"sim down: pid {pid} still runs after {args.timeout:g}s (log: {workdir / DETACHED_LOG})",
                  file=sys.stderr)  # fmt: skip
            return 1
        time.sleep(0.2)
    print(f"sim down: the playground in {workdir} (pid {pid}) stopped")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workdir", required=True, help="the playground's folder (`sim up --workdir`)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for it to stop")


COMMAND = Command(add_arguments, run)
