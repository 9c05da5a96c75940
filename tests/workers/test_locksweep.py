"""The leader's sweep of abandoned node locks (workers/locksweep.py) against the API emulator: exactly
the locks any other pod would take over now are released, everything is re-read from the API, and a
replica that stops leading stops sweeping."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.core.decision import ASSIGNED_NODE
from app.core.nodelock import (
    BIND_PHASE,
    LOCK_ANNOTATION,
    PHASE_ALLOCATING,
    PHASE_SUCCESS,
    format_lock,
    format_rfc3339,
)
from app.core.vendor import SHARED_LOCK, LockSpec
from app.k8s import objects
from app.k8s.client import Kube
from sim.emulator.testing import EmulatorHandle, node, run_emulator
from workers.locksweep import sweep_locks

EXPIRE = timedelta(minutes=5)
NOW = datetime.now(UTC)


@dataclass(frozen=True)
class Case:
    id: str
    lock: str | None  # "{ago:N}" ages the lock N seconds; None: no lock
    holder: dict[str, Any] | None  # the holder pod's phase, node, bind-phase; None: no such pod
    released: str  # the expected why ("" = kept)


def _lock(seconds_ago: float, name: str) -> str:
    return format_lock(NOW - timedelta(seconds=seconds_ago), "default", name)


CASES = [
    Case("no-lock", None, None, ""),
    Case("holder-deleted", "fresh", None, "holder default/holder-holder-deleted is gone"),
    Case("holder-succeeded", "fresh", {"phase": "Succeeded", "bound": True}, "is terminal"),
    Case("bind-in-flight", "fresh", {"phase": "Pending", "bound": False}, ""),
    Case("allocating", "fresh", {"phase": "Pending", "bound": True, "bind_phase": PHASE_ALLOCATING}, ""),
    Case(
        "expired-but-allocating",
        "expired",
        {"phase": "Pending", "bound": True, "bind_phase": PHASE_ALLOCATING},
        "",
    ),
    Case(
        "expired-twice-allocating",
        "expired-twice",
        {"phase": "Pending", "bound": True, "bind_phase": PHASE_ALLOCATING},
        "expired",
    ),
    Case(
        "expired-running",
        "expired",
        {"phase": "Running", "bound": True, "bind_phase": PHASE_SUCCESS},
        "is allocated",
    ),
    Case(  # a release the plugin lost: nobody needs it any more
        "running-fresh",
        "fresh",
        {"phase": "Running", "bound": True, "bind_phase": PHASE_SUCCESS},
        "is allocated",
    ),
    Case(  # a vendor whose plugin stamps no phase (our bind lock's): admitted, nobody needs it
        "running-fresh-no-phase", "fresh", {"phase": "Running", "bound": True}, "is allocated"
    ),
    Case(
        "moved-to-another-node",
        "fresh",
        {"phase": "Pending", "bound": False, "assigned": "elsewhere"},
        "gone",
    ),
    Case("unparsable", "garbage", None, "unparsable lock value"),
]
AGES = {"fresh": 5.0, "expired": 6 * 60.0, "expired-twice": 11 * 60.0}


def _objects(case: Case) -> list[dict[str, Any]]:
    name, holder = f"node-{case.id}", f"holder-{case.id}"
    value = (
        None if case.lock is None else case.lock if case.lock == "garbage" else _lock(AGES[case.lock], holder)
    )
    objs = [node(name, annotations={LOCK_ANNOTATION: value} if value else {})]
    if case.holder is not None:
        annotations = {ASSIGNED_NODE: case.holder.get("assigned", name)}
        if "bind_phase" in case.holder:
            annotations[BIND_PHASE] = case.holder["bind_phase"]
        spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
        if case.holder["bound"]:
            spec["nodeName"] = name
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": holder, "namespace": "default", "annotations": annotations},
                "spec": spec,
                "status": {"phase": case.holder["phase"]},
            }
        )
    return objs


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with run_emulator(tmp_path / "sim") as handle:
        handle.seed([obj for case in CASES for obj in _objects(case)])
        yield handle


def _nodes(sim: EmulatorHandle) -> list[dict[str, Any]]:
    return sim.list("nodes")


def test_exactly_the_abandoned_locks_are_released(sim: EmulatorHandle, kube: Kube) -> None:
    before = {
        n["metadata"]["name"]: n["metadata"].get("annotations", {}).get(LOCK_ANNOTATION) for n in _nodes(sim)
    }
    released = dict(sweep_locks(kube, _nodes(sim), NOW, EXPIRE, lambda: True))
    for case in CASES:
        name = f"node-{case.id}"
        after = (sim.get("nodes", name) or {})["metadata"].get("annotations", {}).get(LOCK_ANNOTATION)
        if case.released:
            assert case.released in released.get(name, ""), (case.id, released.get(name))
            assert after is None, case.id
        else:
            assert name not in released, (case.id, released.get(name))
            assert after == before[name], case.id
    assert len(released) == sum(1 for case in CASES if case.released)


def test_a_replica_that_stops_leading_stops_sweeping(sim: EmulatorHandle, kube: Kube) -> None:
    assert sweep_locks(kube, _nodes(sim), NOW, EXPIRE, lambda: False) == []
    assert (sim.get("nodes", "node-holder-deleted") or {})["metadata"]["annotations"][LOCK_ANNOTATION]


def test_a_lock_taken_again_since_the_informer_saw_it_is_kept(sim: EmulatorHandle, kube: Kube) -> None:
    """The informer's copy only says where to look: the node is re-read, and its current lock decides."""
    stale_view = [n for n in _nodes(sim) if n["metadata"]["name"] == "node-holder-deleted"]
    late = {  # a live pod, its bind in flight, took the node's lock over meanwhile
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "late",
            "namespace": "default",
            "annotations": {ASSIGNED_NODE: "node-holder-deleted"},
        },
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    sim.seed([late])
    fresh = _lock(1.0, "late")
    objects.patch_node_annotations(kube, "node-holder-deleted", {LOCK_ANNOTATION: fresh})
    assert sweep_locks(kube, stale_view, NOW, EXPIRE, lambda: True) == []
    assert (sim.get("nodes", "node-holder-deleted") or {})["metadata"]["annotations"][
        LOCK_ANNOTATION
    ] == fresh


