"""Reservations kube-scheduler never bound (docs/gangs.md, workers/phantoms.py): the bound, the one row per
UID, the removal of the pod's annotations, and a sweep that never removes a row written meanwhile."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from worker_builders import ALLOCATED, ASSIGNED, ASSIGNED_TIME, SCHEDULER, VENDORS, allocation, gpu_pod

from app.core.model import DeviceUse
from app.state.ledger import ASSUMED, BOUND, CONFIRMED, Entry, Ledger, RowState
from workers.phantoms import Phantom, phantom
from workers.reconcile import Rules
from workers.reconciler import Reconciler
from workers.worker import SWEEP_EVERY

NOW = 1_800_000_000.0
TTL = 60.0
RULES = Rules(frozenset({SCHEDULER}), VENDORS, TTL)
ALLOC = allocation(("GPU-a", 1000, 10))


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def _entry(uid: str, node: str, at: float, state: str = ASSUMED) -> Entry:
    return Entry(uid, "default", uid, node, state, {"GPU-a": DeviceUse(1000, 10)}, updated_at=at)


def _pending(
    uid: str, version: str = "7", vgpu_time: int = int(NOW - TTL - 1), **extra: Any
) -> dict[str, Any]:
    """The pod as the sweep's GET returns it: unbound, with the filter's annotations."""
    pod = gpu_pod(uid, uid=uid, node=None, alloc=ALLOC, vgpu_time=vgpu_time, **extra)
    pod["metadata"]["resourceVersion"] = version
    return pod


def test_a_pod_filtered_again_holds_one_reservation(ledger: Ledger) -> None:
    """(a) The ledger is keyed by UID: the second assume of a pod replaces its first, on any node."""
    first = ledger.assume("u", "n1", lambda others, quota: _entry("u", "n1", NOW))
    second = ledger.assume("u", "n2", lambda others, quota: _entry("u", "n2", NOW + 1))
    assert first is not None and second is not None
    assert [(e.uid, e.node) for e in ledger.all_entries()] == [("u", "n2")]


# -- (b) the bound: released within TTL + one sweep period after the pod's last filter ---------------------


@given(phase=st.floats(0, SWEEP_EVERY, exclude_max=True), ttl=st.sampled_from([3.0, 60.0]))
def test_an_unbound_reservation_is_released_within_the_ttl_and_one_sweep(phase: float, ttl: float) -> None:
    """Sweeps every SWEEP_EVERY seconds at any phase after the filter at NOW: the first sweep after the TTL
    removes the row, none before."""
    rules = Rules(frozenset({SCHEDULER}), VENDORS, ttl)
    pod = _pending("u")
    released_at = None
    with tempfile.TemporaryDirectory() as folder:
        opened = Ledger(Path(folder))
        try:
            opened.upsert([_entry("u", "n1", NOW, CONFIRMED)])
            clock = [NOW]
            reconciler = Reconciler(opened, rules, lambda: clock[0])
            for sweep in range(int(ttl / SWEEP_EVERY) + 3):
                clock[0] = NOW + phase + sweep * SWEEP_EVERY
                reconciler.sweep(lambda uid: pod, lambda namespace, name: pod)
                if opened.get("u") is None:
                    released_at = clock[0] - NOW
                    break
        finally:
            opened.close()
    assert released_at is not None and ttl < released_at <= ttl + SWEEP_EVERY


# -- the pod's annotations go with the reservation ---------------------------------------------------------

PHANTOMS = [
    pytest.param(_pending("u"), ("7", (ALLOCATED, ASSIGNED, ASSIGNED_TIME)), id="unbound: every owned key"),
    pytest.param(
        _pending("u", extra={"hami.io/bind-phase": "failed", "team": "a"}),
        ("7", (ALLOCATED, "hami.io/bind-phase", ASSIGNED, ASSIGNED_TIME)),
        id="a failed bind's phase too, never a foreign key",
    ),
    pytest.param({**_pending("u"), "spec": {"nodeName": "n1"}}, None, id="bound: nothing"),
    pytest.param(_pending("other"), None, id="another UID under the name: nothing"),
    pytest.param(None, None, id="404: nothing"),
    pytest.param(gpu_pod("u", uid="u", node=None, assigned=None), None, id="no key of ours: nothing"),
]


@pytest.mark.parametrize(("pod", "expected"), PHANTOMS)
def test_which_keys_an_expired_reservation_removes(
    pod: dict[str, Any] | None, expected: tuple[str, tuple[str, ...]] | None
) -> None:
    found = phantom(pod, "u", VENDORS)
    got = (found.resource_version, found.keys) if found else None
    assert got == ((expected[0], tuple(sorted(expected[1]))) if expected else None)


SWEPT = [
    pytest.param(TTL + 1, _pending("u"), True, False, id="unbound past the TTL: released"),
    pytest.param(TTL - 1, _pending("u"), False, True, id="unbound in the TTL: kept, nothing released"),
    pytest.param(TTL + 1, None, False, False, id="deleted: removed, nothing to release"),
    pytest.param(TTL + 1, {**_pending("u"), "spec": {"nodeName": "n1"}}, False, True, id="bound: kept"),
    pytest.param(
        TTL + 1,
        _pending("u", vgpu_time=int(NOW - 1)),
        False,
        False,
        id="row expired, annotations fresh (another replica's filter): row removed, annotations kept",
    ),
]


@pytest.mark.parametrize(("age", "pod", "released", "kept"), SWEPT)
def test_the_sweep_releases_the_annotations_of_what_it_removed_as_expired(
    ledger: Ledger, age: float, pod: dict[str, Any] | None, released: bool, kept: bool
) -> None:
    ledger.upsert([_entry("u", "n1", NOW - age, CONFIRMED)])
    calls: list[Phantom] = []
    shaped = {"u": pod} if pod is not None else {}
    Reconciler(ledger, RULES, lambda: NOW, release=calls.append).sweep(
        lambda uid: shaped.get(uid), lambda namespace, name: pod
    )
    keys = tuple(sorted((ALLOCATED, ASSIGNED, ASSIGNED_TIME)))
    assert calls == ([Phantom("default", "u", "u", "7", keys)] if released else [])
    assert (ledger.get("u") is not None) == kept


def test_a_failed_release_keeps_the_sweep_going(ledger: Ledger) -> None:
    ledger.upsert([_entry("u", "n1", NOW - TTL - 1, CONFIRMED), _entry("v", "n1", NOW - TTL - 1)])
    pods = {"u": _pending("u"), "v": _pending("v")}
    released: list[str] = []

    def release(found: Phantom) -> None:
        if found.uid == "u":
            raise ConnectionError("API down")
        released.append(found.uid)

    counts = Reconciler(ledger, RULES, lambda: NOW, release=release).sweep(
        pods.get, lambda namespace, name: pods[name]
    )
    assert released == ["v"] and ledger.all_entries() == [] and counts[CONFIRMED] == 0


# -- the sweep removes only the row it read ---------------------------------------------------------------


class RefilteredDuringTheCheck(Ledger):
    """Another process (a Gunicorn worker's /filter of the same pod) replaces the row right after the
    sweep's check read it: the window between that check and the removal."""

    def get(self, uid: str) -> Entry | None:
        read = super().get(uid)
        if read is not None and read.updated_at < NOW:
            self.upsert([dataclasses.replace(read, state=ASSUMED, updated_at=NOW)])
        return read


def test_a_row_replaced_after_the_sweeps_check_is_not_removed(tmp_path: Path) -> None:
    opened = RefilteredDuringTheCheck(tmp_path)
    try:
        opened.upsert([_entry("u", "n1", NOW - TTL - 1, CONFIRMED)])
        pod = _pending("u")
        Reconciler(opened, RULES, lambda: NOW).sweep(lambda uid: pod, lambda namespace, name: pod)
        kept = opened.get("u")
    finally:
        opened.close()
    assert kept is not None and (kept.state, kept.updated_at) == (ASSUMED, NOW)


def test_remove_unchanged_removes_exactly_the_rows_still_as_read(ledger: Ledger) -> None:
    ledger.upsert([_entry("a", "n1", NOW), _entry("b", "n1", NOW), _entry("c", "n1", NOW, BOUND)])
    read = {r.uid: r for r in ledger.row_states()}
    ledger.upsert([_entry("b", "n1", NOW + 1)])  # filtered again
    ledger.set_state("c", CONFIRMED)  # another state
    stale = RowState("gone", ASSUMED, NOW)
    assert ledger.remove_unchanged([read["a"], read["b"], read["c"], stale]) == ["a"]
    assert sorted(e.uid for e in ledger.all_entries()) == ["b", "c"]
