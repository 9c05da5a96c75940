"""Fixtures for the end-to-end suites on the real control plane (etcd, kube-apiserver, kube-scheduler built
by `make kube`; `make test` builds them first).

- `real_binaries` (session): the built binaries; a test fails (never skips) with "run `make kube`" when they
  are missing, so CI cannot pass without running them.
- `small_cluster` (module): the same with 2 nodes x 2 GPUs, one zone, no MIG, chart defaults.
- `real_cluster` (module): a whole stack on the real control plane (`sim.cluster.harness.running_cluster`): 4
  nodes x 8 GPUs, the first A100 node in MIG mode, one replica of our worker + Gunicorn configured from the
  chart (`worker.publishCapacity` on), the chart's webhook and the real kube-scheduler. Yields the
  `sim.cluster.stack.Stack` (`.kube` admin client, `.control_plane`, `.service_url`, `.http` trusting the
  chart's CA). Every process is stopped when the module's tests are done, also on failure.

Other suites that want the real control plane use `sim.cluster.harness.running_cluster(workdir,
ClusterSpec(control_plane="real", ...))` directly (see docs/real-control-plane.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import Stack
from sim.controlplane import binaries


@pytest.fixture(scope="session")
def real_binaries() -> binaries.Binaries:
    try:
        return binaries.find()
    except binaries.MissingBinaries as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def real_cluster(
    real_binaries: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    values = {"worker": {"publishCapacity": True}}
    options = ClusterSpec(
        control_plane="real", nodes=4, gpus_per_node=8, mig_nodes=1, zones=2, chart_values=values
    )
    with running_cluster(tmp_path_factory.mktemp("real-cluster"), options) as stack:
        yield stack


@pytest.fixture(scope="module")
def small_cluster(
    real_binaries: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """Two nodes of two GPUs in one zone, the chart's defaults: the API server, our webhook and extender
    and kube-scheduler, for suites that need few devices (test_real_bad_input.py, test_real_events.py)."""
    options = ClusterSpec(control_plane="real", nodes=2, gpus_per_node=2, zones=1)
    with running_cluster(tmp_path_factory.mktemp("small-cluster"), options) as stack:
        yield stack
