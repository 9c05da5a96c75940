"""workers/podgroups.py: PodGroups and their members into the ledger file; a cluster without the Workload API
(the emulator serves no scheduling.k8s.io) is no gangs and no error. The informer on a real kube-apiserver
with the Workload API: tests/real/test_real_gangs.py."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from worker_builders import VENDORS

from app.core.gang import ALL, Attempts, PodGroupFacts
from app.core.holds import GANG, Hold
from app.k8s.client import Kube
from app.state.ledger import ASSUMED, Ledger, RowState
from app.state.podgroups import Gang, MemberFacts, PodGroups
from sim.emulator.testing import EmulatorHandle, run_emulator
from workers.informers import ADDED, DELETED, MODIFIED, Change
from workers.podgroups import GangWatch, member_facts, plan_gone, podgroup_shape
from workers.reconcile import Rules, suspects
from workers.shapes import pod_shape


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with run_emulator(tmp_path / "sim") as handle:
        yield handle


def member(name: str, group: str | None = "train", node: str = "", phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "hami-scheduler",
        "priority": 7,
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}, "image": "x"}],
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if node:
        spec["nodeName"] = node
    metadata = {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"}
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


def podgroup(name: str, min_count: int = 3, **spec: Any) -> dict[str, Any]:
    body = {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec}
    return {"metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}"}, "spec": body}


def test_no_workload_api_is_no_gangs_and_no_error(sim: EmulatorHandle, kube: Kube, ledger: Ledger) -> None:
    watch = GangWatch(kube, ledger, lambda *_: None)
    assert watch.discover(0.0) is False
    assert watch.informer is None
    assert PodGroups(ledger).served() is False
    assert watch.discover(1.0) is False  # not asked again before REDISCOVER


def test_members_are_kept_as_the_pod_watch_sees_them(sim: EmulatorHandle, kube: Kube, ledger: Ledger) -> None:
    shape = pod_shape(VENDORS)
    watch = GangWatch(kube, ledger, lambda *_: None)
    store = PodGroups(ledger)
    pods = [shape(member("m0")), shape(member("m1")), shape(member("lone", group=None))]
    watch.on_pods([Change(ADDED, p, None) for p in pods])
    watch._on_groups([Change(ADDED, podgroup_shape(podgroup("train", disruptionMode={"all": {}})), None)])
    gang = store.gang("default", "train")
    assert gang is not None
    assert gang.group == PodGroupFacts("default", "train", "pg-train", "gang", 3, None, ALL, "")
    assert [m.name for m in gang.members] == ["m0", "m1"] and gang.bound == 0
    assert gang.members[0].pod["spec"]["schedulingGroup"] == {"podGroupName": "train"}  # the shape keeps it
    assert gang.members[0].pod["spec"]["priority"] == 7

    version = ledger.data_version()
    status_only = shape(member("m0"))
    status_only["metadata"]["resourceVersion"] = "2"
    watch.on_pods([Change(MODIFIED, status_only, pods[0])])
    assert ledger.data_version() == version  # nothing a plan reads changed: nothing written

    bound = shape(member("m1", node="n1"))
    finished = shape(member("m0", phase="Succeeded"))
    watch.on_pods([Change(MODIFIED, bound, pods[1]), Change(MODIFIED, finished, pods[0])])
    gang = store.gang("default", "train")
    assert gang is not None and [(m.name, m.node) for m in gang.members] == [("m1", "n1")]

    watch.on_pods([Change(DELETED, bound, bound)])
    watch._on_groups([Change(DELETED, podgroup("train"), None)])
    assert store.gang("default", "train") is None and not store.gangs()


def test_a_restarted_worker_starts_from_empty_tables(sim: EmulatorHandle, kube: Kube, ledger: Ledger) -> None:
    store = PodGroups(ledger)
    store.put_groups([PodGroupFacts("default", "old")])
    GangWatch(kube, ledger, lambda *_: None)
    assert not store.gangs()


@pytest.mark.parametrize(
    ("pod", "facts"),
    [
        pytest.param(member("m0", group=None), False, id="no-group"),
        pytest.param(member("m0", phase="Failed"), False, id="terminal"),
        pytest.param(
            {"metadata": "broken", "spec": {"schedulingGroup": {"podGroupName": "g"}}}, False, id="bad"
        ),
        pytest.param(member("m0"), True, id="member"),
    ],
)
def test_member_facts(pod: dict[str, Any], facts: bool) -> None:
    assert (member_facts(pod) is not None) is facts


def test_a_gang_members_reservation_is_released_after_the_gang_ttl() -> None:
    """The sweep's suspects (workers/reconcile.py rule 3): an unbound member's in-flight row past the gang
    TTL is one; another pod's row is one only past the in-flight TTL."""
    rules = Rules(frozenset({"hami-scheduler"}), VENDORS, inflight_ttl=60.0, gang_ttl=15.0)
    rows = [
        RowState("uid-m0", ASSUMED, 100.0, "default", "m0"),
        RowState("uid-lone", ASSUMED, 100.0, "default", "lone"),
    ]
    pods = {"uid-m0": member("m0"), "uid-lone": member("lone", group=None)}
    assert [r.uid for r in suspects(rows, pods.get, rules, 114.0)] == []
    assert [r.uid for r in suspects(rows, pods.get, rules, 116.0)] == ["uid-m0"]
    assert [r.uid for r in suspects(rows, pods.get, rules, 161.0)] == ["uid-m0", "uid-lone"]
    assert rules.ttl_for(member("m0")) == 15.0 and rules.ttl_for(None) == 60.0
    assert Rules(frozenset(), VENDORS, inflight_ttl=60.0).ttl_for(member("m0")) == 60.0


