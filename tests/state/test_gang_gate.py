"""A gang member's /filter deciding for its quorum (app/filter/gang.py `gate`), then the single-pod path.

Real ledger and snapshot files in a temporary state directory, the PodGroup tables filled as the worker
fills them (app/state/podgroups.py); no API server (neither the gate nor `reserve` calls it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import pytest
from core_builders import VENDORS, ctr, gpu, node, pod

from app.context import Context
from app.core.decision import Policies, pod_context
from app.core.gang import RETRY_FIRST, PodGroupFacts
from app.core.model import DeviceUse
from app.filter import gang
from app.filter import usecase as filtering
from app.filter.write import Write
from app.k8s.events import PodRef
from app.state import snapshot
from app.state.holdstore import Judge
from app.state.inventory import InventoryCache
from app.state.ledger import ASSUMED, BOUND, Entry, Ledger
from app.state.podgroups import MemberFacts, PodGroups, Quorum
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView
from config.settings import Settings

NODES = (node("n1", *(gpu(f"n1-{i}", i) for i in range(4))), node("n2", gpu("n2-0", 0), gpu("n2-1", 1)))
NAMES = ["n1", "n2"]
NOW = 1_000_000.0
CLOCK = [NOW]  # the context's clock: tests move it


@pytest.fixture(autouse=True)
def _clock() -> None:
    CLOCK[0] = NOW


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, ref: Any, kind: str, reason: str, message: str) -> None:
        self.recorded.append((ref.name, reason, message))


@pytest.fixture
def context(tmp_path: Path) -> Context:
    snapshot.write(tmp_path, Snapshot(1, {n.name: NodeRecord(n, 1) for n in NODES}, {}, {}))
    settings = Settings(state_dir=tmp_path, policies=Policies("spread", "binpack"), gang_ttl=15.0)
    none = cast(Any, None)  # neither the gate nor reserve patches the API
    ledger = Ledger(tmp_path)
    by_name = {n.name: n for n in NODES}
    ledger.use_judge(Judge(by_name.get, VENDORS, lambda: CLOCK[0]))  # H1 on every write, as a service does
    return Context(
        settings,
        none,
        ledger,
        InventoryCache(tmp_path),
        UsageView(),
        cast(Any, Events()),
        clock=lambda: CLOCK[0],
    )


def member(name: str, gpus: int = 1, group: str = "train") -> dict[str, Any]:
    the_pod = pod(ctr(gpu=gpus, pct=100), name=name, uid=f"uid-{name}")
    the_pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    the_pod["spec"]["schedulerName"] = "hami-scheduler"
    return the_pod


def gang_of(
    context: Context, size: int, min_count: int, gpus: int = 1, bound: int = 0
) -> list[dict[str, Any]]:
    store = PodGroups(context.ledger)
    store.set_served(True)
    store.put_groups([PodGroupFacts("default", "train", "g-uid", min_count=min_count)])
    members = [member(f"m{i}", gpus) for i in range(size)]
    store.put_members(
        MemberFacts(
            p["metadata"]["uid"], "default", "train", p["metadata"]["name"], "n2" if i < bound else "", p
        )
        for i, p in enumerate(members)
    )
    return members


def gate(
    context: Context, the_pod: dict[str, Any], names: list[str] = NAMES
) -> tuple[Any, filtering.FilterOutcome]:
    current = context.refresh()
    assert current is not None
    probe = pod_context(the_pod, VENDORS, context.settings.policies, {})
    outcome = filtering.FilterOutcome()
    return gang.gate(context, the_pod, probe, names, current, outcome), outcome


def test_a_pod_without_a_podgroup_is_a_single_pod(context: Context) -> None:
    answer, outcome = gate(context, pod(ctr(gpu=1), uid="single"))
    assert answer is None and not outcome.gang


def test_a_gang_that_cannot_fit_is_refused_on_every_node(context: Context) -> None:
    members = gang_of(context, 7, 7)  # six GPUs
    answer, outcome = gate(context, members[3])
    assert answer is outcome
    reason = "gang default/train: devices for 6 of 7 members"
    assert outcome.failed == {"n1": reason, "n2": reason}
    assert (outcome.denial, outcome.gang) == ("gang", "refused")
    events = cast(Events, context.events).recorded
    assert ("m3", "FilteringFailed", reason) in events
    assert not context.ledger.all_entries()


def test_a_gang_that_fits_goes_on_as_single_pods(context: Context) -> None:
    members = gang_of(context, 6, 6)
    answer, outcome = gate(context, members[0])
    assert answer is None and outcome.gang == "planned"


def test_the_refused_members_own_in_flight_row_is_released(context: Context) -> None:
    members = gang_of(context, 7, 7)
    uid = members[0]["metadata"]["uid"]
    context.ledger.upsert(
        [Entry(uid, "default", "m0", "n1", ASSUMED, {"n1-0": DeviceUse(1, 32768, 0)}, updated_at=NOW)]
    )
    gate(context, members[0])
    assert context.ledger.get(uid) is None


def test_other_members_rows_count_toward_the_quorum(context: Context) -> None:
    """Five of seven members already reserved (this cycle): two more GPUs are needed, one is the asker's."""
    members = gang_of(context, 7, 7)
    rows = [
        Entry(members[i]["metadata"]["uid"], "default", f"m{i}", "n1" if i < 4 else "n2", ASSUMED,
              {f"{'n1' if i < 4 else 'n2'}-{i % 4}": DeviceUse(1, 32768, 0)}, updated_at=NOW)
        for i in range(5)
    ]  # fmt: skip
    context.ledger.upsert(rows)
    answer, outcome = gate(context, members[5])
    assert answer is outcome and outcome.failed is not None
    assert set(outcome.failed.values()) == {"gang default/train: devices for 6 of 7 members"}
    answer, _ = gate(context, members[5], NAMES)
    stale = [Entry(r.uid, r.namespace, r.name, r.node, r.state, r.uses, updated_at=NOW - 60) for r in rows]
    context.ledger.upsert(stale)  # older than the gang TTL: being released, they count as free places
    answer, outcome = gate(context, members[5])
    assert answer is outcome  # 7 members, 6 GPUs: still no quorum, now counted from scratch
    context.ledger.remove([r.uid for r in rows[1:]])
    assert gate(context, member("m9"))[0] is not None  # the worker has not seen m9: still planned with it


