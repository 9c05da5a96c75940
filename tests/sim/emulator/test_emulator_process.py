"""``python -m sim.emulator`` as a child process (HTTP and HTTPS) and the generic process helpers."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from sim.emulator.testing import EmulatorOptions, node, run_emulator, wait_for
from sim.kit.processes import running, start_process, wait_for_http


def _dead(pid: int) -> bool:
    """Gone or a zombie (an orphan waits for init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_child_process_serves_the_real_client_and_the_hooks(tmp_path: Path, tls: bool) -> None:
    with run_emulator(tmp_path, mode="process", options=EmulatorOptions(tls=tls)) as sim:
        assert sim.process is not None and sim.emulator is None
        pid = sim.process.pid
        assert sim.url.startswith("https://" if tls else "http://")
        cluster = yaml.safe_load(sim.kubeconfig.read_text())["clusters"][0]["cluster"]
        assert ("certificate-authority-data" in cluster) is tls
        assert cluster.get("insecure-skip-tls-verify", False) is not tls
        with sim.api_client() as api:
            core = client.CoreV1Api(api)
            core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1")))
            sim.seed([node("n2")])
            assert [n.metadata.name for n in core.list_node().items] == ["n1", "n2"]
        assert sim.get("nodes", "n1") is not None and sim.stats()["objects"]["nodes"] == 2
    assert _dead(pid) and sim.process.returncode == 0, "stopped by PID with SIGTERM, exited cleanly"


@pytest.mark.kubectl
def test_kubectl_verifies_the_generated_certificate(tmp_path: Path, kubectl_binary: Path) -> None:
    with run_emulator(tmp_path, mode="process", options=EmulatorOptions(tls=True)) as sim:
        sim.seed([node("secure")])
        result = subprocess.run(
            [
                str(kubectl_binary),
                f"--kubeconfig={sim.kubeconfig}",
                f"--cache-dir={tmp_path / 'cache'}",
                "get",
                "nodes",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    assert "secure" in result.stdout


def test_child_process_is_stopped_when_the_test_fails(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), run_emulator(tmp_path, mode="process") as sim:
        assert sim.process is not None
        pid = sim.process.pid
        raise RuntimeError("boom")
    assert _dead(pid)


def test_invalid_arguments_exit_2(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "sim.emulator", f"--kubeconfig={tmp_path / 'kc'}", "--event-window=0"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "--event-window" in result.stderr


_IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def test_stop_escalates_to_sigkill_for_the_whole_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = (
        "import os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {_IGNORES_TERM!r}])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        f"exec({_IGNORES_TERM!r})\n"
    )
    process = start_process([sys.executable, "-c", script], log_path=tmp_path / "child.log")
    try:
        grandchild = int(
            wait_for(lambda: pid_file.exists() and pid_file.read_text(), 10, "the grandchild pid")
        )
        wait_for(lambda: process.log_tail().count("ready") == 2, 10, "both processes to ignore SIGTERM")
        started = time.monotonic()
        assert process.stop(timeout=0.5) == -signal.SIGKILL
        assert time.monotonic() - started < 5
    finally:
        process.stop()
    wait_for(lambda: _dead(grandchild), 5, "the grandchild to be killed with its group")


def test_running_waits_for_http_and_stops(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    server = (
        "import http.server, sys\n"
        "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\n"
        f"open({str(port_file)!r}, 'w').write(str(s.server_address[1]))\n"
        "s.serve_forever()\n"
    )
    with running([sys.executable, "-c", server], log_path=tmp_path / "http.log", cwd=tmp_path) as process:
        port = int(wait_for(lambda: port_file.exists() and port_file.read_text(), 10, "the port"))
        wait_for_http(f"http://127.0.0.1:{port}/", timeout=10, process=process)
        pid = process.pid
    assert _dead(pid) and process.returncode == -signal.SIGTERM


def test_wait_for_http_fails_early_when_the_process_exits(tmp_path: Path) -> None:
    process = start_process(
        [sys.executable, "-c", "print('bad config'); raise SystemExit(3)"], log_path=tmp_path / "x.log"
    )
    try:
        with pytest.raises(RuntimeError, match="bad config"):
            wait_for_http("http://127.0.0.1:9/", timeout=10, process=process)
    finally:
        assert process.stop() == 3


def test_wait_for_http_times_out(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        wait_for_http("http://127.0.0.1:9/", timeout=0.3)
    assert time.monotonic() - started < 5
