"""`hami-scheduler inspect --url` shows a replica's held reservations (docs/held-reservations.md): kind,
owner, priority, node, devices, victims, reason and the time left, in text and JSON — end to end through the
real Gunicorn service's /debug/state and the CLI process.

The holds are created in the replica's ledger as their writers will create them (`Ledger.create_holds`:
the preemptor's nomination, a gang plan), on the ledger file the service and its worker share.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.core.holds import GANG, NOMINATION, Hold, gang_key, nomination_key
from app.core.model import DeviceUse

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node("gpu-h0", gpus=2))
    svc = start_service(workers=1)
    wait_for(lambda: svc.debug_state("gpu-h0")["registered"], 30, "the node registered")
    return svc


def _inspect(url: str, output: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "inspect", "--url", url, "-o", output],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return result.stdout


def _slot(
    key: str, slot: str, kind: str, owner: str, name: str, priority: int, device: str, mem: int
) -> Hold:
    now = time.time()
    uses = {device: DeviceUse(1, mem, 30 if kind == NOMINATION else 0)}
    return Hold(key, slot, kind, owner, "default", name, priority, "gpu-h0", uses, (), "", now, now + 60)


def test_inspect_shows_the_holds(service: Any, cluster: Any, wait_for: Any) -> None:
    """A nomination held for a pending preemptor (it exists: the worker's sweep keeps the hold) and a gang
    plan of two slots."""
    uid = cluster.create_pod(cluster.gpu_pod("high", memory=16384))["metadata"]["uid"]
    reason = "preempting 1 pod to free 16 GiB of nvidia.com/gpumem on GPU-gpu-h0-0"
    nomination = _slot(nomination_key(uid), "", NOMINATION, uid, "high", 1000, "GPU-gpu-h0-0", 16384)
    nomination = dataclasses.replace(nomination, victims=("uid-low",), reason=reason)
    gang = [
        dataclasses.replace(
            _slot(
                gang_key("default/train"),
                f"uid-m{i}",
                GANG,
                "default/train",
                "train",
                10,
                "GPU-gpu-h0-1",
                4096,
            ),
            reason="gang default/train: 2 of 2 members",
        )
        for i in range(2)
    ]
    now = time.time()
    ledger = service.ledger
    assert ledger.create_holds(nomination.key, {"gpu-h0"}, lambda states: [nomination], now=now)
    assert ledger.create_holds(gang[0].key, {"gpu-h0"}, lambda states: gang, now=now)
    wait_for(lambda: service.debug_state()["holds"] == 2, 15, "the replica to see both holds")

    text = _inspect(service.url, "text")
    section = text[text.index("HOLDS") :]
    assert "default/high" in section and "1000" in section and "uid-low" in section
    assert reason in section and "GPU-gpu-h0-0(16Gi,30%)" in section
    assert len([line for line in section.splitlines() if line.startswith("gang ")]) == 2
    assert "gang default/train: 2 of 2 members" in section

    holds = json.loads(_inspect(service.url, "json"))["holds"]
    by_kind = {h["kind"]: h for h in holds}
    assert len(holds) == 3 and by_kind[NOMINATION]["victims"] == ["uid-low"]
    assert by_kind[NOMINATION]["devices"] == {"GPU-gpu-h0-0": {"slots": 1, "memory_mib": 16384, "cores": 30}}
    assert 0 < by_kind[NOMINATION]["expires_in_seconds"] <= 120
    assert {h["slot"] for h in holds if h["kind"] == GANG} == {"uid-m0", "uid-m1"}
