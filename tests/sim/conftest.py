"""Fixtures for the emulator's tests: a fresh in-process emulator per test, the real client on it, kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from sim.emulator.testing import REPO_ROOT, EmulatorHandle, EmulatorOptions, run_emulator
from sim.kit.kube import Kube

KUBECTL = REPO_ROOT / ".tools" / "bin" / "kubectl"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    """An emulator in this process with short graceful deletions and bookmarks."""
    options = EmulatorOptions(pod_deletion_delay=0.3, bookmark_interval=0.2, fault_seed=7)
    with run_emulator(tmp_path / "sim", options=options) as handle:
        yield handle


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Kube]:
    """The simulator's own thin client (sim/kit/kube.py) on a fresh emulator, for the simulated nodes'
    tests."""
    options = EmulatorOptions(pod_deletion_delay=0.2, bookmark_interval=0.2)
    with run_emulator(tmp_path / "kube", options=options) as handle:
        client_ = Kube.from_kubeconfig(handle.kubeconfig)
        try:
            yield client_
        finally:
            client_.close()


@pytest.fixture
def api(sim: EmulatorHandle) -> Iterator[client.ApiClient]:
    with sim.api_client() as api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def kubectl_binary() -> Path:
    if not KUBECTL.exists():
        pytest.fail(f"kubectl is missing at {KUBECTL}: run `make tools` first")
    return KUBECTL