def test_bound_members_and_a_lower_quorum(context: Context) -> None:
    members = gang_of(context, 8, 3, bound=2)
    context.ledger.upsert(
        [
            Entry(f"uid-m{i}", "default", f"m{i}", "n2", BOUND, {f"n2-{i}": DeviceUse(1, 32768, 0)})
            for i in (0, 1)
        ]
    )
    answer, outcome = gate(context, members[5])
    assert answer is None and outcome.gang == "planned"
    many = gang_of(context, 8, 2, bound=2)
    answer, outcome = gate(context, many[6])
    assert answer is None and not outcome.gang  # the quorum is bound: an extra member is a single pod


def test_only_the_nodes_offered_count(context: Context) -> None:
    members = gang_of(context, 3, 3)
    answer, outcome = gate(context, members[0], ["n2"])
    assert answer is outcome and outcome.failed == {
        "n2": "gang default/train: devices for 2 of 3 members among the nodes offered"
    }


def test_a_podgroup_not_seen_yet_is_retried(context: Context) -> None:
    answer, _ = gate(context, member("m0", group="unknown"))
    assert answer is not None and "PodGroup not seen yet" in answer.error
    PodGroups(context.ledger).set_served(False)
    assert gate(context, member("m0", group="unknown"))[0] is None  # no Workload API: a single pod


def test_a_basic_podgroup_is_no_gang(context: Context) -> None:
    store = PodGroups(context.ledger)
    store.put_groups([PodGroupFacts("default", "train", policy="basic", min_count=9)])
    assert gate(context, member("m0"))[0] is None


@pytest.mark.parametrize(
    ("topology", "refused"),
    [
        pytest.param("topology.kubernetes.io/zone", "", id="zone-honoured"),
        pytest.param("example.com/rack", "topology key example.com/rack is not one", id="unknown-key"),
    ],
)
def test_topology(context: Context, tmp_path: Path, topology: str, refused: str) -> None:
    records = {"n1": NodeRecord(NODES[0], 2, zone="a"), "n2": NodeRecord(NODES[1], 2, zone="b")}
    snapshot.write(tmp_path, Snapshot(2, records, {}, {}))
    store = PodGroups(context.ledger)
    store.put_groups([PodGroupFacts("default", "train", min_count=5, topology=topology)])
    members = [member(f"m{i}") for i in range(5)]
    store.put_members(
        MemberFacts(f"uid-m{i}", "default", "train", f"m{i}", "", p) for i, p in enumerate(members)
    )
    answer, outcome = gate(context, members[0])
    assert answer is outcome  # five GPUs exist, but no zone has five
    assert outcome.failed is not None
    text = next(iter(outcome.failed.values()))
    assert refused in text if refused else text == "gang default/train: devices for 4 of 5 members"


