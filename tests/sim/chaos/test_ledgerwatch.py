"""The storm's mid-run ledger check (sim/chaos/ledgerwatch.py): which vanished rows are drops, and the sampler
against a real ledger file that a sweep like finding 1's empties under it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.core.model import DeviceUse
from app.state.ledger import ASSUMED, BOUND, CONFIRMED, Entry, Ledger
from sim.chaos.ledgerwatch import LedgerWatch, dropped


def pod(uid: str, node: str = "n1", **changes: Any) -> dict[str, Any]:
    notes = {"hami.io/vgpu-node": changes.pop("assigned", node)}
    meta: dict[str, Any] = {"name": f"p-{uid}", "namespace": "default", "uid": uid, "annotations": notes}
    if changes.pop("deleting", False):
        meta["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": changes.pop("bound_to", node)},
        "status": {"phase": changes.pop("phase", "Running")},
    }


@pytest.mark.parametrize(
    ("before", "after", "pods", "expected"),
    [
        pytest.param({"a": (BOUND, "n1")}, {}, [pod("a")], ["a"], id="bound row gone, pod runs: dropped"),
        pytest.param({"a": (BOUND, "n1")}, {"a": (BOUND, "n1")}, [pod("a")], [], id="row still there"),
        pytest.param({"a": (BOUND, "n1")}, {}, [], [], id="pod deleted"),
        pytest.param({"a": (BOUND, "n1")}, {}, [pod("a", phase="Succeeded")], [], id="pod finished"),
        pytest.param({"a": (BOUND, "n1")}, {}, [pod("a", phase="Failed")], [], id="pod failed"),
        pytest.param({"a": (BOUND, "n1")}, {}, [pod("a", deleting=True)], [], id="pod terminating"),
        pytest.param({"a": (BOUND, "n1")}, {}, [pod("b")], [], id="recreated under another UID"),
        pytest.param({"a": (BOUND, "n1")}, {}, [pod("a", bound_to="n2")], [], id="pod on another node"),
        pytest.param({"a": (BOUND, "n1")}, {}, [pod("a", assigned="n2")], [], id="allocation elsewhere"),
        pytest.param({"a": (CONFIRMED, "n1")}, {}, [pod("a")], [], id="in-flight row forgotten"),
        pytest.param({"a": (ASSUMED, "n1")}, {}, [pod("a")], [], id="assumed row forgotten"),
        pytest.param({}, {}, [pod("a")], [], id="never in the ledger (bound by another replica)"),
        pytest.param(
            {"a": (BOUND, "n1"), "b": (BOUND, "n2"), "c": (BOUND, "n1")},
            {"b": (BOUND, "n2")},
            [pod("a"), pod("b", "n2"), pod("c", phase="Succeeded")],
            ["a"],
            id="only the live one of several",
        ),
    ],
)
def test_which_vanished_rows_are_drops(
    before: dict[str, tuple[str, str]],
    after: dict[str, tuple[str, str]],
    pods: list[dict[str, Any]],
    expected: list[str],
) -> None:
    assert dropped(before, after, {p["metadata"]["uid"]: p for p in pods}) == expected


@dataclass
class Replica:
    name: str
    state_dir: Path


class Cluster:
    """Which replicas are Ready and which pods the API has: what the storm gives the watch."""

    def __init__(self, ready: list[Replica], pods: list[dict[str, Any]]) -> None:
        self.ready = ready
        self.pods = pods

    def ready_ones(self) -> list[Replica]:
        return list(self.ready)

    def list_pods(self) -> list[dict[str, Any]]:
        return list(self.pods)


def bound_entry(uid: str, node: str = "n1") -> Entry:
    use = {"GPU-0": DeviceUse(1, 1000, 10)}
    return Entry(uid, "default", f"p-{uid}", node, BOUND, use, {}, "NVIDIA=GPU-0,NVIDIA,1000,10:;", 1.0)


def test_the_watch_reports_a_row_a_sweep_deleted_under_a_live_pod(tmp_path: Path) -> None:
    leader, standby = Replica("r0", tmp_path / "r0"), Replica("r1", tmp_path / "r1")
    ledger = Ledger(leader.state_dir)
    try:
        ledger.upsert([bound_entry("a"), bound_entry("b")])
        cluster = Cluster([leader], [pod("a"), pod("b")])
        watch = LedgerWatch(cluster, cluster.list_pods)
        watch.sample()
        ledger.remove(["a"])  # what finding 1's sweep did to a pod its lagging informer did not know
        cluster.pods = [pod("a"), pod("b", phase="Succeeded")]
        ledger.remove(["b"])  # a finished pod's row goes, as it should
        watch.sample()
        cluster.ready = [standby]  # another leader's ledger is never compared with this one's
        watch.sample()
        cluster.ready = [leader, standby]  # two Ready: not compared either
        watch.sample()
    finally:
        ledger.close()
    assert watch.summary() == {
        "ledger_samples": 1,
        "ledger_dropped_rows": 1,
        "ledger_dropped_first": [{"pod": "default/p-a", "uid": "a", "node": "n1"}],
    }
