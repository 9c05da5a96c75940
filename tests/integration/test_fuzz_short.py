"""A CI-sized fuzz run: `python -m sim fuzz --requests 500` must find nothing (invariant 6).

The command starts its own emulator, simulated nodes, registration worker and Gunicorn (2 workers), plants
corrupt nodes, pods, locks and quotas, sends 500 seeded bad inputs interleaved with valid filter/bind
flows, and stops every child by PID. It runs here as a child process in its own process group, stopped by
PID (SIGTERM makes it stop its children first) if it outlives the deadline. The full-size run is
`python -m sim fuzz --requests 5000` (docs/security.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson
import pytest

from sim.processes import start_process

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
FINDINGS = ("server_errors", "crashes", "internal_errors", "unclear_errors", "timeouts", "connection_errors")


@pytest.mark.parametrize("seed", [7])
def test_500_bad_requests_find_nothing(seed: int, tmp_path: Path) -> None:
    report_path = tmp_path / "fuzz.json"
    argv = [sys.executable, "-m", "sim", "fuzz", "--seed", str(seed), "--requests", "500"]
    argv += ["--report", str(report_path), "--workdir", str(tmp_path / "run")]
    process = start_process(argv, log_path=tmp_path / "fuzz.log", cwd=REPO)
    try:
        deadline = time.monotonic() + 240
        while process.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        code = process.stop(30.0)
    assert code == 0, process.log_tail()
    report = orjson.loads(report_path.read_bytes())
    assert report["requests"] >= 500
    assert {key: report[key] for key in FINDINGS} == dict.fromkeys(FINDINGS, 0), report["examples"]
    assert report["children_left"] == []
    assert report["valid_flows"].get("bound", 0) >= 40, report["valid_flows"]
    assert report["unusable_nodes"], "the corrupt nodes must be excluded with a reason"
    assert all(report["unusable_nodes"].values())
