"""Ledger reconciliation: each rule of workers/reconcile.py, and rebuild == live for random event streams."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_builders import ALLOCATED, ASSIGNED, SCHEDULER, VENDORS, allocation, gpu_pod

from app.core.model import DeviceUse
from app.core.podfacts import PodFacts
from app.state.ledger import ASSUMED, BOUND, CONFIRMED, Entry, Ledger, RowState
from workers import shapes
from workers.informers import ADDED, DELETED, MODIFIED, Change
from workers.reconcile import (
    GONE_GRACE,
    Rules,
    compare,
    confirmed,
    keep_current,
    live_verdict,
    rebuild,
    suspects,
)
from workers.reconciler import Reconciler

NOW = 1_800_000_000.0
TTL = 60.0
ADOPTED = "hami-vgpu"  # a migration: pods HAMi placed under its own name
RULES = Rules(frozenset({SCHEDULER, ADOPTED}), VENDORS, TTL)
SHAPE = shapes.pod_shape(VENDORS)
ALLOC = allocation(("GPU-a", 1000, 10))


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def change(kind: str, pod: dict[str, Any]) -> Change:
    return Change(kind, SHAPE(pod), None)


# -- rule 2: live events ---------------------------------------------------------------------------------

LIVE = [
    pytest.param(ADDED, gpu_pod("p", alloc=ALLOC), "upsert", id="bound with allocation: upsert bound"),
    pytest.param(
        MODIFIED, gpu_pod("p", alloc=ALLOC, deleting=True), "upsert", id="terminating keeps (#1368)"
    ),
    pytest.param(DELETED, gpu_pod("p", alloc=ALLOC), "remove", id="deleted: remove"),
    pytest.param(MODIFIED, gpu_pod("p", alloc=ALLOC, phase="Succeeded"), "remove", id="Succeeded: remove"),
    pytest.param(MODIFIED, gpu_pod("p", alloc=ALLOC, phase="Failed"), "remove", id="Failed: remove"),
    pytest.param(ADDED, gpu_pod("p", alloc=ALLOC, node=None), "nothing", id="unbound: never added live"),
    pytest.param(
        ADDED, gpu_pod("p", alloc=ALLOC, scheduler="default-scheduler"), "remove", id="foreign (#3041)"
    ),
    pytest.param(ADDED, gpu_pod("p", alloc=ALLOC, scheduler=ADOPTED), "upsert", id="adopted: upsert bound"),
    pytest.param(
        ADDED, gpu_pod("p", alloc=ALLOC, scheduler=ADOPTED, node=None), "nothing", id="adopted unbound"
    ),
    pytest.param(ADDED, gpu_pod("p", alloc="GPU-a,NVIDIA,lots,10:;"), "remove", id="corrupt: holds nothing"),
    pytest.param(ADDED, gpu_pod("p", alloc=None), "remove", id="bound, no allocation"),
    pytest.param(ADDED, gpu_pod("p", alloc=ALLOC, assigned=None), "remove", id="bound, no vgpu-node"),
]


@pytest.mark.parametrize(("kind", "pod", "action"), LIVE)
def test_live_rules(kind: str, pod: dict[str, Any], action: str) -> None:
    verdict = live_verdict(change(kind, pod), RULES, NOW)
    got = "upsert" if verdict.entry is not None else "remove" if verdict.remove else "nothing"
    assert got == action
    assert verdict.uid == "uid-p"
    if verdict.entry is not None:
        assert verdict.entry.state == BOUND
        assert verdict.entry.node == "n1"
        assert verdict.entry.allocation == f"NVIDIA={ALLOC}"


def test_corrupt_allocation_is_reported() -> None:
    verdict = live_verdict(change(ADDED, gpu_pod("p", alloc="GPU-a,NVIDIA,x,1:;")), RULES, NOW)
    assert verdict.remove and "invalid memory" in verdict.problem


def test_init_container_shrink_once_init_containers_finished() -> None:
    alloc = "GPU-a,NVIDIA,8000,50:;GPU-a,NVIDIA,1000,10:;"
    running = live_verdict(change(ADDED, gpu_pod("p", alloc=alloc, init_containers=["init"])), RULES, NOW)
    done = live_verdict(
        change(MODIFIED, gpu_pod("p", alloc=alloc, init_containers=["init"], init_done=True)), RULES, NOW
    )
    assert running.entry is not None and done.entry is not None
    assert running.entry.uses == {"GPU-a": DeviceUse(1, 8000, 50)}
    assert done.entry.uses == {"GPU-a": DeviceUse(1, 1000, 10)}


def test_handle_upserts_then_removes_and_skips_unchanged_writes(ledger: Ledger) -> None:
    problems: list[int] = []
    reconciler = Reconciler(ledger, RULES, lambda: NOW, on_problem=lambda: problems.append(1))
    reconciler.handle([change(ADDED, gpu_pod("p", alloc=ALLOC))])
    first = ledger.data_version()
    reconciler.handle([change(MODIFIED, gpu_pod("p", alloc=ALLOC, extra={"hami.io/bind-phase": "success"}))])
    assert ledger.data_version() == first, "an unchanged reservation is not rewritten"
    reconciler.handle([change(MODIFIED, gpu_pod("p", alloc="GPU-a,NVIDIA,x,1:;"))])
    assert ledger.all_entries() == [] and problems == [1]


def test_handle_last_event_of_a_batch_wins(ledger: Ledger) -> None:
    reconciler = Reconciler(ledger, RULES, lambda: NOW)
    pod = gpu_pod("p", alloc=ALLOC)
    reconciler.handle([change(ADDED, pod), change(DELETED, pod)])
    assert ledger.all_entries() == []
    reconciler.handle([change(DELETED, pod), change(ADDED, pod)])
    assert [e.uid for e in ledger.all_entries()] == ["uid-p"]


def test_rows_keep_the_pods_facts_and_follow_them(ledger: Ledger) -> None:
    """What preemption and gangs read of a holder without the API (app/core/podfacts.py): on the row from
    the first event, and followed when they change (a pod starting, then being deleted)."""
    reconciler = Reconciler(ledger, RULES, lambda: NOW)
    pod = gpu_pod("p", alloc=ALLOC)
    pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    pod["spec"] |= {"priority": 100, "schedulingGroup": {"podGroupName": "train"}}
    reconciler.handle([change(ADDED, pod)])
    row = ledger.get("uid-p")
    assert row is not None and row.facts == PodFacts(100, "2026-01-01T00:00:00Z", False, "default/train")
    pod["status"]["startTime"] = "2026-01-01T00:00:09Z"
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    reconciler.handle([change(MODIFIED, pod)])
    row = ledger.get("uid-p")
    assert row is not None and row.facts == PodFacts(100, "2026-01-01T00:00:09Z", True, "default/train")


def test_live_events_leave_in_flight_rows_of_unbound_pods_alone(ledger: Ledger) -> None:
    assumed = Entry("uid-p", "default", "p", "n1", ASSUMED, {"GPU-a": DeviceUse(1, 1000, 10)}, updated_at=NOW)
    ledger.upsert([assumed])
    reconciler = Reconciler(ledger, RULES, lambda: NOW)
    reconciler.handle([change(MODIFIED, gpu_pod("p", alloc=ALLOC, node=None))])
    assert ledger.get("uid-p") == assumed
    reconciler.handle([change(MODIFIED, gpu_pod("p", alloc=ALLOC))])  # the bind landed
    row = ledger.get("uid-p")
    assert row is not None and row.state == BOUND


# -- rule 3: sweep ---------------------------------------------------------------------------------------


def _row(uid: str, state: str, age: float) -> Entry:
    return Entry(uid, "default", uid, "n1", state, {}, updated_at=NOW - age)


SUSPECTS = [
    pytest.param(
        _row("u", ASSUMED, TTL + 1), gpu_pod("p", node=None, alloc=ALLOC), True, id="unbound past TTL"
    ),
    pytest.param(
        _row("u", CONFIRMED, TTL + 1), gpu_pod("p", node=None, alloc=ALLOC), True, id="confirmed past TTL"
    ),
    pytest.param(
        _row("u", ASSUMED, TTL - 1), gpu_pod("p", node=None, alloc=ALLOC), False, id="unbound in TTL"
    ),
    pytest.param(_row("u", ASSUMED, TTL + 1), gpu_pod("p", alloc=ALLOC), False, id="bound: event upserts it"),
    pytest.param(_row("u", BOUND, 3600), gpu_pod("p", alloc=ALLOC), False, id="bound row of a live pod"),
    pytest.param(_row("u", ASSUMED, GONE_GRACE + 1), None, True, id="absent from the informer"),
    pytest.param(_row("u", BOUND, GONE_GRACE + 1), None, True, id="bound row, absent from the informer"),
    pytest.param(_row("u", ASSUMED, GONE_GRACE - 1), None, False, id="pod not seen yet (informer lag)"),
]


def _state(row: Entry) -> RowState:
    return RowState(row.uid, row.state, row.updated_at, row.namespace, row.name, row.bind, row.node)


@pytest.mark.parametrize(("row", "pod", "suspect"), SUSPECTS)
def test_sweep_suspects(row: Entry, pod: dict[str, Any] | None, suspect: bool) -> None:
    shaped = SHAPE(pod) if pod is not None else None
    assert suspects([_state(row)], lambda uid: shaped, RULES, NOW) == ([_state(row)] if suspect else [])


def _uid(pod: dict[str, Any], uid: str) -> dict[str, Any]:
    return {**pod, "metadata": {**pod["metadata"], "uid": uid}}


CONFIRMED_BY_API = [
    pytest.param(_row("u", BOUND, 3600), None, "remove", id="404: gone"),
    pytest.param(_row("u", BOUND, 3600), gpu_pod("p", alloc=ALLOC), "remove", id="another UID: gone"),
    pytest.param(
        _row("u", BOUND, 3600), _uid(gpu_pod("p", alloc=ALLOC, phase="Failed"), "u"), "remove", id="terminal"
    ),
    pytest.param(_row("u", BOUND, 3600), _uid(gpu_pod("p", alloc=ALLOC), "u"), "upsert", id="bound: kept"),
    pytest.param(
        _row("u", CONFIRMED, TTL + 1), _uid(gpu_pod("p", alloc=ALLOC), "u"), "upsert", id="bound meanwhile"
    ),
    pytest.param(
        _row("u", ASSUMED, GONE_GRACE + 1),
        _uid(gpu_pod("p", node=None, alloc=ALLOC), "u"),
        "nothing",
        id="unbound in TTL: informer lag",
    ),
    pytest.param(
        _row("u", CONFIRMED, TTL + 1),
        _uid(gpu_pod("p", node=None, alloc=ALLOC), "u"),
        "remove",
        id="unbound past TTL: given up",
    ),
    pytest.param(
        _row("u", BOUND, 3600),
        _uid(gpu_pod("p", alloc=ALLOC, scheduler="other"), "u"),
        "remove",
        id="foreign",
    ),
]


@pytest.mark.parametrize(("row", "pod", "action"), CONFIRMED_BY_API)
def test_sweep_acts_only_on_the_apis_answer(row: Entry, pod: dict[str, Any] | None, action: str) -> None:
    verdict = confirmed(_state(row), SHAPE(pod) if pod is not None else None, RULES, NOW)
    assert ("remove" if verdict.remove else "upsert" if verdict.entry else "nothing") == action


def test_sweep_keeps_rows_the_api_still_has_however_far_the_informer_lags(ledger: Ledger) -> None:
    """Finding 1 of issue 11: a lagging pod watch must not make live reservations vanish."""
    pod = _uid(gpu_pod("p", alloc=ALLOC), "uid-p")
    live = rebuild([SHAPE(pod)], RULES, NOW).entries[0]
    ledger.upsert([dataclasses.replace(live, updated_at=NOW - 3600), _row("gone", BOUND, 3600)])
    asked: list[tuple[str, str]] = []

    def fetch(namespace: str, name: str) -> dict[str, Any] | None:
        asked.append((namespace, name))
        return SHAPE(pod) if name == "p" else None

    counts = Reconciler(ledger, RULES, lambda: NOW).sweep(lambda uid: None, fetch)
    assert sorted(asked) == [("default", "gone"), ("default", "p")]
    assert [e.uid for e in ledger.all_entries()] == ["uid-p"]
    assert counts == {ASSUMED: 0, CONFIRMED: 0, BOUND: 1}


def test_sweep_keeps_a_row_when_the_api_does_not_answer(ledger: Ledger) -> None:
    ledger.upsert([_row("u", BOUND, 3600)])

    def fetch(namespace: str, name: str) -> dict[str, Any] | None:
        raise TimeoutError("no answer")

    Reconciler(ledger, RULES, lambda: NOW).sweep(lambda uid: None, fetch)
    assert [e.uid for e in ledger.all_entries()] == ["u"]


def test_sweep_counts_rows_by_state(ledger: Ledger) -> None:
    ledger.upsert([_row("a", BOUND, 0), _row("b", ASSUMED, 0), _row("gone", BOUND, 3600)])
    pods = {"a": SHAPE(gpu_pod("a", alloc=ALLOC)), "b": SHAPE(gpu_pod("b", node=None))}
    assert sorted(ledger.row_states()) == sorted(_state(e) for e in ledger.all_entries())
    counts = Reconciler(ledger, RULES, lambda: NOW).sweep(pods.get, lambda namespace, name: None)
    assert counts == {ASSUMED: 1, CONFIRMED: 0, BOUND: 1}
    assert [e.uid for e in ledger.all_entries()] == ["a", "b"]


# -- rule 4: rebuild -------------------------------------------------------------------------------------

REBUILD = [
    pytest.param(gpu_pod("p", alloc=ALLOC), BOUND, id="bound"),
    pytest.param(
        gpu_pod("p", alloc=ALLOC, node=None, vgpu_time=int(NOW - 10)), CONFIRMED, id="bind in flight"
    ),
    pytest.param(
        gpu_pod("p", alloc=ALLOC, node=None, extra={"hami.io/bind-time": str(int(NOW - 5))}),
        CONFIRMED,
        id="bind-time in flight",
    ),
    pytest.param(gpu_pod("p", alloc=ALLOC, node=None, vgpu_time=int(NOW - TTL - 1)), None, id="given up"),
    pytest.param(gpu_pod("p", alloc=ALLOC, node=None), None, id="unbound, no time"),
    pytest.param(gpu_pod("p", alloc=ALLOC, phase="Succeeded"), None, id="terminal"),
    pytest.param(gpu_pod("p", alloc=ALLOC, scheduler="other"), None, id="foreign scheduler"),
    pytest.param(gpu_pod("p", alloc=ALLOC, scheduler=ADOPTED), BOUND, id="adopted"),
    pytest.param(
        gpu_pod("p", alloc=ALLOC, node=None, scheduler=ADOPTED, vgpu_time=int(NOW - 10)),
        CONFIRMED,
        id="adopted bind in flight",
    ),
    pytest.param(gpu_pod("p", alloc=ALLOC, deleting=True), BOUND, id="terminating"),
]


@pytest.mark.parametrize(("pod", "state"), REBUILD)
def test_rebuild_rules(pod: dict[str, Any], state: str | None) -> None:
    rebuilt = rebuild([SHAPE(pod)], RULES, NOW)
    assert [e.state for e in rebuilt.entries] == ([state] if state else [])


def test_rebuild_reports_corrupt_pods() -> None:
    rebuilt = rebuild([SHAPE(gpu_pod("p", alloc="GPU-a,NVIDIA,x,1:;"))], RULES, NOW)
    assert rebuilt.entries == () and rebuilt.problems[0][0] == "default/p"


def test_rebuild_keeps_young_in_flight_rows_and_bound_wins(ledger: Ledger) -> None:
    use = {"GPU-a": DeviceUse(1, 1000, 10)}
    ledger.upsert(
        [
            Entry("young", "default", "young", "n1", ASSUMED, use, updated_at=NOW - 5),
            Entry("old", "default", "old", "n1", ASSUMED, use, updated_at=NOW - TTL - 5),
            Entry("uid-b", "default", "b", "n1", CONFIRMED, use, updated_at=NOW - 5),
            Entry("stale-bound", "default", "x", "n1", BOUND, use, updated_at=NOW - 5),
        ]
    )
    pods = [SHAPE(gpu_pod("b", alloc=ALLOC)), SHAPE(gpu_pod("c", alloc=ALLOC))]
    Reconciler(ledger, RULES, lambda: NOW).rebuild(lambda: pods)
    rows = {e.uid: e.state for e in ledger.all_entries()}
    assert rows == {"young": ASSUMED, "uid-b": BOUND, "uid-c": BOUND}


def test_keep_current_prefers_a_live_assume_over_a_rebuilt_in_flight_row() -> None:
    rebuilt = rebuild([SHAPE(gpu_pod("p", node=None, alloc=ALLOC, vgpu_time=int(NOW)))], RULES, NOW)
    keep = keep_current(rebuilt, RULES, NOW, NOW - 1)
    assert keep(_row("uid-p", ASSUMED, 1))
    assert not keep(_row("uid-p", ASSUMED, TTL + 1))


def test_rebuild_keeps_a_row_bound_while_the_list_ran(ledger: Ledger) -> None:
    """A pod filtered and bound after the list began is in neither the list nor an in-flight state."""
    clock = iter([NOW - 2, NOW])
    reconciler = Reconciler(ledger, RULES, lambda: next(clock))

    def listing() -> list[dict[str, Any]]:
        ledger.upsert([_row("bound-meanwhile", BOUND, 1)])  # written at NOW - 1, while the list runs
        return []

    reconciler.rebuild(listing)
    assert [e.uid for e in ledger.all_entries()] == ["bound-meanwhile"]


def test_a_bound_pods_allocation_is_not_followed(ledger: Ledger) -> None:
    """Rule 6: a rewrite of a bound pod's allocation on the API is counted, never followed."""
    rewrites: list[int] = []
    reconciler = Reconciler(ledger, RULES, lambda: NOW, on_rewrite=lambda: rewrites.append(1))
    reconciler.handle([change(ADDED, gpu_pod("p", alloc=ALLOC))])
    before = ledger.get("uid-p")
    moved = gpu_pod("p", alloc=allocation(("GPU-b", 1000, 10)))
    reconciler.handle([change(MODIFIED, moved)])
    assert ledger.get("uid-p") == before and rewrites == [1]
    reconciler.rebuild(lambda: [SHAPE(moved)])
    assert ledger.get("uid-p") == before


