"""The fast path decides exactly like `decide` on mixed-vendor clusters, including vendors without a batch
form (every candidate evaluated) and Ascend 910's topology score (every candidate evaluated and ranked)."""

from __future__ import annotations

from core_builders import context
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vendor_strategies import VENDORS, MixedScenario, scenarios

from app.core.decision import decide
from app.state.fastpath import FastPath
from app.state.ledger import BOUND, Entry
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(max_nodes=6), st.integers(1, 3), st.randoms(use_true_random=False))
def test_fast_path_decides_like_decide_on_mixed_clusters(
    scenario: MixedScenario, first: int, rng: object
) -> None:
    ctx = context(
        scenario.pod, gpu_policy=scenario.gpu_policy, node_policy=scenario.node_policy, vendors=VENDORS
    )
    names = [n.name for n in scenario.nodes]
    rng.shuffle(names)  # type: ignore[attr-defined]
    nodes = {n.name: n for n in scenario.nodes}
    expected = decide(ctx, [*names, "gone"], nodes, scenario.usage, VENDORS)
    usage = UsageView()
    usage.load([Entry(f"o-{n}", "default", "o", n, BOUND, use) for n, use in scenario.usage.items() if use])
    snapshot = Snapshot(1, {n.name: NodeRecord(n, 1) for n in scenario.nodes})
    choice = FastPath(first_screen=first).choose(ctx, [*names, "gone"], snapshot, usage, VENDORS)
    assert choice.winner == expected.winner
    if expected.winner is None:
        assert list(choice.failed.items()) == list(expected.failed.items())
