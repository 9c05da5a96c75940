"""Fixtures shared by the worker tests that talk to an API emulator: each module defines its own `sim`
(emulator options and seed differ); `kube` is our client on it; `ledger` a ledger in a temporary state
directory (modules may define their own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.k8s.client import Kube, connect
from app.state.ledger import Ledger
from sim.emulator.testing import EmulatorHandle


@pytest.fixture
def kube(sim: EmulatorHandle) -> Iterator[Kube]:
    client = connect(str(sim.kubeconfig))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(tmp_path / "state")
    try:
        yield opened
    finally:
        opened.close()
