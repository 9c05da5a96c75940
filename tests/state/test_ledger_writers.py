"""The ledger-writer table (docs/ledger-writers.md): every writer of a reservation row, applied to a row in
every state, does exactly what the table says — in particular each forbidden transition (a filter, a
failed write or a failed bind removing or replacing a row that is or may be bound) is refused.

Each writer is called as its caller calls it: the filter's assume and no-fit forget, the deferred and the
synchronous write's outcome, the bind's re-check, success, failure and unknown outcome, and the registration
worker's rules through its `Reconciler` (live events, the sweep's API answers, a rebuild from a list). A
real ledger file per case. The same table, read as a model, predicts random sequences of writers
(hypothesis): what each writer does depends only on the row it finds.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from worker_builders import SCHEDULER, VENDORS, allocation, gpu_pod

from app.core.model import DeviceUse
from app.state.ledger import ASSUMED, BOUND, CONFIRMED, Entry, Ledger, Protected, RowState
from app.state.rows import BIND_REBUILT, BIND_UNKNOWN, NO_BIND
from workers import shapes
from workers.informers import DELETED, MODIFIED, Change
from workers.reconcile import Rules
from workers.reconciler import Reconciler

NOW = 1_800_000_000.0
TTL = 60.0
UID, NAMESPACE, NAME, NODE = "uid-p", "default", "p", "n1"
MINE, OTHER = "bind-mine", "bind-other"
A1 = allocation(("GPU-a", 1000, 10))  # what the row holds
A9 = allocation(("GPU-b", 2000, 20))  # another allocation on the API
ROW_A1 = f"NVIDIA={A1}"  # the row's allocation text, as /filter and `entry_for` record it
USES = {"GPU-a": DeviceUse(1, 1000, 10)}
RULES = Rules(frozenset({SCHEDULER}), VENDORS, TTL)
SHAPE = shapes.pod_shape(VENDORS)


def _row(state: str, bind: str = NO_BIND, age: float = 30.0) -> Entry:
    return Entry(UID, NAMESPACE, NAME, NODE, state, USES, {}, ROW_A1, NOW - age, bind)


STATES: dict[str, Callable[[float], Entry | None]] = {
    "absent": lambda age: None,
    "assumed": lambda age: _row(ASSUMED, age=age),
    "confirmed": lambda age: _row(CONFIRMED, age=age),
    "this bind's": lambda age: _row(CONFIRMED, MINE, age),
    "another bind's": lambda age: _row(CONFIRMED, OTHER, age),
    "unknown": lambda age: _row(CONFIRMED, BIND_UNKNOWN, age),
    "rebuilt": lambda age: _row(CONFIRMED, BIND_REBUILT, age),
    "bound": lambda age: _row(BOUND, age=age),
}

# Outcomes: "=" the row unchanged (or still absent); "-" removed; "!" refused (Protected), unchanged;
# otherwise "<state>" or "<state>+<mark>" with the allocation "a1" unless it says "a9".
KEEP, GONE, REFUSED = "=", "-", "!"


def _pod(*, node: str | None = NODE, alloc: str = A1, vgpu_time: int | None = None) -> dict[str, Any]:
    return gpu_pod(NAME, uid=UID, node=node, assigned=NODE, alloc=alloc, vgpu_time=vgpu_time)


class World:
    """A ledger with the pod's row, and the worker's reconciler on it."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.reconciler = Reconciler(ledger, RULES, lambda: NOW)

    def filter_entry(self, node_uses: object, quota: object) -> Entry:
        return Entry(UID, NAMESPACE, NAME, NODE, ASSUMED, USES, {}, ROW_A1, NOW)

    def live(self, kind: str, pod: dict[str, Any]) -> None:
        self.reconciler.handle([Change(kind, SHAPE(pod), None)])

    def sweep(self, informer: dict[str, Any] | None, api: dict[str, Any] | None) -> None:
        shaped = SHAPE(informer) if informer is not None else None
        self.reconciler.sweep(lambda uid: shaped, lambda ns, name: api)


@dataclass(frozen=True)
class Writer:
    name: str
    act: Callable[[World, RowState | None], object]
    outcomes: Mapping[str, str]  # start state -> outcome (the table's row)
    why: str
    age: float = 30.0  # of the row it finds, in seconds (younger than the TTL, older than GONE_GRACE)


def _assume(verified: bool) -> Callable[[World, RowState | None], object]:
    def act(world: World, row: RowState | None) -> object:
        check = world.filter_entry
        return world.ledger.assume(UID, NODE, check, verified=row if verified else None)

    return act


def _checked(world: World, row: RowState | None) -> object:
    entry = Entry(UID, NAMESPACE, NAME, NODE, CONFIRMED, USES, {}, ROW_A1, NOW)
    return world.ledger.record_checked(UID, NODE, lambda others: entry, MINE)


def _resolve(world: World, allocation: str, written: bool) -> object:
    return world.ledger.resolve_write(UID, allocation, written=written)


