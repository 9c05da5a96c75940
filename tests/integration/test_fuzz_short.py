"""A CI-sized fuzz run: `python -m sim fuzz --requests 500` must find nothing (invariant 6).

The command starts its own emulator, simulated nodes, registration worker and Gunicorn (2 workers), plants
corrupt nodes, pods, locks and quotas, sends 500 seeded bad inputs interleaved with valid filter/bind
flows, then 5 rounds of the hostile verbs (sim.fuzz.hostile: bodies naming bound, pending and foreign
pods with missing or wrong UIDs, bodies over the per-route caps: each refused, saying why, with nothing
changed and the workers' peak memory grown by at most 8 MiB), and stops every child by PID. It runs here
as a child process in its own process group, stopped by PID (SIGTERM makes it stop its children first) if
it outlives the deadline. The full-size run is `python -m sim fuzz --requests 5000` (docs/security.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson
import pytest

from sim.fuzz.hostile import KINDS as HOSTILE_KINDS
from sim.kit.processes import start_process

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
HOSTILE_REASONS = {
    "filter-bound": "already bound",
    "filter-no-uid": "carries no UID",
    "filter-foreign": "not scheduled by",
    "bind-no-uid": "carries no PodUID",
    "bind-foreign": "not scheduled by",
    "bind-foreign-cpu": "not scheduled by",
    "bind-unfiltered": "was filtered onto node <none>",
    "over-cap-bind": "larger than",
    "over-cap-filter": "larger than",
    "dense-filter": "more than",
}
FINDINGS = ("server_errors", "crashes", "internal_errors", "unclear_errors", "timeouts", "connection_errors")


@pytest.mark.parametrize("seed", [7])
def test_500_bad_requests_find_nothing(seed: int, tmp_path: Path) -> None:
    report_path = tmp_path / "fuzz.json"
    argv = [
        sys.executable,
        "-m",
        "sim",
        "fuzz",
        "--seed",
        str(seed),
        "--requests",
        "500",
        "--hostile-rounds",
        "5",
    ]
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
    hostile = report["hostile_by_kind"]
    assert report["hostile_setup_problems"] == [], report["hostile_setup_problems"]
    assert report["hostile_accepted"] == 0, report["hostile_accepted_examples"]
    assert set(hostile) == set(HOSTILE_KINDS) and all(sum(hostile[k].values()) == 5 for k in HOSTILE_KINDS)
    for kind, answers in hostile.items():  # each refused with a clear Error (or 400/413) ...
        allowed = ("no-op",) if kind == "bind-bound-same-node" else ("refused: ", "HTTP 400", "HTTP 413")
        assert all(answer.startswith(allowed) for answer in answers), (kind, answers)
    for kind, reason in HOSTILE_REASONS.items():  # ... that says why
        assert all(reason in answer or "HTTP 413" in answer for answer in hostile[kind]), (
            kind,
            hostile[kind],
        )
    assert report["hostile_memory_findings"] == 0, report["hostile_memory_growth_mib"]
