"""The fast path decides exactly what the reference `decide` decides (app/state/fastpath.py).

Random clusters (devices of several models, NUMA nodes, modes, unhealthy and cordoned cards, existing usage
that may even exceed capacity), random pods (init containers, GPU-less containers, several GPUs, memory
percentages, whole cards), selection annotations, GPU policies including chains, both node policies,
namespace quotas from slack to exhausted, a pod's own previous reservation, and NodeNames in any order with
unknown and duplicate names. For each, the winner (node, devices, score) or, when nothing fits, every
FailedNodes reason and its order must equal `decide`'s. Then the caches: the same FastPath must stay exact
while usage and node records change under it.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from core_builders import VENDORS, context, ctr, gpu, node, pod
from core_strategies import GPU_POLICIES, NODE_POLICIES, devices, existing_use, gpu_container
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.decision import decide
from app.core.fit import PodContext
from app.core.holds import GANG, NOMINATION, Asker, Hold, held_use
from app.core.model import DeviceUse, NodeDevices, QuotaEntry
from app.core.policy import node_score_sign
from app.core.score import node_score
from app.core.usage import same_use, sum_uses, working_devices
from app.devices.nvidia import keys
from app.state.fastpath import FastPath, best, ranked_chunks, winner_order
from app.state.ledger import BOUND, Entry, Ledger
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView

UID = "uid-p"
NOW = 1_000.0  # the decisions' clock (held slots expire)
# The equivalence is the fast path's whole contract, so many examples (single runs while developing: 15,000
# for the equivalence, 3,000 for the caches)
EXACT = settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CACHES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclasses.dataclass(frozen=True)
class Cluster:
    nodes: tuple[NodeDevices, ...]
    others: dict[str, dict[str, DeviceUse]]  # usage of other pods per node
    own: tuple[str, dict[str, DeviceUse]] | None  # this pod's previous reservation
    names: list[str]  # NodeNames as kube-scheduler sends them
    ctx: PodContext


def _selection(draw: st.DrawFn, nodes: list[NodeDevices]) -> dict[str, str]:
    ids = [d.id for n in nodes for d in n.devices] + ["GPU-unknown"]
    choices: dict[str, Any] = {
        keys.USE_TYPE: st.sampled_from(["A100", "V100", "T4", "NVIDIA", "A10", "V100,T4", "B200"]),
        keys.NOUSE_TYPE: st.sampled_from(["A100", "T4", "V100"]),
        keys.USE_UUID: st.lists(st.sampled_from(ids), min_size=1, max_size=3).map(",".join),
        keys.NOUSE_UUID: st.lists(st.sampled_from(ids), min_size=1, max_size=3).map(",".join),
        keys.VGPU_MODE: st.sampled_from(["hami-core", "mig", "hami-core,mig"]),
        "nvidia.com/numa-bind": st.sampled_from(["true", "false"]),
        "hami.io/device-scoring-weights": st.sampled_from(
            ["slot=1,core=0,memory=0", "slot=3,core=1,memory=5"]
        ),
        "example.com/run-seconds": st.sampled_from(["5", "60"]),  # read by nothing: shapes ignore it
    }
    wanted = draw(st.lists(st.sampled_from(sorted(choices)), max_size=3, unique=True))
    return {key: draw(choices[key]) for key in wanted}


def _quota(draw: st.DrawFn) -> Mapping[str, Mapping[str, QuotaEntry]]:
    kind = draw(st.sampled_from(["none", "none", "slack", "tight"]))
    if kind == "none":
        return {}
    limit = 10**9 if kind == "slack" else draw(st.sampled_from([0, 1000, 20000, 60000]))
    used = draw(st.sampled_from([0, 500, 10000]))
    return {
        "default": {
            "nvidia.com/gpumem": QuotaEntry(used, limit, True),
            "nvidia.com/gpucores": QuotaEntry(used // 100, limit // 100, draw(st.booleans())),
        }
    }


@st.composite
def pod_contexts(draw: st.DrawFn, nodes: list[NodeDevices]) -> PodContext:
    inits = [draw(gpu_container(f"init-{i}")) for i in range(draw(st.integers(0, 2)))]
    apps = [draw(gpu_container(f"app-{i}")) for i in range(draw(st.integers(1, 3)))]
    if not any(c["resources"] for c in [*inits, *apps]):
        apps[0] = ctr("app-0", gpu=1)
    the_pod = pod(*apps, init=inits, annotations=_selection(draw, nodes), uid=UID)
    return context(
        the_pod,
        gpu_policy=draw(st.sampled_from(GPU_POLICIES)),
        node_policy=draw(st.sampled_from(NODE_POLICIES)),
        quota=_quota(draw),
    )


@st.composite
def clusters(draw: st.DrawFn, max_nodes: int = 8) -> Cluster:
    nodes, others = [], {}
    for n in range(draw(st.integers(1, max_nodes))):
        name = f"node-{n}"
        devs = draw(devices(name))
        cordoned = draw(st.lists(st.sampled_from([d.id for d in devs]), max_size=1))
        nodes.append(node(name, *devs, cordoned=cordoned))
        others[name] = draw(existing_use(devs))
    ctx = draw(pod_contexts(nodes))
    own = None
    if draw(st.booleans()):
        target = draw(st.sampled_from(nodes))
        own = (target.name, draw(existing_use(target.devices)))
    known = [n.name for n in nodes]
    pool = [*known, "gone-1", "gone-2", "broken-1"]
    names = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=len(pool) + 2))
    return Cluster(tuple(nodes), others, own, names, ctx)


BROKEN = {"broken-1": "node unregistered: bad annotation"}


def snapshot_of(nodes: tuple[NodeDevices, ...], generation: int = 1) -> Snapshot:
    return Snapshot(generation, {n.name: NodeRecord(n, generation) for n in nodes}, BROKEN)


def entries_of(cluster: Cluster) -> list[Entry]:
    entries = [
        Entry(f"other-{name}", "default", "x", name, BOUND, use) for name, use in cluster.others.items()
    ]
    if cluster.own is not None:
        entries.append(Entry(UID, "default", "p", cluster.own[0], BOUND, cluster.own[1]))
    return entries


def assert_same_decision(
    fast: FastPath,
    cluster: Cluster,
    snapshot: Snapshot,
    usage: UsageView,
    others: Mapping[str, Mapping[str, DeviceUse]],
    asker: Asker | None = None,
) -> None:
    """`others`: the usage `decide` must see, i.e. without this pod's own reservation (and with the held
    slots that block `asker`)."""
    nodes = {name: record.devices for name, record in snapshot.nodes.items()}
    expected = decide(cluster.ctx, cluster.names, nodes, others, VENDORS, snapshot.broken)
    choice = fast.choose(cluster.ctx, cluster.names, snapshot, usage, VENDORS, UID, asker, NOW)
    assert choice.winner == expected.winner
    if expected.winner is None:
        assert list(choice.failed.items()) == list(expected.failed.items())
        return
    assert choice.failed == {}
    assert same_use(choice.use, others.get(expected.winner.node, {}))
    # every candidate ranked ahead of the winner is counted, as the success event says
    sign = node_score_sign(cluster.ctx.node_policy)
    score = {name: sign * node_score(working_devices(n, others.get(name, {}))) for name, n in nodes.items()}
    ranked = sorted(
        ((score[name], position) for position, name in enumerate(cluster.names) if name in nodes),
        reverse=True,
    )
    winner = max(p for p, name in enumerate(cluster.names) if name == expected.winner.node)
    assert choice.ranked_ahead == ranked.index((score[expected.winner.node], winner))


@EXACT
@given(clusters(), st.integers(1, 4))
def test_fast_path_decides_like_decide(cluster: Cluster, first_screen: int) -> None:
    usage = UsageView()
    usage.load(entries_of(cluster))
    fast = FastPath(first_screen=first_screen)  # small: exercises screening in two rounds
    assert_same_decision(fast, cluster, snapshot_of(cluster.nodes), usage, cluster.others)


def _change_node(n: NodeDevices, change: str) -> NodeDevices:
    if change == "cordon":
        return dataclasses.replace(n, cordoned=frozenset({n.devices[0].id}))
    if change == "unhealthy":
        return dataclasses.replace(
            n, devices=(dataclasses.replace(n.devices[0], health=False), *n.devices[1:])
        )
    if change == "bigger":
        extra = gpu(f"{n.name}-GPU-extra", len(n.devices), count=10, mem=81920)
        return dataclasses.replace(n, devices=(*n.devices, extra))
    return dataclasses.replace(n, devices=n.devices[:1])  # "smaller"


def _more_pods(cluster: Cluster) -> st.SearchStrategy[list[PodContext]]:
    """Other pods for the same cluster: new shapes, and the pod again with other unread annotations."""
    same_shape = dataclasses.replace(
        cluster.ctx, annotations={**cluster.ctx.annotations, "example.com/run-seconds": "7"}
    )
    return st.lists(st.one_of(pod_contexts(list(cluster.nodes)), st.just(same_shape)), max_size=2)


operations = st.one_of(
    st.tuples(
        st.just("use"), st.integers(0, 7), st.integers(0, 3), st.integers(0, 40000), st.integers(0, 100)
    ),
    st.tuples(st.just("forget"), st.integers(0, 7)),
    st.tuples(
        st.just("node"), st.integers(0, 7), st.sampled_from(["cordon", "unhealthy", "bigger", "smaller"])
    ),
    st.tuples(
        st.just("quota-only"),
    ),
)


@CACHES
@given(clusters(), st.lists(operations, min_size=1, max_size=6), st.data())
def test_caches_follow_usage_and_node_changes(
    cluster: Cluster, steps: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    """One FastPath, one ledger: after every change (a reservation added or removed through the ledger, a
    node record replaced in a new snapshot, a snapshot with unchanged nodes) the decision is still exact,
    for the pod and for pods of other shapes decided in between (or of the same shape: the screening
    verdicts remembered per shape and node state, app/state/mayfit.py)."""
    shapes = [cluster, *(dataclasses.replace(cluster, ctx=c) for c in data.draw(_more_pods(cluster)))]
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp))
        try:
            ledger.upsert(entries_of(cluster))
            usage, fast = UsageView(), FastPath(first_screen=2)
            nodes = list(cluster.nodes)
            snapshot = snapshot_of(tuple(nodes))
            others = {name: dict(use) for name, use in cluster.others.items()}
            usage.refresh(ledger)
            for each in shapes:
                assert_same_decision(fast, each, snapshot, usage, others)
            for generation, step in enumerate(steps, start=2):
                index = step[1] % len(nodes) if len(step) > 1 else 0
                target = nodes[index]
                if step[0] == "use":
                    device = target.devices[step[2] % len(target.devices)]
                    use = {device.id: DeviceUse(1, step[3], step[4])}
                    others[target.name] = use
                    ledger.upsert([Entry(f"other-{target.name}", "default", "x", target.name, BOUND, use)])
                elif step[0] == "forget":
                    others.pop(target.name, None)
                    ledger.remove([f"other-{target.name}"])
                elif step[0] == "node":
                    nodes[index] = _change_node(target, step[2])
                records = dict(snapshot.nodes)
                records[nodes[index].name] = (
                    NodeRecord(nodes[index], generation)
                    if nodes[index] is not target
                    else records[nodes[index].name]
                )
                snapshot = Snapshot(generation, records, BROKEN)
                usage.refresh(ledger)
                for each in shapes[generation % len(shapes) :] + shapes[: generation % len(shapes)]:
                    assert_same_decision(fast, each, snapshot, usage, others)
        finally:
            ledger.close()


def test_usage_history_overflow_rereads_every_node() -> None:
    """More refreshes than the usage view remembers between two decisions: the table rereads all rows."""
    n1 = node("n1", gpu("a", 0, mem=1000))
    n2 = node("n2", gpu("b", 0, mem=1000))
    cluster = Cluster((n1, n2), {}, None, ["n1", "n2"], context(pod(ctr(gpu=1, mem=600))))
    usage, fast = UsageView(), FastPath()
    snapshot = snapshot_of(cluster.nodes)
    assert_same_decision(fast, cluster, snapshot, usage, {})
    for i in range(300):  # more than TOUCHED_HISTORY
        usage.load([Entry(f"e{i}", "default", "x", "n2", BOUND, {"b": DeviceUse(1, 500, 0)})])
    assert_same_decision(fast, cluster, snapshot, usage, {"n2": {"b": DeviceUse(1, 500, 0)}})
    choice = fast.choose(cluster.ctx, cluster.names, snapshot, usage, VENDORS)
    assert choice.winner is not None and choice.winner.node == "n1"


def test_a_full_node_is_skipped_and_the_next_one_wins() -> None:
    full = node("full", gpu("f", 0, mem=1000))
    free = node("free", gpu("g", 0, mem=1000))
    usage = UsageView()
    usage.load([Entry("x", "default", "x", "full", BOUND, {"f": DeviceUse(1, 900, 0)})])
    fast = FastPath()
    the_pod = context(pod(ctr(gpu=1, mem=500)))
    choice = fast.choose(the_pod, ["free", "full"], snapshot_of((full, free)), usage, VENDORS)
    assert choice.winner is not None and choice.winner.node == "free"
    assert choice.ranked_ahead == 1  # binpack ranks the fuller node first; it does not fit


@settings(deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.5, 2.25, 3.0, 7.0]), min_size=1, max_size=40), st.integers(1, 45))
def test_best_is_the_head_of_winner_order(scores: list[float], k: int) -> None:
    keys = np.array(scores)
    positions = np.arange(len(scores)) * 3  # increasing, not contiguous
    full = winner_order(keys, positions).tolist()
    assert full == sorted(range(len(scores)), key=lambda i: (scores[i], positions[i]), reverse=True)
    assert best(keys, positions, k).tolist() == full[:k]
    chunks = list(ranked_chunks(keys, positions, k))
    assert np.concatenate(chunks).tolist() == full
    assert [len(c) for c in chunks[:-1]] == [k * 4**i for i in range(len(chunks) - 1)]


# -- held reservations (docs/held-reservations.md) --------------------------------------------------------


@st.composite
def held(draw: st.DrawFn, nodes: tuple[NodeDevices, ...]) -> tuple[list[Hold], Asker]:
    """Random nominations and gang slots on the cluster's nodes (their uses as random as other pods'), of
    random owners, priorities and expiries, and the asker: this pod, with a random priority and gang."""
    holds = []
    for i in range(draw(st.integers(0, 4))):
        target = draw(st.sampled_from(nodes))
        kind = draw(st.sampled_from([NOMINATION, GANG]))
        owner = draw(st.sampled_from([UID, "other-pod"])) if kind == NOMINATION else "default/g"
        slot = draw(st.sampled_from([UID, "member-2"])) if kind == GANG else ""
        uses = draw(existing_use(target.devices))
        priority, expires = draw(st.integers(0, 3)), draw(st.sampled_from([NOW, NOW + 30]))
        key = f"{kind}/{owner}"
        holds.append(
            Hold(key, slot, kind, owner, "default", owner, priority, target.name, uses, (), "", i, expires)
        )
    asker = Asker(UID, draw(st.integers(0, 3)), draw(st.sampled_from(["", "default/g"])))
    return holds, asker


@EXACT
@given(st.data())
def test_fast_path_with_holds_decides_like_decide_on_the_rows_and_the_blocking_slots(
    data: st.DataObject,
) -> None:
    """The slots that block the asker count as usage on their nodes; nothing else about holds matters."""
    cluster = data.draw(clusters())
    holds, asker = data.draw(held(cluster.nodes))
    usage = UsageView()
    usage.load(entries_of(cluster))
    usage.set_holds(7, holds)
    others = {name: dict(use) for name, use in cluster.others.items()}
    for name, extra in held_use(holds, asker, NOW).items():
        others[name] = sum_uses((others.get(name, {}), extra))
    fast = FastPath(first_screen=data.draw(st.integers(1, 4)))
    assert_same_decision(fast, cluster, snapshot_of(cluster.nodes), usage, others, asker)
    choice = fast.choose(
        cluster.ctx, cluster.names, snapshot_of(cluster.nodes), usage, VENDORS, UID, asker, NOW
    )
    assert choice.winner is None or choice.holds == 7  # what the assume compares with the ledger's version
    plain = {name: dict(use) for name, use in cluster.others.items()}
    assert_same_decision(fast, cluster, snapshot_of(cluster.nodes), usage, plain)  # the same caches, no asker