def _in_flight() -> dict[str, Any]:
    return _pod(node=None, vgpu_time=int(NOW) - 5)


def _states(*outcomes: str) -> dict[str, str]:
    assert len(outcomes) == len(STATES)
    return dict(zip(STATES, outcomes, strict=True))


#            absent       assumed      confirmed    this bind's  another      unknown      rebuilt      bound
WRITERS = [
    Writer("filter assume", _assume(False),
           _states("assumed", "assumed", "assumed", REFUSED, REFUSED, REFUSED, REFUSED, REFUSED),
           "a filter replaces only a decision no bind acted on"),
    Writer("filter assume, verified", _assume(True),
           _states("assumed", "assumed", "assumed", "assumed", "assumed", "assumed", "assumed", REFUSED),
           "the exact version read before a GET that showed the pod unbound; never a bound row"),
    Writer("filter, nothing fits", lambda w, r: w.ledger.forget_unbound(UID),
           _states(KEEP, GONE, GONE, KEEP, KEEP, KEEP, KEEP, KEEP),
           "forgets only its own decision no bind acted on"),
    Writer("filter, nothing fits, verified", lambda w, r: w.ledger.forget_unbound(UID, r),
           _states(KEEP, GONE, GONE, GONE, GONE, GONE, GONE, KEEP),
           "as the assume: the verified version, never a bound row"),
    Writer("deferred write written", lambda w, r: _resolve(w, ROW_A1, True),
           _states(KEEP, "confirmed", KEEP, KEEP, KEEP, KEEP, KEEP, KEEP),
           "only the assumed row it was written for"),
    Writer("deferred or synchronous write failed", lambda w, r: _resolve(w, ROW_A1, False),
           _states(KEEP, GONE, KEEP, KEEP, KEEP, KEEP, KEEP, KEEP),
           "only the assumed row it was written for: a row replaced or moved on since is not its"),
    Writer("write failed, row replaced since", lambda w, r: _resolve(w, "NVIDIA=a0", False),
           _states(KEEP, KEEP, KEEP, KEEP, KEEP, KEEP, KEEP, KEEP),
           "another allocation: the pod was filtered again"),
    Writer("synchronous write written", lambda w, r: w.ledger.set_state(UID, CONFIRMED, only_from=(ASSUMED,)),
           _states(KEEP, "confirmed", KEEP, KEEP, KEEP, KEEP, KEEP, KEEP),
           "assumed -> confirmed only"),
    Writer("bind re-check", _checked,
           _states("confirmed+mine", "confirmed+mine", "confirmed+mine", "confirmed+mine", "confirmed+other",
                   "confirmed+mine", "confirmed+mine", KEEP),
           "adopts or re-records the pod's allocation, marked (a running bind's mark kept); not a bound row"),
    Writer("bind bound", lambda w, r: w.ledger.set_state(UID, BOUND),
           _states(KEEP, "bound", "bound", "bound", "bound", "bound", "bound", KEEP),
           "the binding happened: bound, mark cleared"),
    Writer("bind found it bound", lambda w, r: w.ledger.set_state(UID, BOUND, only_from=(CONFIRMED,)),
           _states(KEEP, KEEP, "bound", "bound", "bound", "bound", "bound", KEEP),
           "a duplicate bind saw the pod bound to its node"),
    Writer("bind failed", lambda w, r: w.ledger.forget_in_flight(UID, NAMESPACE, NAME, MINE),
           _states(KEEP, GONE, GONE, GONE, KEEP, KEEP, KEEP, KEEP),
           "in flight, this pod's, unmarked or marked by this bind only"),
    Writer("bind failed, another pod's name", lambda w, r: w.ledger.forget_in_flight(UID, "x", "q", MINE),
           _states(KEEP, KEEP, KEEP, KEEP, KEEP, KEEP, KEEP, KEEP),
           "never another pod's row"),
    Writer("bind outcome unknown", lambda w, r: w.ledger.bind_unknown(UID, MINE),
           _states(KEEP, KEEP, KEEP, "confirmed+unknown", KEEP, KEEP, KEEP, KEEP),
           "its own mark becomes unknown: a filter must read the pod"),
    Writer("worker: pod bound", lambda w, r: w.live(MODIFIED, _pod()),
           _states("bound", "bound", "bound", "bound", "bound", "bound", "bound", "bound"),
           "the API is the truth (rule 2), the same allocation"),
    Writer("worker: bound pod's allocation changed", lambda w, r: w.live(MODIFIED, _pod(alloc=A9)),
           _states("bound+a9", "bound+a9", "bound+a9", "bound+a9", "bound+a9", "bound+a9", "bound+a9", KEEP),
           "a bound row keeps what its pod was bound with (rule 6)"),
    Writer("worker: pod deleted", lambda w, r: w.live(DELETED, _pod()),
           _states(KEEP, GONE, GONE, GONE, GONE, GONE, GONE, GONE),
           "no reservation outlives its pod"),
    Writer("worker: unbound pod changed", lambda w, r: w.live(MODIFIED, _pod(node=None)),
           _states(KEEP, KEEP, KEEP, KEEP, KEEP, KEEP, KEEP, KEEP),
           "unbound pods are never added or changed from the API"),
    Writer("sweep: API says gone", lambda w, r: w.sweep(None, None),
           _states(KEEP, GONE, GONE, GONE, GONE, GONE, GONE, GONE),
           "rule 3: only the API's answer removes a row the informer cannot vouch for"),
    Writer("sweep: unbound past the TTL", lambda w, r: w.sweep(_pod(node=None), _pod(node=None)),
           _states(KEEP, GONE, GONE, GONE, GONE, GONE, GONE, KEEP), "rule 3: kube-scheduler gave up on it",
           age=TTL + 30),
    Writer("rebuild: pod not listed", lambda w, r: w.reconciler.rebuild(lambda: []),
           _states(KEEP, KEEP, KEEP, KEEP, KEEP, KEEP, KEEP, GONE),
           "rule 4: in-flight rows younger than the TTL survive a rebuild"),
    Writer("rebuild: pod listed bound", lambda w, r: w.reconciler.rebuild(lambda: [_pod()]),
           _states("bound", "bound", "bound", "bound", "bound", "bound", "bound", "bound"),
           "rule 4: a rebuilt bound row wins"),
    Writer("rebuild: pod listed in flight", lambda w, r: w.reconciler.rebuild(lambda: [_in_flight()]),
           _states("confirmed+rebuilt", KEEP, KEEP, KEEP, KEEP, KEEP, KEEP, "confirmed+rebuilt"),
           "rule 4: marked rebuilt (a previous leader's bind may land); current in-flight rows win"),
]  # fmt: skip


