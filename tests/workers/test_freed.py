"""Freed capacity is heard (workers/holdsweep.py, workers/freedtouch.py, docs/held-reservations.md): the
sweep ends expired holds and those whose owner is gone, the worker's rules record the nodes of removed
in-flight rows, and the leader touches each such node's annotation — at most once per node per second,
coalesced, never as a follower — against the API emulator (in process)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from worker_builders import VENDORS, allocation, gpu_pod

from app.core.holds import GANG, NOMINATION, Hold, gang_key, nomination_key
from app.core.model import DeviceUse
from app.k8s.client import Kube
from app.state.holdstore import EXPIRED, GONE, Freed
from app.state.ledger import CONFIRMED, Entry, Ledger
from sim.emulator.testing import EmulatorHandle, node, run_emulator
from workers import shapes
from workers.freedtouch import FREED_ANNOTATION, MIN_INTERVAL, FreedTouch
from workers.holdsweep import HoldSweep
from workers.informers import DELETED, Change
from workers.metrics import WorkerMetrics
from workers.reconcile import GONE_GRACE, Rules
from workers.reconciler import Reconciler

NOW = 1_000.0
ALLOC = allocation(("GPU-a", 1000, 10))


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with run_emulator(tmp_path / "sim") as handle:
        handle.seed([node(name) for name in ("n1", "n2")])
        yield handle


def _hold(kind: str, owner: str, node_name: str = "n1", expires: float = NOW + 60) -> Hold:
    key = nomination_key(owner) if kind == NOMINATION else gang_key(owner)
    use = {"GPU-a": DeviceUse(1, 1000, 0)}
    slot = "" if kind == NOMINATION else "m1"
    return Hold(key, slot, kind, owner, "default", owner, 5, node_name, use, (), "", NOW - 30, expires)


def _create(ledger: Ledger, hold: Hold) -> None:
    assert ledger.create_holds(hold.key, {hold.node}, lambda states: [hold], now=NOW)


def _pod(uid: str, **kwargs: Any) -> dict[str, Any]:
    return gpu_pod(uid, uid=uid, alloc=ALLOC, **kwargs)


SWEEPS = [
    pytest.param(_hold(NOMINATION, "p", expires=NOW), {"p": _pod("p", node=None)}, EXPIRED, id="expired"),
    pytest.param(_hold(NOMINATION, "p"), {}, GONE, id="preemptor deleted"),
    pytest.param(_hold(NOMINATION, "p"), {"p": _pod("p", node=None, phase="Failed")}, GONE, id="it failed"),
    pytest.param(_hold(NOMINATION, "p"), {"p": _pod("p")}, GONE, id="preemptor bound"),
    pytest.param(_hold(NOMINATION, "p"), {"p": _pod("p", node=None)}, "", id="preemptor pending: kept"),
    pytest.param(_hold(GANG, "default/g"), {}, "", id="gang plan: the gang planner's rule (none yet)"),
]  # fmt: skip


@pytest.mark.parametrize(("hold", "informer", "cause"), SWEEPS)
def test_the_sweep_ends_what_expired_or_lost_its_owner(
    ledger: Ledger, hold: Hold, informer: Mapping[str, dict[str, Any]], cause: str
) -> None:
    _create(ledger, hold)
    shaped = {uid: shapes.pod_shape(VENDORS)(pod) for uid, pod in informer.items()}
    metrics = WorkerMetrics()
    ended = HoldSweep(ledger, shaped.get, Clock(), metrics).run()
    assert [h.key for h in ended] == ([hold.key] if cause else [])
    assert ledger.hold_endings() == ({(hold.kind, cause): 1} if cause else {})
    assert [f.node for f in ledger.drain_freed()] == (["n1"] if cause else [])
    assert metrics.holds.labels(hold.kind)._value.get() == (0 if cause else 1)


def test_an_absent_preemptor_is_gone_only_after_the_grace(ledger: Ledger) -> None:
    """A pod created a moment ago may not have reached the informer yet."""
    hold = _hold(NOMINATION, "p")
    _create(ledger, hold)
    assert HoldSweep(ledger, {}.get, lambda: hold.created_at + GONE_GRACE - 1, WorkerMetrics()).run() == []


def test_a_deleted_pending_pod_and_a_swept_phantom_free_their_nodes(ledger: Ledger) -> None:
    use = {"GPU-a": DeviceUse(1, 1000, 0)}
    ledger.upsert([Entry(f"uid-{n}", "default", n, n, CONFIRMED, use, updated_at=NOW) for n in ("n1", "n2")])
    reconciler = Reconciler(ledger, Rules(frozenset({"hami-scheduler"}), VENDORS, 60.0), lambda: NOW)
    shape = shapes.pod_shape(VENDORS)
    reconciler.handle([Change(DELETED, shape(gpu_pod("n1", node=None, alloc=ALLOC)), None)])
    assert ledger.drain_freed() == [Freed("n1", "pending pod deleted", NOW)]
    later = Reconciler(ledger, Rules(frozenset({"hami-scheduler"}), VENDORS, 60.0), lambda: NOW + 100)
    pending = shape(gpu_pod("n2", node=None, alloc=ALLOC))
    later.sweep(lambda uid: pending, lambda namespace, name: pending)  # unbound past the TTL: a phantom
    assert ledger.all_entries() == []
    assert ledger.drain_freed() == [Freed("n2", "expired reservation swept", NOW + 100)]


def test_the_leader_touches_each_freed_node_at_most_once_a_second(
    sim: EmulatorHandle, kube: Kube, ledger: Ledger
) -> None:
    clock, ticks = Clock(), [100.0]
    touch = FreedTouch(kube, ledger, clock, WorkerMetrics(), monotonic=lambda: ticks[0])
    ledger.record_freed(["n1", "n2"], "expired", NOW)
    assert touch.step(lambda: True) == 2
    first = sim.get("nodes", "n1")["metadata"]["annotations"][FREED_ANNOTATION]
    clock.now += 0.5
    ticks[0] += 0.5
    ledger.record_freed(["n1"], "displaced", clock.now)
    ledger.record_freed(["n1"], "consumed", clock.now)
    assert touch.step(lambda: True) == 0 and touch.pending == {"n1": "displaced"}, "coalesced, waiting"
    clock.now += MIN_INTERVAL
    ticks[0] += MIN_INTERVAL
    assert touch.step(lambda: True) == 1 and touch.pending == {}
    assert sim.get("nodes", "n1")["metadata"]["annotations"][FREED_ANNOTATION] != first, (
        "a new value: a new event"
    )


def test_a_follower_drops_what_it_drains_and_writes_nothing(
    sim: EmulatorHandle, kube: Kube, ledger: Ledger
) -> None:
    touch = FreedTouch(kube, ledger, Clock(), WorkerMetrics())
    ledger.record_freed(["n1"], "expired", NOW)
    assert touch.step(lambda: False) == 0 and touch.pending == {}
    assert FREED_ANNOTATION not in (sim.get("nodes", "n1")["metadata"].get("annotations") or {})
    assert ledger.drain_freed() == []


def test_a_node_gone_from_the_api_is_dropped(sim: EmulatorHandle, kube: Kube, ledger: Ledger) -> None:
    metrics = WorkerMetrics()
    touch = FreedTouch(kube, ledger, Clock(), metrics)
    ledger.record_freed(["gone"], "expired", NOW)
    assert touch.step(lambda: True) == 0 and touch.pending == {}
    assert metrics.freed_touches.labels("failed")._value.get() == 1
