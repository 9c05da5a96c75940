"""Child processes for tests and tools: own process group, a log file, readiness over HTTP, stop by PID.

Tests start the API emulator, Gunicorn and workers as real processes; each must be stopped by the test that
started it, on success and on failure alike. ``stop`` sends SIGTERM to the child's PID (to its whole
process group with ``term_group``: a shell command's processes, which a shell does not pass SIGTERM on
to; to the PID ``term_target`` names: the container's own process under `buildah run`, sim.cluster.image),
waits, escalates to SIGKILL for the child's own process group (which catches workers a master forked), and
always reaps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType


class ChildProcess:
    def __init__(self, popen: subprocess.Popen[bytes], log_path: Path, term_group: bool = False) -> None:
        self._popen = popen
        self.log_path = log_path
        self.term_group = term_group
        # the child's PID -> the process SIGTERM is meant for, when not the child itself (None: the child)
        self.term_target: Callable[[int], int | None] | None = None

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def alive(self) -> bool:
        return self._popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 5.0) -> int:
        """SIGTERM the PID, SIGKILL its process group after ``timeout``, reap; returns the exit code."""
        if self._popen.poll() is None:
            target = self.term_target(self._popen.pid) if self.term_target is not None else None
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if target is not None:
                    os.kill(target, signal.SIGTERM)
                elif self.term_group:
                    os.killpg(self._popen.pid, signal.SIGTERM)
                else:
                    os.kill(self._popen.pid, signal.SIGTERM)
            try:
                self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_group()
                self._popen.wait()
        self._kill_group()  # stragglers the child forked and left behind
        return self._popen.returncode

    def _kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, signal.SIGKILL)

    def __enter__(self) -> ChildProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_process(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    new_session: bool = True,
) -> ChildProcess:
    """Start ``argv`` in a new session (its own process group; with ``new_session=False`` in the caller's,
    so a signal to the caller's group reaches it), stdout and stderr appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=new_session,
        )
    return ChildProcess(popen, log_path)


def wait_for_http(
    url: str,
    *,
    timeout: float = 15.0,
    process: ChildProcess | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> None:
    """Poll ``url`` until the server answers (any HTTP status); fail early if ``process`` exits."""
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ssl_context)
    )
    deadline = time.monotonic() + timeout
    last_error = ""
    while time.monotonic() < deadline:
        if process is not None and not process.alive():
            raise RuntimeError(
                f"process {process.pid} exited with {process.returncode}:\n{process.log_tail()}"
            )
        try:
            with opener.open(url, timeout=1.0) as response:
                response.read()
            return
        except urllib.error.HTTPError as error:
            error.close()
            return
        except (urllib.error.URLError, OSError) as error:
            last_error = str(error)
        time.sleep(0.05)
    tail = process.log_tail() if process is not None else ""
    raise TimeoutError(f"{url} did not answer within {timeout}s ({last_error})\n{tail}")


@contextlib.contextmanager
def running(
    argv: Sequence[str],
    *,
    log_path: Path,
    ready_url: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    ssl_context: ssl.SSLContext | None = None,
    startup_timeout: float = 15.0,
) -> Iterator[ChildProcess]:
    """Start, optionally wait until ``ready_url`` answers, yield, and stop by PID however the block ends."""
    process = start_process(argv, log_path=log_path, env=env, cwd=cwd)
    try:
        if ready_url is not None:
            wait_for_http(ready_url, timeout=startup_timeout, process=process, ssl_context=ssl_context)
        yield process
    finally:
        process.stop()


class ProcessSet:
    """Named child processes sharing a log folder: start, look up, check alive, stop one or all (by PID)."""

    def __init__(self, log_dir: Path, cwd: Path | None = None) -> None:
        self.log_dir = log_dir
        self.cwd = cwd
        self.children: dict[str, ChildProcess] = {}

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> ChildProcess:
        if name in self.children and self.children[name].alive():
            raise RuntimeError(f"{name} is already running (pid {self.children[name].pid})")
        child = start_process(argv, log_path=self.log_dir / f"{name}.log", env=env, cwd=self.cwd)
        self.children[name] = child
        return child

    def check(self) -> None:
        """Raise RuntimeError naming the first child that exited, with the tail of its log."""
        for name, child in self.children.items():
            if not child.alive():
                tail = child.log_tail(5).replace("\n", " | ")
                raise RuntimeError(f"{name} (pid {child.pid}) exited with {child.returncode}: {tail}")

    def stop(self, name: str, timeout: float = 10.0) -> None:
        child = self.children.pop(name, None)
        if child is not None:
            child.stop(timeout)

    def stop_all(self, order: Sequence[str] = (), timeout: float = 10.0) -> None:
        """Stop `order` first (in that order), then the rest, newest first."""
        for name in [*order, *reversed(list(self.children))]:
            self.stop(name, timeout)
