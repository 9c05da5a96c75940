"""``python -m sim.emulator``: run the emulator as its own process until SIGTERM or SIGINT.

Writes the kubeconfig once the socket is bound (so ``--port 0`` works: read the URL back from the file) and
prints one ``listening on URL`` line.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from sim.emulator.emulator import Emulator, EmulatorConfig


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim.emulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (written to the kubeconfig)")
    parser.add_argument("--kubeconfig", type=Path, required=True, help="where to write the kubeconfig")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS with a certificate made at start")
    parser.add_argument("--event-window", type=int, default=10_000, help="watch events kept for resuming")
    parser.add_argument(
        "--pod-deletion-delay", type=float, default=1.0, help="seconds a bound pod terminates"
    )
    parser.add_argument(
        "--kubelet-deletions",
        action="store_true",
        help="as kube-apiserver: a graceful pod deletion waits for its kubelet's grace-0 delete "
        "(`sim nodes --finish-deletions`) instead of ending after --pod-deletion-delay",
    )
    parser.add_argument(
        "--bookmark-interval", type=float, default=1.0, help="seconds between watch bookmarks"
    )
    parser.add_argument("--fault-seed", type=int, default=None, help="seed for probabilistic faults")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.event_window < 1 or args.pod_deletion_delay < 0 or args.bookmark_interval <= 0:
        print("invalid --event-window, --pod-deletion-delay or --bookmark-interval", file=sys.stderr)
        return 2
    config = EmulatorConfig(
        host=args.host,
        port=args.port,
        tls=args.tls,
        event_window=args.event_window,
        pod_deletion_delay=args.pod_deletion_delay,
        kubelet_deletions=args.kubelet_deletions,
        bookmark_interval=args.bookmark_interval,
        fault_seed=args.fault_seed,
    )
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    emulator = Emulator(config).start()
    try:
        emulator.write_kubeconfig(args.kubeconfig)
        print(f"sim-apiserver listening on {emulator.url}", flush=True)
        done.wait()
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
