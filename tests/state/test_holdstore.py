"""The ledger's held reservations (app/state/holdstore.py, docs/held-reservations.md): created atomically
with a re-check, consumed and displaced by an assume in its own transaction, ended by the sweep, H1 kept by
every row writer, and every ending counted and its freed capacity recorded. A real ledger file per test."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from core_builders import VENDORS, gpu, node

from app.core.holds import GANG, NOMINATION, Asker, Hold, gang_key, nomination_key
from app.core.model import DeviceUse, NodeDevices
from app.state.holdstore import CONSUMED, DISPLACED, EXPIRED, GONE, Asking, Freed, Judge, NodeState
from app.state.ledger import ASSUMED, BOUND, CONFIRMED, Entry, Ledger

NOW = 1_000.0
NODES = {name: node(name, gpu(f"{name}-0", 0, count=4, mem=10000, core=100)) for name in ("n1", "n2")}


def _devices(name: str) -> NodeDevices | None:
    return NODES.get(name)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(tmp_path)
    opened.use_judge(Judge(_devices, VENDORS, lambda: NOW))
    try:
        yield opened
    finally:
        opened.close()


def _use(mem: int, node_name: str = "n1") -> dict[str, DeviceUse]:
    return {f"{node_name}-0": DeviceUse(1, mem, 0)}


def _row(uid: str, mem: int, node_name: str = "n1", state: str = BOUND) -> Entry:
    return Entry(uid, "default", uid, node_name, state, _use(mem, node_name), updated_at=NOW)


def _nomination(
    owner: str, mem: int, *, priority: int = 10, node_name: str = "n1", victims: Sequence[str] = ()
) -> Hold:
    uses, reason = _use(mem, node_name), f"preempting for {owner}"
    key = nomination_key(owner)
    return Hold(
        key,
        "",
        NOMINATION,
        owner,
        "default",
        owner,
        priority,
        node_name,
        uses,
        tuple(victims),
        reason,
        NOW,
        NOW + 30,
    )


def _gang_slot(gang: str, member: str, mem: int, *, priority: int = 10, node_name: str = "n1") -> Hold:
    uses, name = _use(mem, node_name), gang.split("/")[1]
    return Hold(
        gang_key(gang), member, GANG, gang, "default", name, priority, node_name, uses, (), "", NOW, NOW + 30
    )


def _create(ledger: Ledger, *slots: Hold, victims: Sequence[str] = ()) -> list[Hold] | None:
    seen: list[Mapping[str, NodeState]] = []

    def check(states: Mapping[str, NodeState]) -> Sequence[Hold] | None:
        seen.append(states)
        return slots

    return ledger.create_holds(slots[0].key, {s.node for s in slots}, check, now=NOW, victims=victims)


def _keys(ledger: Ledger) -> set[str]:
    return {h.key for h in ledger.all_holds()[1]}


def _filter_entry(uid: str, mem: int, node_name: str = "n1") -> Entry:
    return _row(uid, mem, node_name, ASSUMED)


def test_create_sees_rows_without_its_victims_and_the_other_live_slots(ledger: Ledger) -> None:
    ledger.upsert([_row("victim", 6000), _row("other", 1000)])
    assert _create(ledger, _gang_slot("default/g", "m1", 1000)) is not None
    expired = dataclasses.replace(_nomination("old", 500), expires_at=NOW - 70)
    ledger.create_holds(expired.key, {"n1"}, lambda states: [expired], now=NOW - 100)
    seen: list[NodeState] = []

    def check(states: Mapping[str, NodeState]) -> Sequence[Hold]:
        seen.append(states["n1"])
        return [_nomination("p", 6000, victims=["victim"])]

    version = ledger.all_holds()[0]
    assert ledger.create_holds(nomination_key("p"), {"n1"}, check, now=NOW, victims=["victim"]) is not None
    assert set(seen[0].rows) == {"other"}, "the victims' rows are left out"
    assert [h.key for h in seen[0].holds] == [gang_key("default/g")], "other live slots only"
    assert ledger.all_holds()[0] > version, "every change moves the version"


def test_a_refused_check_writes_nothing(ledger: Ledger) -> None:
    version = ledger.all_holds()[0]
    assert ledger.create_holds("nomination/p", {"n1"}, lambda states: None, now=NOW) is None
    assert ledger.all_holds() == (version, [])


def test_a_remade_hold_replaces_its_slots_and_frees_the_nodes_it_left(ledger: Ledger) -> None:
    _create(ledger, _gang_slot("default/g", "m1", 1000), _gang_slot("default/g", "m2", 1000, node_name="n2"))
    ledger.drain_freed()
    _create(ledger, _gang_slot("default/g", "m1", 2000))
    assert [(h.slot, h.node) for h in ledger.all_holds()[1]] == [("m1", "n1")]
    assert [f.node for f in ledger.drain_freed()] == ["n2"]


def test_a_higher_priority_hold_displaces_a_lower_one_and_a_lower_one_is_refused(ledger: Ledger) -> None:
    _create(ledger, _nomination("low", 6000, priority=1))
    assert _create(ledger, _nomination("high", 6000, priority=5)) is not None
    assert _keys(ledger) == {nomination_key("high")}
    assert ledger.hold_endings() == {(NOMINATION, DISPLACED): 1}
    assert [(f.node, f.cause) for f in ledger.drain_freed()] == [
        ("n1", f"displaced by {nomination_key('high')}")
    ]
    assert _create(ledger, _nomination("lower", 6000, priority=1)) is None, "it would itself overflow"
    assert _keys(ledger) == {nomination_key("high")}


def test_an_assume_counts_the_slots_that_block_it(ledger: Ledger) -> None:
    _create(ledger, _nomination("p", 6000, priority=10))
    seen: list[list[Mapping[str, DeviceUse]] | None] = []

    def check(uses: list[Mapping[str, DeviceUse]] | None, quota: dict[str, int]) -> Entry | None:
        seen.append(uses)
        return None

    version = ledger.all_holds()[0]
    ledger.assume("q", "n1", check, seen=(0, 0), asking=Asking(Asker("q", 10), NOW, version))
    assert seen[-1] is None, "the rows and the holds are the ones the decision saw"
    ledger.assume("q", "n1", check, seen=(0, 0), asking=Asking(Asker("q", 10), NOW, version - 1))
    assert seen[-1] == [_use(6000)], "holds moved since the decision: the blocking slot is counted"
    ledger.assume("q", "n1", check, seen=(1, 1), asking=Asking(Asker("q", 11), NOW, version))
    assert seen[-1] == [], "a higher-priority asker is not blocked"


def test_an_assume_consumes_its_own_slots_and_frees_the_other_nodes(ledger: Ledger) -> None:
    _create(ledger, _nomination("p", 6000, node_name="n2"))
    _create(ledger, _gang_slot("default/g", "m1", 1000), _gang_slot("default/g", "m2", 1000))
    ledger.drain_freed()
    asking = Asking(Asker("p", 10), NOW, -1, "default/p")
    assert ledger.assume("p", "n1", lambda uses, quota: _filter_entry("p", 6000), asking=asking) is not None
    assert _keys(ledger) == {gang_key("default/g")}
    assert [(f.node, f.cause) for f in ledger.drain_freed()] == [("n2", "consumed by default/p")]
    member = Asking(Asker("m1", 10, "default/g"), NOW, -1, "default/m1")
    assert ledger.assume("m1", "n1", lambda uses, quota: _filter_entry("m1", 1000), asking=member) is not None
    assert [h.slot for h in ledger.all_holds()[1]] == ["m2"], "only its own place is consumed"
    assert ledger.drain_freed() == [], "it took its place on the node it held: nothing came back"
    assert ledger.hold_endings() == {(NOMINATION, CONSUMED): 1, (GANG, CONSUMED): 1}


def test_an_unblocked_asker_displaces_the_holds_it_leaves_no_room_for(ledger: Ledger) -> None:
    _create(ledger, _nomination("p", 6000, priority=1))
    asking = Asking(Asker("vip", 100), NOW, -1, "default/vip")
    assert (
        ledger.assume("vip", "n1", lambda uses, quota: _filter_entry("vip", 5000), asking=asking) is not None
    )
    assert _keys(ledger) == set()
    assert [(f.node, f.cause) for f in ledger.drain_freed()] == [("n1", "displaced by default/vip")]


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(
            lambda led: led.upsert([_row("bound", 5000)]), id="the worker's live rules (a bound pod)"
        ),
        pytest.param(
            lambda led: led.replace_all([_row("bound", 5000)]), id="a rebuild (holds kept, within H1)"
        ),
        pytest.param(
            lambda led: led.record_checked(
                "b", "n1", lambda others: _row("b", 5000, state=CONFIRMED), "bind-x"
            ),
            id="the bind's re-check",
        ),
    ],
)
def test_every_row_writer_keeps_h1(ledger: Ledger, write: object) -> None:
    _create(ledger, _nomination("p", 6000, priority=1), _nomination("p", 6000, priority=1))
    _create(ledger, _gang_slot("default/g", "m1", 1000, node_name="n2"))
    write(ledger)  # type: ignore[operator]
    assert _keys(ledger) == {gang_key("default/g")}, "the other node's hold stays"
    assert ledger.hold_endings() == {(NOMINATION, DISPLACED): 1}


def test_a_rebuild_keeps_the_holds(ledger: Ledger) -> None:
    _create(ledger, _nomination("p", 1000))
    ledger.replace_all([_row("r", 1000)])
    assert _keys(ledger) == {nomination_key("p")}


def test_the_sweep_ends_expired_holds_and_those_whose_owner_is_gone(ledger: Ledger) -> None:
    _create(ledger, _nomination("p", 1000))
    _create(ledger, _nomination("q", 1000, node_name="n2"))
    _create(ledger, _gang_slot("default/g", "m1", 1000))
    ended = ledger.sweep_holds(NOW + 10, lambda h: "preemptor deleted" if h.owner == "q" else "")
    assert [h.key for h in ended] == [nomination_key("q")]
    ended = ledger.sweep_holds(NOW + 31)
    assert sorted(h.key for h in ended) == [gang_key("default/g"), nomination_key("p")]
    assert ledger.hold_endings() == {(NOMINATION, GONE): 1, (NOMINATION, EXPIRED): 1, (GANG, EXPIRED): 1}
    causes = [(f.node, f.cause) for f in ledger.drain_freed()]
    assert causes == [("n2", "preemptor deleted"), ("n1", EXPIRED)]


def test_released_in_flight_rows_free_their_nodes(ledger: Ledger) -> None:
    ledger.upsert([_row("pending", 1000, state=CONFIRMED), _row("running", 1000, "n2")])
    assert ledger.remove(["pending", "running"], free=("pending pod deleted", NOW)) == 2
    assert ledger.drain_freed() == [Freed("n1", "pending pod deleted", NOW)]
    assert ledger.drain_freed() == [], "drained once"


# What one assume does to each kind of hold on its node (docs/ledger-writers.md, "Held reservations"): the
# asker "a" (priority 5, gang default/g) takes 5,000 MiB of the node's 10,000.
ASSUME_CASES = [
    pytest.param(_nomination("a", 1000, priority=5), "consumed", id="its own nomination: consumed"),
    pytest.param(_gang_slot("default/g", "a", 1000), "consumed", id="its own place in its gang: consumed"),
    pytest.param(_gang_slot("default/g", "b", 4000), "kept", id="another member's place: blocks it, kept"),
    pytest.param(_nomination("p", 5000, priority=5), "kept", id="equal priority: blocks it, kept"),
    pytest.param(_nomination("p", 4000, priority=1), "kept", id="lower priority, room left: kept"),
    pytest.param(
        _nomination("p", 6000, priority=1), "displaced", id="lower priority, no room left: displaced"
    ),
    pytest.param(
        dataclasses.replace(_nomination("p", 9000, priority=1), expires_at=NOW - 1),
        "kept",
        id="expired: left to the sweep",
    ),
]


@pytest.mark.parametrize(("hold", "fate"), ASSUME_CASES)
def test_what_an_assume_does_to_each_hold(ledger: Ledger, hold: Hold, fate: str) -> None:
    assert ledger.create_holds(
        hold.key, {"n1"}, lambda states: [hold], now=NOW - 2 if fate == "kept" else NOW
    )
    asking = Asking(Asker("a", 5, "default/g"), NOW, -1, "default/a")

    def check(uses: list[Mapping[str, DeviceUse]] | None, quota: dict[str, int]) -> Entry | None:
        assert uses is not None
        taken = sum(u["n1-0"].mem for u in uses if "n1-0" in u)
        return _filter_entry("a", 5000) if taken + 5000 <= 10000 else None

    assert ledger.assume("a", "n1", check, asking=asking) is not None
    endings = ledger.hold_endings()
    expected = {"consumed": {(hold.kind, CONSUMED): 1}, "displaced": {(hold.kind, DISPLACED): 1}, "kept": {}}
    assert endings == expected[fate]
    assert _keys(ledger) == (set() if fate != "kept" else {hold.key})
