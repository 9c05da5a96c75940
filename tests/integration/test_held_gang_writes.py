"""A gang member's allocation write held until its quorum was reserved (app/filter/gang.py) and sent later
(app/filter/write.py `Write.reread`): against the API emulator, a write whose pod changed meanwhile
(kube-scheduler's status write) reads the pod once and lands; a pod bound or recreated meanwhile gets
nothing and the row is forgotten; an ordinary deferred write keeps its precondition."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.filter.write import AllocationWriter, Write
from app.k8s import objects
from app.k8s.client import Kube, connect
from app.k8s.events import PodRef
from app.state.ledger import ASSUMED, Entry, Ledger
from sim.emulator.testing import EmulatorHandle, pod, run_emulator

pytestmark = pytest.mark.integration


class Events:
    def record(self, *_: Any) -> None:
        pass


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with run_emulator(tmp_path / "sim") as handle:
        yield handle


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


def _setup(sim: EmulatorHandle, kube: Kube, ledger: Ledger, name: str) -> Write:
    """A pod, its assumed row, and a held write made on the pod's version of then; the pod then changes."""
    sim.seed([pod(name)])
    current = objects.get_pod(kube, "default", name)
    uid = current["metadata"]["uid"]
    ledger.upsert([Entry(uid, "default", name, "n1", ASSUMED, {}, allocation="a")])
    write = Write(PodRef("default", name, uid), "n1", {"hami.io/vgpu-node": "n1"}, "a", "e",
                  objects.resource_version(current), reread=True)  # fmt: skip
    objects.patch_pod_metadata(kube, "default", name, {"example.com/status": "written meanwhile"})
    return write


def test_a_held_write_lands_on_the_pod_as_it_is_now(sim: EmulatorHandle, kube: Kube, ledger: Ledger) -> None:
    write = _setup(sim, kube, ledger, "m0")
    writer = AllocationWriter(kube, ledger, Events(), events_enabled=False)  # type: ignore[arg-type]
    assert writer.perform(write) is True
    assert objects.get_pod(kube, "default", "m0")["metadata"]["annotations"]["hami.io/vgpu-node"] == "n1"
    entry = ledger.get(write.ref.uid)
    assert entry is not None and entry.state == "confirmed"


def test_an_ordinary_write_keeps_its_precondition(sim: EmulatorHandle, kube: Kube, ledger: Ledger) -> None:
    write = replace(_setup(sim, kube, ledger, "m1"), reread=False)
    writer = AllocationWriter(kube, ledger, Events(), events_enabled=False)  # type: ignore[arg-type]
    assert writer.perform(write) is False
    assert "hami.io/vgpu-node" not in (
        objects.get_pod(kube, "default", "m1")["metadata"].get("annotations") or {}
    )
    assert ledger.get(write.ref.uid) is None


def test_a_pod_bound_meanwhile_gets_nothing(sim: EmulatorHandle, kube: Kube, ledger: Ledger) -> None:
    write = _setup(sim, kube, ledger, "m2")
    objects.bind_pod(kube, "default", "m2", write.ref.uid, "n1")
    writer = AllocationWriter(kube, ledger, Events(), events_enabled=False)  # type: ignore[arg-type]
    assert writer.perform(write) is False
    assert ledger.get(write.ref.uid) is None