def test_audit_replaces_only_on_drift(ledger: Ledger) -> None:
    reconciler = Reconciler(ledger, RULES, lambda: NOW)
    pods = [SHAPE(gpu_pod("p", alloc=ALLOC))]
    reconciler.rebuild(lambda: pods)
    version = ledger.data_version()
    assert not reconciler.rebuild(lambda: pods, only_on_drift=True)
    assert ledger.data_version() == version
    drift = reconciler.rebuild(lambda: [*pods, SHAPE(gpu_pod("q", alloc=ALLOC))], only_on_drift=True)
    assert drift.missing == ("uid-q",)
    assert len(ledger.all_entries()) == 2


def test_compare_ignores_in_flight_and_write_times() -> None:
    bound = _row("a", BOUND, 0)
    assert not compare([bound], [_row("a", BOUND, 100)])
    assert not compare([bound], [_row("a", CONFIRMED, 0)]), "its bind is landing"
    drift = compare([bound], [_row("b", BOUND, 0), _row("c", ASSUMED, 0)])
    assert (drift.missing, drift.extra, drift.changed) == (("a",), ("b",), ())
    moved = Entry("a", "default", "a", "n2", BOUND, {})
    assert compare([bound], [moved]).changed == ("a",)


# -- rule 5: rebuild == live for random event streams (HAMi #2812/#2876, Koordinator #1289) --------------