class Writer:
    """The allocation writer's `submit`, recorded (the writes themselves: tests/integration)."""

    def __init__(self) -> None:
        self.sent: list[Write] = []

    def submit(self, write: Write) -> None:
        self.sent.append(write)


def _assumed(context: Context, name: str, allocation: str) -> None:
    context.ledger.upsert(
        [Entry(f"uid-{name}", "default", name, "n1", ASSUMED, {}, allocation=allocation, updated_at=NOW)]
    )


def _write(name: str, allocation: str) -> Write:
    ref = PodRef("default", name, f"uid-{name}")
    return Write(ref, "n1", {"hami.io/vgpu-node": "n1", "stale-key": None}, allocation, "event", "7")


def test_member_writes_are_held_until_the_quorum_is_reserved(context: Context) -> None:
    writer = Writer()
    context.writer = cast(Any, writer)
    quorum = Quorum("default", "train", 3, ("uid-m0", "uid-m1", "uid-m2"))
    for name in ("m0", "m1"):
        _assumed(context, name, f"a-{name}")
        gang.hold(context, quorum, _write(name, f"a-{name}"))
    assert writer.sent == [] and gang.holds_write(context, "uid-m0")
    _assumed(context, "m1", "a-m1-again")  # m1 filtered again meanwhile: its held write is for another row
    _assumed(context, "m2", "a-m2")
    gang.hold(context, quorum, _write("m2", "a-m2"))
    assert sorted(w.ref.name for w in writer.sent) == ["m0", "m2"]
    sent = writer.sent[0]  # encoded and back, to be sent as a held write (reread on a conflict)
    assert sent == dataclasses.replace(_write(sent.ref.name, sent.allocation), reread=True)
    assert not gang.holds_write(context, "uid-m0") and not gang.holds_write(context, "uid-m1")


def test_members_without_devices_and_bound_members_count(context: Context) -> None:
    writer = Writer()
    context.writer = cast(Any, writer)
    _assumed(context, "m0", "a")
    gang.hold(context, Quorum("default", "train", 3, ("uid-m0",), free=2), _write("m0", "a"))
    assert [w.ref.name for w in writer.sent] == ["m0"]


def test_a_refused_member_drops_its_held_write(context: Context) -> None:
    members = gang_of(context, 7, 7)
    PodGroups(context.ledger).hold_write("uid-m0", Quorum("default", "train", 7, ()), "a", b"{}")
    gate(context, members[0])
    assert not gang.holds_write(context, "uid-m0")


def test_a_planned_member_carries_its_quorum(context: Context) -> None:
    members = gang_of(context, 6, 5, bound=1)
    answer, outcome = gate(context, members[3])
    assert answer is None and outcome.quorum is not None
    assert outcome.quorum.members[0] == "uid-m3" and len(outcome.quorum.members) == 5
    assert (outcome.quorum.min_count, outcome.quorum.free) == (5, 1)


def test_a_gang_kube_scheduler_abandons_holds_nothing_for_a_while(context: Context) -> None:
    """Placed at NOW, not bound a gang TTL later: the next member waits RETRY_FIRST (nothing placed), then
    the gang is placed again; a member bound (the worker forgets the attempts) starts afresh."""
    members = gang_of(context, 3, 3)
    assert gate(context, members[0])[1].gang == "planned"
    CLOCK[0] = NOW + 16  # the gang TTL (15 s) passed, nothing bound: kube-scheduler abandoned it
    answer, outcome = gate(context, members[0])
    assert answer is outcome and outcome.gang == "refused" and outcome.failed is not None
    reason = next(iter(outcome.failed.values()))
    assert "kube-scheduler did not bind the quorum placed for it (once" in reason and "for 30s more" in reason
    CLOCK[0] = NOW + 30
    assert gate(context, members[1])[1].gang == "refused"
    CLOCK[0] = NOW + 16 + RETRY_FIRST
    assert gate(context, members[1])[1].gang == "planned"
    PodGroups(context.ledger).forget_attempts([("default", "train")])
    CLOCK[0] = NOW + 200
    assert gate(context, members[1])[1].gang == "planned"


# -- the plan held (docs/held-reservations.md) ------------------------------------------------------------


def _reserve(context: Context, the_pod: dict[str, Any]) -> filtering.Reserved | None:
    current = context.refresh()
    assert current is not None
    probe = pod_context(the_pod, VENDORS, context.settings.policies, {})
    return filtering.reserve(context, the_pod, probe, NAMES, current, filtering.FilterOutcome())


