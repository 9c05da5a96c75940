"""The Filter use case's decide-and-assume step on the fast path (app/filter/usecase.py `reserve`).

Real ledger and snapshot files in a temporary state directory; no API server (reserve never calls it).
Each placement is compared with what the reference `decide` says for the same state.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import pytest
from core_builders import VENDORS, ctr, gpu, node, pod

from app.context import Context
from app.core.decision import Policies, decide, pod_context
from app.core.holds import NOMINATION, Hold, nomination_key
from app.core.model import DeviceUse
from app.filter import usecase as filtering
from app.state import snapshot
from app.state.holdstore import Judge
from app.state.inventory import InventoryCache
from app.state.ledger import ASSUMED, BOUND, Entry, Ledger
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView
from config.settings import Settings

NODES = (
    node("busy", gpu("busy-0", 0, mem=10000), gpu("busy-1", 1, mem=10000)),
    node("idle", gpu("idle-0", 0, mem=10000), gpu("idle-1", 1, mem=10000)),
)


@pytest.fixture
def context(tmp_path: Path) -> Context:
    limits = {"capped": {"nvidia.com/gpumem": 5000}}
    snapshot.write(tmp_path, Snapshot(1, {n.name: NodeRecord(n, 1) for n in NODES}, {}, limits))
    ledger = Ledger(tmp_path)
    ledger.upsert([Entry("other", "default", "o", "busy", BOUND, {"busy-0": DeviceUse(1, 4000, 0)})])
    settings = Settings(state_dir=tmp_path, events_enabled=False, policies=Policies("spread", "binpack"))
    none = cast(Any, None)  # reserve neither patches nor posts events
    return Context(settings, none, ledger, InventoryCache(tmp_path), UsageView(), none)


def _reserve(context: Context, the_pod: dict[str, Any]) -> tuple[filtering.Reserved | None, Any]:
    current = context.refresh()
    assert current is not None
    probe = pod_context(the_pod, VENDORS, context.settings.policies, {})
    outcome = filtering.FilterOutcome()
    return filtering.reserve(context, the_pod, probe, ["idle", "busy", "gone"], current, outcome), outcome


def _reference(context: Context, the_pod: dict[str, Any], uid: str) -> Any:
    usage: dict[str, dict[str, DeviceUse]] = {}
    for entry in context.ledger.all_entries():
        if entry.uid != uid:
            for device, use in entry.uses.items():
                node_use = usage.setdefault(entry.node, {})
                node_use[device] = node_use[device].plus(use) if device in node_use else use
    ctx = pod_context(the_pod, VENDORS, context.settings.policies, {})
    return decide(ctx, ["idle", "busy", "gone"], {n.name: n for n in NODES}, usage, VENDORS)


def test_places_like_decide_and_assumes(context: Context) -> None:
    the_pod = pod(ctr(gpu=1, mem=3000), uid="p1")
    expected = _reference(context, the_pod, "p1").winner
    reserved, _ = _reserve(context, the_pod)
    assert reserved is not None and expected is not None
    assert (
        (reserved.node, reserved.devices) == (expected.node, expected.devices) == ("busy", expected.devices)
    )
    entry = context.ledger.get("p1")
    assert entry is not None and entry.state == ASSUMED and entry.node == "busy"


def test_a_refiltered_pod_does_not_compete_with_itself(context: Context) -> None:
    the_pod = pod(ctr(gpu=2, mem=6000), uid="p2")
    first, _ = _reserve(context, the_pod)
    assert first is not None and first.node == "busy"  # busy-0 has 6000 MiB free: binpack prefers busy
    expected = _reference(context, the_pod, "p2").winner
    again, _ = _reserve(context, the_pod)  # its own reservation on busy must not count against it
    assert again is not None and expected is not None and again.node == expected.node == "busy"


def test_quota_is_rechecked_against_the_ledger(context: Context) -> None:
    fits = pod(ctr(gpu=1, mem=3000), namespace="capped", uid="q1")
    too_much = pod(ctr(gpu=1, mem=3000), namespace="capped", uid="q2")
    assert _reserve(context, fits)[0] is not None
    reserved, outcome = _reserve(context, too_much)
    assert reserved is None
    assert outcome.failed == {
        "idle": "2/2 ResourceQuotaNotFit",
        "busy": "2/2 ResourceQuotaNotFit",
        "gone": "node unregistered",
    }


def test_capacity_taken_meanwhile_is_decided_again(context: Context, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another worker fills busy between this worker's decision and its assume: the assume's re-check
    refuses, usage is refreshed, and the fast path (its caches invalidated) picks idle."""
    assume = context.ledger.assume
    taken = Entry("rival", "default", "r", "busy", BOUND, {"busy-0": DeviceUse(1, 6000, 0)})

    def rival_first(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(context.ledger, "assume", assume)
        context.ledger.upsert([taken])
        return assume(*args, **kwargs)

    monkeypatch.setattr(context.ledger, "assume", rival_first)
    reserved, _ = _reserve(context, pod(ctr(gpu=1, mem=3000), uid="p3"))
    assert reserved is not None and reserved.node == "busy"  # busy-1 is still free; binpack stays
    monkeypatch.setattr(context.ledger, "assume", rival_first)
    taken = Entry("rival2", "default", "r", "busy", BOUND, {"busy-1": DeviceUse(1, 9000, 0)})
    reserved, _ = _reserve(context, pod(ctr(gpu=1, mem=3000), uid="p4"))
    assert reserved is not None and reserved.node == "idle"


def test_quota_taken_meanwhile_on_another_node_is_rechecked(
    context: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker reserves in the same capped namespace on another node between this worker's decision
    and its assume: the winner's usage is unchanged, but the committed quota usage is not the one the
    decision saw, so the assume evaluates again and refuses (the quota would be exceeded)."""
    assume = context.ledger.assume
    rival = Entry(
        "rival", "capped", "r", "idle", BOUND, {"idle-0": DeviceUse(1, 3000, 0)}, {"nvidia.com/gpumem": 3000}
    )

    def rival_first(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(context.ledger, "assume", assume)
        context.ledger.upsert([rival])
        return assume(*args, **kwargs)

    monkeypatch.setattr(context.ledger, "assume", rival_first)
    reserved, outcome = _reserve(context, pod(ctr(gpu=1, mem=3000), namespace="capped", uid="q3"))
    assert reserved is None and context.ledger.get("q3") is None
    assert outcome.failed["busy"] == outcome.failed["idle"] == "2/2 ResourceQuotaNotFit"


def test_an_unchanged_winner_is_not_evaluated_again(
    context: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing committed since the decision (node usage and, in a capped namespace, quota usage the same):
    the assume stores the decision's own verdict without evaluating the node again."""
    evaluated: list[str] = []
    evaluate = filtering.evaluate_node

    def counting(*args: Any, **kwargs: Any) -> Any:
        evaluated.append(args[0].name)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(filtering, "evaluate_node", counting)
    for uid, namespace in (("u1", "default"), ("u2", "capped")):
        expected = _reference(context, pod(ctr(gpu=1, mem=1000), namespace=namespace, uid=uid), uid).winner
        reserved, _ = _reserve(context, pod(ctr(gpu=1, mem=1000), namespace=namespace, uid=uid))
        assert reserved is not None and expected is not None
        assert (reserved.node, reserved.devices) == (expected.node, expected.devices)
    assert evaluated == []


def test_the_winners_rows_are_read_only_when_they_changed_since_the_decision(
    context: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The assume reads and sums the winner's committed rows only when they are not the ones the decision
    summed (`Ledger.node_stamp`): not at all when nothing was committed meanwhile; when a row on the
    winner was removed meanwhile (same newest sequence number, one row fewer), it sums what is committed
    and evaluates the node again on it."""
    read: list[str] = []
    node_uses, assume = context.ledger.node_uses, context.ledger.assume
    evaluated: list[object] = []
    evaluate = filtering.evaluate_node

    def reading(db: Any, node: str, exclude_uid: str) -> Any:
        read.append(node)
        return node_uses(db, node, exclude_uid)

    def counting(*args: Any, **kwargs: Any) -> Any:
        evaluated.append(args[1])
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(context.ledger, "node_uses", reading)
    monkeypatch.setattr(filtering, "evaluate_node", counting)
    first, _ = _reserve(context, pod(ctr(gpu=1, mem=1000), uid="s1"))
    assert first is not None and first.node == "busy" and read == [] and evaluated == []

    def forget_first(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(context.ledger, "assume", assume)
        context.ledger.remove(["other"])  # an older row than s1's: the newest number stays
        return assume(*args, **kwargs)

    monkeypatch.setattr(context.ledger, "assume", forget_first)
    second, _ = _reserve(context, pod(ctr(gpu=1, mem=1000), uid="s2"))
    assert second is not None and second.node == "busy" and read == ["busy"]
    assert evaluated == [{"busy-1": DeviceUse(1, 1000, 0)}]  # s1's use only (spread GPU policy): no other


def test_the_assumed_row_keeps_the_pods_facts(context: Context) -> None:
    """Priority, creation time and gang, from the request's pod (app/core/podfacts.py)."""
    the_pod = pod(ctr(gpu=1, mem=1000), uid="facts")
    the_pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    the_pod["spec"] |= {"priority": 50, "schedulingGroup": {"podGroupName": "train"}}
    reserved, _ = _reserve(context, the_pod)
    entry = context.ledger.get("facts")
    assert reserved is not None and entry is not None
    assert (entry.priority, entry.started, entry.terminating, entry.gang) == (
        50,
        "2026-01-01T00:00:00Z",
        False,
        f"{the_pod['metadata']['namespace']}/train",
    )


def _nominate(context: Context, owner: str, priority: int, uses: dict[str, DeviceUse]) -> None:
    hold = Hold(nomination_key(owner), "", NOMINATION, owner, "default", owner, priority, "busy", uses)
    hold = dataclasses.replace(hold, created_at=context.clock(), expires_at=context.clock() + 60)
    assert context.ledger.create_holds(hold.key, {"busy"}, lambda states: [hold], now=context.clock())


def test_a_nomination_steers_lower_priority_pods_away_and_its_owner_takes_it(context: Context) -> None:
    """busy-0 has 6,000 MiB free and busy-1 10,000 (binpack prefers busy); a nomination of priority 10
    holds busy-1 whole and 5,000 of busy-0: a pod of priority 10 goes to idle, the preemptor itself takes
    busy, consuming its nomination, and a pod of priority 11 is not blocked by any hold."""
    context.ledger.use_judge(Judge(lambda name: {n.name: n for n in NODES}.get(name), VENDORS, context.clock))
    _nominate(context, "preemptor", 10, {"busy-0": DeviceUse(1, 5000, 0), "busy-1": DeviceUse(1, 10000, 0)})
    blocked = pod(ctr(gpu=1, mem=3000), uid="equal")
    blocked["spec"]["priority"] = 10
    reserved, _ = _reserve(context, blocked)
    assert reserved is not None and reserved.node == "idle"
    owner = pod(ctr(gpu=1, mem=3000), uid="preemptor")
    owner["spec"]["priority"] = 10
    reserved, _ = _reserve(context, owner)
    assert reserved is not None and reserved.node == "busy"
    assert context.ledger.all_holds()[1] == [], "consumed"
    _nominate(context, "second", 10, {"busy-0": DeviceUse(1, 3000, 0)})
    vip = pod(ctr(gpu=1, mem=3000), uid="vip")
    vip["spec"]["priority"] = 11
    reserved, _ = _reserve(context, vip)
    assert reserved is not None and reserved.node == "busy", "not blocked: binpack stays on busy"
    assert context.ledger.hold_endings() == {(NOMINATION, "consumed"): 1}, "the rest fits beside it"
