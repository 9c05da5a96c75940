"""Acquire mode's LeaseElector (kubernetes.leaderelection made embeddable) against the API emulator."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.k8s.client import Kube
from app.k8s.election import LeaseConfig, LeaseElector
from sim.emulator.testing import EmulatorHandle, run_emulator

LEASE = 10.0  # long, so a takeover well within it can only come from the release


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with run_emulator(tmp_path / "sim") as handle:
        yield handle


def until(predicate: Callable[[], Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def elector(kube: Kube, identity: str, changes: list[str]) -> LeaseElector:
    config = LeaseConfig("extender", "default", identity, LEASE, 8.0, 1.0)
    return LeaseElector(kube, config, lambda: changes.append(identity))


def test_one_holder_and_a_clean_stop_hands_over_at_once(sim: EmulatorHandle, kube: Kube) -> None:
    changes: list[str] = []
    a, b = elector(kube, "a", changes), elector(kube, "b", changes)
    a.start()
    until(lambda: a.state().leading, 10)
    b.start()
    try:
        time.sleep(1.5)
        assert not b.state().leading and b.state().holder == "a"
        state = a.state()
        assert state.expires_at > time.time() and state.holder == "a"
        lease = sim.get("leases.coordination.k8s.io", "extender", "default")
        assert lease is not None and lease["spec"]["holderIdentity"] == "a"
        assert lease["spec"]["leaseDurationSeconds"] == int(LEASE)

        stopped = time.monotonic()
        a.stop(timeout=5)
        assert not a.state().leading
        until(lambda: b.state().leading, 6)
        assert time.monotonic() - stopped < LEASE, "the released Lease was taken before it expired"
        assert changes == ["a", "a", "b"]
    finally:
        a.stop(timeout=5)
        b.stop(timeout=5)


def test_survives_an_unreachable_api(sim: EmulatorHandle, kube: Kube) -> None:
    sim.add_fault(action="lost_response", resource="leases", count=3)
    changes: list[str] = []
    a = elector(kube, "a", changes)
    a.start()
    try:
        until(lambda: a.state().leading, 15)
    finally:
        a.stop(timeout=5)
