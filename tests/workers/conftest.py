"""Fixtures shared by the worker tests that talk to an API emulator: each module defines its own `sim`
(emulator options and seed differ); `kube` is our client on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.k8s.client import Kube, connect
from sim.emulator.testing import EmulatorHandle


@pytest.fixture
def kube(sim: EmulatorHandle) -> Iterator[Kube]:
    client = connect(str(sim.kubeconfig))
    try:
        yield client
    finally:
        client.close()
