"""A client of the module's API emulator (`sim`, which each module defines: what it seeds, how long it
lives); modules whose emulator lives per test define their own `kube` too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.k8s.client import Kube, connect
from sim.emulator.testing import EmulatorHandle


@pytest.fixture(scope="module")
def kube(sim: EmulatorHandle) -> Iterator[Kube]:
    connected = connect(str(sim.kubeconfig))
    yield connected
    connected.close()
