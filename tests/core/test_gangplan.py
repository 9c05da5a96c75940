"""The gang planner (app/core/gangplan.py): it places the quorum without oversubscribing, says "cannot" only
where no placement exists in its search space (checked exhaustively on small cases), and is deterministic."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest
from core_builders import VENDORS, context, ctr, gpu, node, pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.gangplan import GangPlan, Member, Placement, _with_quota, ordered, plan
from app.core.model import DeviceUse, NodeDevices, NodeUse, QuotaEntry, QuotaView
from app.core.usage import sum_uses, working_devices


def member(uid: str, gpus: int = 1, mem: int | None = None, *, quota: QuotaView | None = None) -> Member:
    the_pod = pod(ctr(gpu=gpus, mem=mem, pct=None if mem else 100), name=uid, uid=uid)
    return Member(uid, context(the_pod, quota=quota))


def gang(size: int, gpus: int = 1, mem: int | None = None) -> list[Member]:
    return [member(f"m{i}", gpus, mem) for i in range(size)]


def nodes_of(*nodes: NodeDevices) -> dict[str, NodeDevices]:
    return {n.name: n for n in nodes}


def one_node(gpus: int, name: str = "n1", mem: int = 32768) -> NodeDevices:
    return node(name, *(gpu(f"{name}-g{i}", i, mem=mem) for i in range(gpus)))


def run(
    members: Sequence[Member],
    needed: int,
    nodes: Sequence[NodeDevices],
    usage: Mapping[str, NodeUse] | None = None,
    *,
    asker: str = "m0",
    budget: int = 4_000,
) -> GangPlan:
    names = [n.name for n in nodes]
    return plan(members, needed, [names], nodes_of(*nodes), usage or {}, VENDORS, asker=asker, budget=budget)


def oversubscribed(
    nodes: Mapping[str, NodeDevices], usage: Mapping[str, NodeUse], placements: Sequence[Placement]
) -> list[str]:
    """Devices whose usage plus the placements exceed slots, memory or cores."""
    bad = []
    for name, the_node in nodes.items():
        total = sum_uses([usage.get(name, {}), *(p.uses for p in placements if p.node == name)])
        for device in working_devices(the_node, total):
            if (
                device.used > device.count
                or device.usedmem > device.totalmem
                or device.usedcores > device.totalcore
            ):
                bad.append(device.id)
    return bad


@pytest.mark.parametrize(
    ("members", "needed", "nodes", "found", "best"),
    [
        pytest.param(gang(4), 4, [one_node(4)], True, 4, id="four-whole-gpus-on-four"),
        pytest.param(gang(5), 5, [one_node(4)], False, 4, id="five-whole-gpus-on-four"),
        pytest.param(gang(5), 4, [one_node(4)], True, 4, id="quorum-four-of-five"),
        pytest.param(gang(8), 8, [one_node(4, "a"), one_node(4, "b")], True, 8, id="eight-across-two-nodes"),
        pytest.param(gang(8), 8, [one_node(4, "a"), one_node(3, "b")], False, 7, id="eight-on-seven"),
        pytest.param(gang(3, 2), 3, [one_node(4, "a"), one_node(2, "b")], True, 3, id="two-gpu-members"),
        pytest.param(gang(3, 2), 3, [one_node(3, "a"), one_node(3, "b")], False, 2, id="fragmented"),
        pytest.param(gang(4, 1, 16000), 4, [one_node(2)], True, 4, id="two-shares-per-gpu"),
        pytest.param(gang(5, 1, 16000), 5, [one_node(2)], False, 4, id="shares-run-out"),
        pytest.param([], 0, [one_node(1)], True, 0, id="nothing-needed"),
    ],
)
def test_plans(members: list[Member], needed: int, nodes: list[NodeDevices], found: bool, best: int) -> None:
    result = run(members, needed, nodes)
    assert result.found is found
    assert result.best == best
    assert result.exhausted
    if found:
        assert len(result.placements) == needed
        assert not oversubscribed(nodes_of(*nodes), {}, result.placements)
        assert needed == 0 or "m0" in {p.uid for p in result.placements}


def test_existing_usage_counts() -> None:
    the_node = one_node(4)
    taken = {"n1-g0": DeviceUse(1, 32768, 100), "n1-g1": DeviceUse(1, 32768, 100)}
    result = run(gang(3), 3, [the_node], {"n1": taken})
    assert not result.found and result.best == 2
    assert run(gang(2), 2, [the_node], {"n1": taken}).found


def test_heterogeneous_members_backtrack_to_fit() -> None:
    """A 2-GPU member and two 1-GPU members on nodes of 2 and 2 GPUs: largest first, so it fits."""
    members = [member("m0", 1), member("m1", 1), member("big", 2)]
    result = run(members, 3, [one_node(2, "a"), one_node(2, "b")])
    assert result.found
    assert ordered(members, "m0")[0].uid == "big"
    assert not oversubscribed(nodes_of(one_node(2, "a"), one_node(2, "b")), {}, result.placements)


def test_the_asker_is_never_left_out() -> None:
    """Quorum 1 of a big and a small member where only the small fits: the asker (big) cannot be placed."""
    members = [member("big", 2), member("m1", 1)]
    assert not run(members, 1, [one_node(1)], asker="big").found
    assert run(members, 1, [one_node(1)], asker="m1").found


def test_quota_counts_earlier_members() -> None:
    """Two members of 16000 MiB against a namespace limit of 20000: only one fits the quota."""
    limit: QuotaView = {"default": {"nvidia.com/gpumem": QuotaEntry(used=0, limit=20000, limit_set=True)}}
    members = [member("m0", 1, 16000, quota=limit), member("m1", 1, 16000, quota=limit)]
    result = run(members, 2, [one_node(2)])
    assert not result.found and result.best == 1
    assert run(members, 1, [one_node(2)]).found


def test_the_bound_says_so() -> None:
    """Heterogeneous members with a budget too small to finish: the plan is not exhausted."""
    members = [member("m0", 2), *(member(f"s{i}", 1) for i in range(6))]
    nodes = [one_node(1, f"n{i}") for i in range(8)]
    result = run(members, 7, nodes, budget=5)
    assert not result.found and not result.exhausted


def test_domains_are_tried_in_order() -> None:
    a, b = one_node(2, "a"), one_node(4, "b")
    result = plan(gang(3), 3, [["a"], ["b"]], nodes_of(a, b), {}, VENDORS, asker="m0")
    assert result.found and {p.node for p in result.placements} == {"b"}
    assert not plan(gang(3), 3, [["a"]], nodes_of(a, b), {}, VENDORS, asker="m0").found


# -- properties ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    nodes: tuple[NodeDevices, ...]
    usage: dict[str, dict[str, DeviceUse]]
    members: tuple[Member, ...]
    needed: int
    limit: int | None


MEMORY = [4000, 8000, 16000]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    nodes, usage = [], {}
    for n in range(draw(st.integers(1, 3))):
        gpus = [
            gpu(
                f"n{n}-g{i}",
                i,
                count=draw(st.sampled_from([1, 2, 4])),
                mem=draw(st.sampled_from([8000, 16000])),
            )
            for i in range(draw(st.integers(1, 3)))
        ]
        nodes.append(node(f"n{n}", *gpus))
        taken = {}
        for device in gpus:
            if draw(st.booleans()):
                taken[device.id] = DeviceUse(1, draw(st.sampled_from([0, 4000, device.devmem])), 0)
        usage[f"n{n}"] = taken
    limit = draw(st.sampled_from([None, None, 20000]))
    quota: QuotaView = (
        {"default": {"nvidia.com/gpumem": QuotaEntry(0, limit, True)}} if limit is not None else {}
    )
    size = draw(st.integers(1, 4))
    members = tuple(
        member(f"m{i}", draw(st.integers(1, 2)), draw(st.sampled_from(MEMORY)), quota=quota)
        for i in range(size)
    )
    return Case(tuple(nodes), usage, members, draw(st.integers(1, size)), limit)


def brute_force(case: Case, asker: str) -> bool:
    """Does any assignment of `needed` members (the asker among them, in the planner's order) to nodes fit,
    each fitted with `evaluate_node` on the usage with the earlier ones added?"""
    from app.core.fit import evaluate_node
    from app.core.quota import pod_quota_use
    from app.core.reservations import vendor_tags
    from app.core.usage import allocation_uses, collapse_pod
    from app.core.vendor import core_masks

    by_key = {v.key: v for v in VENDORS}
    order = ordered(case.members, asker)
    for chosen in itertools.combinations(order, case.needed):
        if asker not in {m.uid for m in chosen}:
            continue
        for targets in itertools.product(case.nodes, repeat=len(chosen)):
            extra: dict[str, list[Mapping[str, DeviceUse]]] = {}
            added: dict[str, int] = {}
            ok = True
            for m, target in zip(chosen, targets, strict=True):
                use = sum_uses([case.usage.get(target.name, {}), *extra.get(target.name, [])])
                verdict = evaluate_node(target, use, _with_quota(m.ctx, added), by_key)
                if not verdict.fits or verdict.devices is None:
                    ok = False
                    break
                init = m.ctx.requests.init_count
                tags = vendor_tags(m.ctx.annotations, VENDORS)
                extra.setdefault(target.name, []).append(
                    allocation_uses(verdict.devices, init, tags, core_masks(VENDORS))
                )
                for name, amount in pod_quota_use(collapse_pod(verdict.devices, init), VENDORS).items():
                    added[name] = added.get(name, 0) + amount
            if ok:
                return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_plan_invariants(case: Case) -> None:
    nodes = nodes_of(*case.nodes)
    names = [[n.name for n in case.nodes]]
    result = plan(case.members, case.needed, names, nodes, case.usage, VENDORS, asker="m0")
    if result.found:
        assert len(result.placements) == case.needed
        assert "m0" in {p.uid for p in result.placements}
        assert not oversubscribed(nodes, case.usage, result.placements)
    else:
        assert result.best < case.needed
        if result.exhausted:
            assert not brute_force(case, "m0"), "the planner said cannot, but a placement exists"
    again = plan(tuple(reversed(case.members)), case.needed, names, nodes, case.usage, VENDORS, asker="m0")
    assert again == result  # deterministic, whatever order the members come in
