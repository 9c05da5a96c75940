"""Pods the fuzzer (`python -m sim fuzz`, seed 1, planted pods) found to stop the registration worker.

A bound pod of ours whose allocation annotation carried a number of 5000 digits made the codec raise a
plain ValueError (CPython's int conversion limit), which the reconciler did not catch: the pod informer's
handler failed, the informer listed again, failed again, for ever, and the ledger never synced again —
one pod stopped every scheduling decision. The codec now refuses such a number as a CodecError, and the
reconciler contains any malformed value to the one pod (it holds nothing, it is logged), never the batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from worker_builders import SCHEDULER, VENDORS, allocation, gpu_pod

from app.state.ledger import Ledger
from workers import shapes
from workers.informers import ADDED, Change
from workers.reconcile import Rules, live_verdict, rebuild
from workers.reconciler import Reconciler

NOW = 1_800_000_000.0
RULES = Rules(frozenset({SCHEDULER}), VENDORS, 60.0)
SHAPE = shapes.pod_shape(VENDORS)
GOOD = gpu_pod("good", alloc=allocation(("GPU-a", 1000, 10)))
POISONS = [
    pytest.param(gpu_pod("poison", alloc="GPU-a,NVIDIA," + "9" * 5000 + ",10:;"), id="memory-5000-digits"),
    pytest.param(gpu_pod("poison", alloc="GPU-a,NVIDIA,10," + "9" * 5000 + ":;"), id="cores-5000-digits"),
]


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(tmp_path)
    try:
        yield opened
    finally:
        opened.close()


@pytest.mark.parametrize("poison", POISONS)
def test_a_poison_pod_holds_nothing_and_says_why(poison: dict[str, Any]) -> None:
    verdict = live_verdict(Change(ADDED, SHAPE(poison), None), RULES, NOW)
    assert verdict.remove and verdict.entry is None and "pod annotation format error" in verdict.problem


@pytest.mark.parametrize("poison", POISONS)
def test_a_poison_pod_never_fails_the_batch(poison: dict[str, Any], ledger: Ledger) -> None:
    problems: list[int] = []
    reconciler = Reconciler(ledger, RULES, lambda: NOW, on_problem=lambda: problems.append(1))
    reconciler.handle([Change(ADDED, SHAPE(poison), None), Change(ADDED, SHAPE(GOOD), None)])
    assert [e.name for e in ledger.all_entries()] == ["good"] and problems == [1]


@pytest.mark.parametrize("poison", POISONS)
def test_a_rebuild_skips_the_poison_pod_and_keeps_the_rest(poison: dict[str, Any]) -> None:
    rebuilt = rebuild([SHAPE(poison), SHAPE(GOOD)], RULES, NOW)
    assert [e.name for e in rebuilt.entries] == ["good"]
    assert [pod for pod, _ in rebuilt.problems] == ["default/poison"]