DSMLU = LockSpec("cambricon.com/dsmlu.lock", owned=False, expire=timedelta(minutes=2))


@pytest.mark.parametrize(
    ("seconds_ago", "released"),
    [
        pytest.param(30.0, False, id="dsmlu-fresh-kept"),
        pytest.param(3 * 60.0, True, id="dsmlu-past-its-own-2min-expiry-released"),
    ],
)
def test_a_vendors_own_lock_is_swept_by_its_own_expiry(
    sim: EmulatorHandle, kube: Kube, seconds_ago: float, released: bool
) -> None:
    """Cambricon's bare-time lock names nobody: it is abandoned once older than its own expiry (2 min,
    shorter than HAMI_NODELOCK_EXPIRE here), beside HAMi's shared lock on the same node, which is kept."""
    value = format_rfc3339(NOW - timedelta(seconds=seconds_ago))
    shared = _lock(5.0, "holder-allocating")
    name = "node-allocating"  # its shared lock's holder waits for its Allocate: that lock stays
    objects.patch_node_annotations(kube, name, {DSMLU.annotation: value, LOCK_ANNOTATION: shared})
    view = [n for n in _nodes(sim) if n["metadata"]["name"] == name]
    swept = sweep_locks(kube, view, NOW, EXPIRE, lambda: True, (SHARED_LOCK, DSMLU))
    annotations = (sim.get("nodes", name) or {})["metadata"]["annotations"]
    assert annotations[LOCK_ANNOTATION] == shared
    if released:
        assert [n for n, _ in swept] == [name] and "legacy lock expired" in swept[0][1]
        assert DSMLU.annotation not in annotations
    else:
        assert swept == [] and annotations[DSMLU.annotation] == value


def test_without_the_vendor_spec_its_lock_is_not_touched(sim: EmulatorHandle, kube: Kube) -> None:
    value = format_rfc3339(NOW - timedelta(hours=1))
    objects.patch_node_annotations(kube, "node-no-lock", {DSMLU.annotation: value})
    view = [n for n in _nodes(sim) if n["metadata"]["name"] == "node-no-lock"]
    assert sweep_locks(kube, view, NOW, EXPIRE, lambda: True) == []
    assert (sim.get("nodes", "node-no-lock") or {})["metadata"]["annotations"][DSMLU.annotation] == value