def _outcome(before: Entry | None, after: Entry | None, refused: bool) -> str:
    if refused:
        assert after == before, "a refused write changed the row"
        return REFUSED
    if after == before:
        return KEEP
    if after is None:
        return GONE
    mark = {NO_BIND: "", MINE: "+mine", OTHER: "+other", BIND_UNKNOWN: "+unknown", BIND_REBUILT: "+rebuilt"}
    allocation_changed = "+a9" if after.allocation == f"NVIDIA={A9}" else ""
    return after.state + mark[after.bind] + allocation_changed


def _apply(ledger: Ledger, writer: Writer) -> str:
    before = ledger.get(UID)
    refused = False
    try:
        writer.act(World(ledger), ledger.row(UID))
    except Protected:
        refused = True
    return _outcome(before, ledger.get(UID), refused)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(tmp_path)
    try:
        yield opened
    finally:
        opened.close()


CASES = [
    pytest.param(writer, state, id=f"{writer.name} / {state}: {writer.outcomes[state]}")
    for writer in WRITERS
    for state in STATES
]


@pytest.mark.parametrize(("writer", "state"), CASES)
def test_each_writer_on_each_row(writer: Writer, state: str, ledger: Ledger) -> None:
    start = STATES[state](writer.age)
    if start is not None:
        ledger.upsert([start])
    assert _apply(ledger, writer) == writer.outcomes[state], writer.why


def test_no_filter_or_failure_path_removes_or_replaces_a_bound_row() -> None:
    """The table's promise, stated once: only the API's own word (the worker's live rules, the sweep's
    answers, a rebuild from a list) ever changes a bound row — and not even those its allocation."""
    api = {
        "worker: pod bound",
        "worker: pod deleted",
        "sweep: API says gone",
        "rebuild: pod not listed",
        "rebuild: pod listed bound",
    }
    api |= {"rebuild: pod listed in flight"}
    for writer in WRITERS:
        if writer.name not in api:
            assert writer.outcomes["bound"] in (KEEP, REFUSED), writer.name


def _state_of(entry: Entry | None) -> str:
    """The table's column for a row (its allocation aside)."""
    if entry is None:
        return "absent"
    marks = {NO_BIND: entry.state, MINE: "this bind's", OTHER: "another bind's"}
    return marks.get(entry.bind, {BIND_UNKNOWN: "unknown", BIND_REBUILT: "rebuilt"}.get(entry.bind, "?"))


@settings(max_examples=60, deadline=None)
@given(
    start=st.sampled_from(list(STATES)),
    steps=st.lists(st.sampled_from([w for w in WRITERS if w.age == 30.0]), min_size=1, max_size=8),
)
def test_the_table_predicts_any_sequence_of_writers(start: str, steps: list[Writer]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        ledger = Ledger(Path(folder))
        try:
            first = STATES[start](30.0)
            if first is not None:
                ledger.upsert([first])
            for writer in steps:
                before = ledger.get(UID)
                if before is not None:  # the table's rows: younger than the TTL, holding A1
                    before = dataclasses.replace(
                        before, updated_at=NOW - 30.0, uses=USES, quota={}, allocation=ROW_A1
                    )
                    ledger.upsert([before])
                expected = writer.outcomes[_state_of(before)]
                assert _apply(ledger, writer) == expected, (writer.name, _state_of(before))
        finally:
            ledger.close()