NAMES = [f"p{i}" for i in range(6)]
ALLOCATIONS = [
    ALLOC,
    allocation(("GPU-a", 2000, 20), ("GPU-b", 500, 0)),
    "GPU-a,NVIDIA,8000,50:;GPU-b,NVIDIA,1000,10:;",  # with an init container: init peak vs app
    "GPU-a,NVIDIA,oops,1:;",  # corrupt
    None,
]


@st.composite
def pod_states(draw: st.DrawFn, name: str, generation: int, bound: bool) -> dict[str, Any]:
    """One state of pod `name` (uid changes with `generation`: a deleted pod may come back)."""
    is_bound = bound or draw(st.booleans())
    inits = ["init"] if draw(st.booleans()) else []
    pod = gpu_pod(
        name,
        uid=f"{name}-{generation}",
        node=draw(st.sampled_from(["n1", "n2"])) if is_bound else None,
        assigned=draw(st.sampled_from(["n1", "n2", None])),
        alloc=draw(st.sampled_from(ALLOCATIONS)),
        scheduler=draw(st.sampled_from([SCHEDULER, SCHEDULER, ADOPTED, "default-scheduler"])),
        phase=draw(st.sampled_from(["Pending", "Running", "Running", "Succeeded", "Failed"])),
        vgpu_time=draw(st.sampled_from([None, int(NOW - 5), int(NOW - 600)])),
        init_containers=inits,
        init_done=draw(st.booleans()),
        deleting=draw(st.booleans()),
    )
    # the facts a row keeps (app/core/podfacts.py) change too: a rebuild must see them as live events did
    pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    if draw(st.booleans()):
        pod["status"]["startTime"] = draw(st.sampled_from(["2026-01-01T00:00:05Z", "2026-01-01T00:01:00Z"]))
    if draw(st.booleans()):
        pod["spec"]["priority"] = draw(st.integers(-10, 10))
    if draw(st.booleans()):
        pod["spec"]["schedulingGroup"] = {"podGroupName": draw(st.sampled_from(["g1", "g2"]))}
    return pod