def _plan(context: Context) -> dict[str, str]:
    """member UID -> the node of its slot, in the gang's stored plan."""
    return {h.slot: h.node for h in context.ledger.all_holds()[1] if h.key == "gang/default/train"}


def test_a_plan_is_held_and_kept_for_the_members(context: Context) -> None:
    members = gang_of(context, 6, 6)  # six GPUs: every one planned
    answer, outcome = gate(context, members[0])
    assert answer is None and outcome.gang == "planned"
    plan = _plan(context)
    assert set(plan) == {f"uid-m{i}" for i in range(6)}
    created = {h.created_at for h in context.ledger.all_holds()[1]}
    for other in members[1:3]:  # kube-scheduler filters the next members: the plan stays as it is
        answer, outcome = gate(context, other)
        assert answer is None and outcome.gang == "kept"
    assert _plan(context) == plan and {h.created_at for h in context.ledger.all_holds()[1]} == created


def test_a_held_plan_blocks_a_single_pod_and_each_member_takes_its_place(context: Context) -> None:
    members = gang_of(context, 6, 6)
    gate(context, members[0])
    single = pod(ctr(gpu=1, pct=100), name="single", uid="uid-single")
    assert _reserve(context, single) is None  # every GPU is planned for the gang (equal priority)
    for i, member_pod in enumerate(members):
        answer, outcome = gate(context, member_pod)
        assert answer is None and outcome.gang in ("planned", "kept")
        reserved = _reserve(context, member_pod)
        assert reserved is not None, f"member {i} found no place"
        assert f"uid-m{i}" not in _plan(context)  # its slot consumed by its assume
    assert _plan(context) == {}
    assert len(context.ledger.all_entries()) == 6


def test_a_higher_priority_pod_is_not_blocked(context: Context) -> None:
    members = gang_of(context, 6, 6)
    gate(context, members[0])
    urgent = pod(ctr(gpu=1, pct=100), name="urgent", uid="uid-urgent")
    urgent["spec"]["priority"] = 1000
    assert _reserve(context, urgent) is not None  # displaces the gang's lower-priority plan
    assert _plan(context) == {}  # a plan missing a place is no plan: released whole


def test_a_refused_quorum_releases_its_plan(context: Context) -> None:
    members = gang_of(context, 6, 6)
    gate(context, members[0])
    assert _plan(context)
    PodGroups(context.ledger).put_groups([PodGroupFacts("default", "train", "g-uid", min_count=7)])
    store = PodGroups(context.ledger)
    extra = member("m6")
    store.put_members([MemberFacts("uid-m6", "default", "train", "m6", "", extra)])
    answer, outcome = gate(context, members[1])
    assert answer is outcome and outcome.gang == "refused"
    assert _plan(context) == {}


def test_a_changed_quorum_remakes_the_plan(context: Context) -> None:
    members = gang_of(context, 6, 6)
    gate(context, members[0])
    PodGroups(context.ledger).put_groups([PodGroupFacts("default", "train", "g-uid", min_count=4)])
    answer, outcome = gate(context, members[1])
    assert answer is None and outcome.gang == "planned"
    plan = _plan(context)
    assert len(plan) == 4 and "uid-m1" in plan


def test_a_placed_quorum_releases_the_plan(context: Context) -> None:
    members = gang_of(context, 6, 2)
    gate(context, members[0])
    assert len(_plan(context)) == 2
    for member_pod in members[:2]:
        gate(context, member_pod)
        assert _reserve(context, member_pod) is not None
    answer, outcome = gate(context, members[2])  # an extra member once the quorum holds reservations
    assert answer is None and not outcome.gang
    assert _plan(context) == {}


def test_a_member_filtered_again_keeps_its_place_and_the_others_are_planned(context: Context) -> None:
    """The next attempt of a gang: the asker still holds its reservation of the last one, which places it;
    the plan is made for the others only (a slot of its own next to its row would count its GPU twice)."""
    members = gang_of(context, 6, 6)
    gate(context, members[0])
    assert _reserve(context, members[0]) is not None
    context.ledger.release_holds(["gang/default/train"], "expired", NOW)  # the gang TTL passed
    answer, outcome = gate(context, members[0])
    assert answer is None and outcome.gang == "planned"
    assert set(_plan(context)) == {f"uid-m{i}" for i in range(1, 6)}
    assert _reserve(context, members[0]) is not None  # back on a GPU no slot holds
