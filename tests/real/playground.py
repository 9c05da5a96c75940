"""`python -m sim up` as the suites run it: a child process in the foreground, used through what its ready
file says (the kubeconfig, the kubectl of the server's version, the URLs and certificates), stopped by
SIGTERM at the end, also on failure; every process it started must then be gone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from sim.cluster.stack import pid_alive
from sim.emulator.testing import REPO_ROOT
from sim.kit.kube import Kube
from sim.kit.processes import ChildProcess, start_process

READY_TIMEOUT = 240.0  # 13 nodes on a loaded 2-core machine: about 15 s alone


@dataclass
class Playground:
    ready: dict[str, Any]
    process: ChildProcess
    kube: Kube

    @property
    def workdir(self) -> Path:
        return Path(self.ready["workdir"])

    def output(self) -> str:
        return self.process.log_path.read_text(errors="replace")

    def run(self, argv: list[str], stdin: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A command with the playground's environment (what `. WORKDIR/env` sets)."""
        env = {**os.environ, "KUBECONFIG": self.ready["kubeconfig"]}
        env["PATH"] = self.ready["env"]["PATH"].replace("$PATH", env.get("PATH", ""))
        return subprocess.run(
            argv, input=stdin, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def kubectl(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return self.run([self.ready["kubectl"], *args], stdin=stdin)


@contextlib.contextmanager
def sim_up(workdir: Path, *flags: str) -> Iterator[Playground]:
    """`python -m sim up --workdir WORKDIR FLAGS` until the block ends; then SIGTERM, exit status 0, its
    stop line, and none of the PIDs its ready file listed alive."""
    argv = [sys.executable, "-m", "sim", "up", "--workdir", str(workdir), *flags]
    up = start_process(argv, log_path=workdir.with_name(f"{workdir.name}.out"), cwd=REPO_ROOT)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while not (workdir / "ready").exists():
            assert up.alive(), up.log_tail()
            assert time.monotonic() < deadline, up.log_tail()
            time.sleep(0.2)
        ready = orjson.loads((workdir / "ready").read_bytes())
        pids = [ready["pid"], *ready["pids"].values()]
        kube = Kube.from_kubeconfig(ready["kubeconfig"])
        try:
            yield Playground(ready, up, kube)
        finally:
            kube.close()
        os.kill(up.pid, signal.SIGTERM)
        stop_deadline = time.monotonic() + 60
        while up.alive():
            assert time.monotonic() < stop_deadline, "sim up did not stop after SIGTERM"
            time.sleep(0.2)
        assert up.returncode == 0, up.log_tail()
        assert "sim up: stopped; the " in up.log_tail(3), up.log_tail()
    finally:
        up.stop(timeout=30)
        leftovers = [pid for pid in pids if pid_alive(pid)]
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert leftovers == [] and pids
    assert not (workdir / "ready").exists()
