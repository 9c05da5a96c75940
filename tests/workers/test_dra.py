"""workers/dra.py against the API emulator: paged read-only lists, facts into the ledger row and the gauges,
a cluster without resource.k8s.io (404) is no DRA and no error, any other failure keeps the last facts and
is logged once."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_dra_side_by_side import device_class, resource_slice
from worker_builders import VENDORS

from app.core.dra import DraFacts
from app.k8s import dra as k8s_dra
from app.k8s.client import Kube
from app.state import drafacts
from app.state.ledger import Ledger
from sim.emulator.testing import EmulatorHandle, run_emulator
from workers.dra import DraCheck
from workers.metrics import WorkerMetrics


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with run_emulator(tmp_path / "sim") as handle:
        yield handle


def _sample(metrics: WorkerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels or None)


def test_facts_reach_the_ledger_and_the_gauges_through_paged_lists(
    sim: EmulatorHandle, kube: Kube, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(k8s_dra, "PAGE", 1)  # every object its own page: the continue tokens are followed
    sim.seed(
        [
            device_class(),
            device_class("other", "example.com/fpga"),
            *(resource_slice(f"n{i}") for i in range(3)),
        ]
    )
    metrics = WorkerMetrics()
    check = DraCheck(kube, VENDORS, ledger, metrics, lambda: 42.0)
    facts = check.run({"n0", "n2", "cpu-node"})
    assert facts is not None and facts.available and facts.checked_at == 42.0
    assert [c.resource for c in facts.collisions] == ["nvidia.com/gpu"]
    assert [o.node for o in facts.overlaps] == ["n0", "n2"]
    assert drafacts.decode(ledger.status()[drafacts.ROW]) == facts
    assert _sample(metrics, "hami_worker_dra_available") == 1.0
    assert _sample(metrics, "hami_worker_dra_collisions", resource="nvidia.com/gpu", vendor="NVIDIA") == 1.0
    assert _sample(metrics, "hami_worker_dra_overlapping_nodes") == 2.0

    sim.delete("deviceclasses.resource.k8s.io", "gpu.nvidia.com")
    assert check.run({"n0"}) is not None
    assert _sample(metrics, "hami_worker_dra_collisions", resource="nvidia.com/gpu", vendor="NVIDIA") is None
    assert _sample(metrics, "hami_worker_dra_overlapping_nodes") == 1.0


def test_no_resource_api_is_no_dra_and_no_error(
    sim: EmulatorHandle, kube: Kube, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    sim.add_fault(action="error", status=404, path="^/apis/resource.k8s.io/")
    metrics = WorkerMetrics()
    check = DraCheck(kube, VENDORS, ledger, metrics, lambda: 1.0)
    with caplog.at_level(logging.INFO, logger="workers.dra"):
        for _ in range(3):
            assert check.run({"n0"}) == DraFacts(False, (), (), 1.0)
    assert [r.levelno for r in caplog.records] == [logging.INFO]  # said once, not an error
    assert _sample(metrics, "hami_worker_dra_available") == 0.0


def test_a_failing_list_keeps_the_last_facts_and_is_logged_once(
    sim: EmulatorHandle, kube: Kube, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    sim.seed([device_class()])
    check = DraCheck(kube, VENDORS, ledger, WorkerMetrics(), lambda: 1.0)
    before = check.run(set())
    assert before is not None and before.collisions
    sim.add_fault(action="error", status=403, path="^/apis/resource.k8s.io/v1/resourceslices")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="workers.dra"):
        assert check.run(set()) is None
        assert check.run(set()) is None
    assert len(caplog.records) == 1 and "DRA objects not readable" in caplog.records[0].message
    assert check.last == before and drafacts.decode(ledger.status()[drafacts.ROW]) == before