@st.composite
def event_streams(draw: st.DrawFn) -> tuple[list[Change], list[dict[str, Any]]]:
    """Random adds/updates/deletes (with Kubernetes' rule that a bound pod stays bound, and ours that its
    allocation stays what it was bound with), some delivered
    in batches as a re-list would; returns the changes and the final pod set."""
    live: dict[str, dict[str, Any]] = {}
    generations = dict.fromkeys(NAMES, 0)
    batches: list[list[Change]] = []
    for _ in range(draw(st.integers(1, 40))):
        name = draw(st.sampled_from(NAMES))
        current = live.get(name)
        if current is not None and draw(st.integers(0, 4)) == 0:
            del live[name]
            generations[name] += 1
            batches.append([Change(DELETED, current, current)])
            continue
        was_bound = current is not None and bool(current["spec"].get("nodeName"))
        state = SHAPE(draw(pod_states(name, generations[name], was_bound)))
        if was_bound and current is not None:
            state["spec"]["nodeName"] = current["spec"]["nodeName"]
            # a bound pod's allocation is immutable: the webhook refuses a change (rule 6)
            annotations = state["metadata"]["annotations"]
            for key in (ASSIGNED, ALLOCATED):
                annotations.pop(key, None)
                if key in current["metadata"]["annotations"]:
                    annotations[key] = current["metadata"]["annotations"][key]
        kind = MODIFIED if current is not None else ADDED
        live[name] = state
        change_ = Change(kind, state, current)
        joins_previous = draw(st.booleans())
        if batches and joins_previous:
            batches[-1].append(change_)
        else:
            batches.append([change_])
    flat = [c for batch in batches for c in batch]
    return flat, list(live.values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=event_streams(), batch=st.booleans())
def test_rebuild_equals_live(stream: tuple[list[Change], list[dict[str, Any]]], batch: bool) -> None:
    changes, final_pods = stream
    with tempfile.TemporaryDirectory() as directory:
        ledger = Ledger(Path(directory))
        try:
            reconciler = Reconciler(ledger, RULES, lambda: NOW)
            if batch:
                reconciler.handle(changes)
            else:
                for one in changes:
                    reconciler.handle([one])
            live = ledger.all_entries()
            rebuilt = rebuild(final_pods, RULES, NOW)
            assert not compare(rebuilt.entries, live), compare(rebuilt.entries, live)
            assert {e.uid for e in live} == {e.uid for e in rebuilt.entries if e.state == BOUND}
            reconciler.rebuild(lambda: final_pods)
            assert not compare(rebuilt.entries, ledger.all_entries())
        finally:
            ledger.close()