def test_a_member_bound_starts_the_gangs_attempts_afresh(
    sim: EmulatorHandle, kube: Kube, ledger: Ledger
) -> None:
    shape = pod_shape(VENDORS)
    watch = GangWatch(kube, ledger, lambda *_: None)
    store = PodGroups(ledger)
    group = PodGroupFacts("default", "train", "pg-train", min_count=2)
    pending = shape(member("m0"))
    watch.on_pods([Change(ADDED, pending, None)])
    store.set_attempts(group, Attempts(0.0, 2, 500.0))
    watch.on_pods([Change(MODIFIED, shape(member("m0", phase="Running")), pending)])  # not bound: kept
    assert store.attempts(group) == Attempts(0.0, 2, 500.0)
    watch.on_pods([Change(MODIFIED, shape(member("m0", node="n1")), pending)])
    assert store.attempts(group) == Attempts()


def _slot(member_uid: str, owner: str = "default/train", created: float = 0.0) -> Hold:
    name = owner.split("/")[1]
    return Hold(f"gang/{owner}", member_uid, GANG, owner, "default", name, 0, "n1", {}, created_at=created)


def test_when_a_plan_no_longer_stands() -> None:
    members = (
        MemberFacts("uid-m0", "default", "train", "m0", "", {}),
        MemberFacts("uid-m1", "default", "train", "m1", "n1", {}),
    )
    gang = Gang(PodGroupFacts("default", "train", min_count=2), members)
    assert plan_gone(_slot("uid-m0"), gang, 100.0) == ""
    assert plan_gone(_slot("uid-m0"), None, 100.0) == "PodGroup default/train deleted"
    assert plan_gone(_slot("uid-m9", created=95.0), gang, 100.0) == ""  # the informer may not have it yet
    assert plan_gone(_slot("uid-m9"), gang, 100.0) == "a planned member of default/train deleted"
    assert plan_gone(_slot("uid-m1"), gang, 100.0) == "a planned member of default/train bound"
    everyone = Gang(gang.group, tuple(replace(m, node="n1") for m in members))
    assert plan_gone(_slot("uid-m9", created=99.0), everyone, 100.0) == ""
    alone = Gang(gang.group, (*members, MemberFacts("uid-m2", "default", "train", "m2", "n2", {})))
    assert plan_gone(_slot("uid-m0"), alone, 100.0) == "the quorum of default/train bound"
