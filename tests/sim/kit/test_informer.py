"""The harness's list+watch loop (sim/kit/informer.py) against the emulator: it sees changes, and `stop`
interrupts an idle watch at once instead of waiting for an event that an idle cluster never sends (no change,
so no bookmark either): every simulated kube-scheduler or kubelet a test stops used to cost 5 s per watch."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.emulator.testing import EmulatorOptions, run_emulator
from sim.kit.informer import Informer
from sim.kit.kube import Kube


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Kube]:
    with run_emulator(tmp_path / "sim", options=EmulatorOptions(bookmark_interval=0.2)) as handle:
        client = Kube.from_kubeconfig(handle.kubeconfig)
        try:
            yield client
        finally:
            client.close()


@pytest.mark.parametrize("path", ["/api/v1/nodes", "/api/v1/pods"], ids=["nodes", "pods"])
def test_an_idle_watch_is_stopped_at_once_and_nothing_is_seen_after(kube: Kube, path: str) -> None:
    seen: list[str] = []
    added = threading.Event()

    def handler(kind: str, obj: dict[str, object], old: object) -> None:
        seen.append(kind)
        added.set()

    informer = Informer(kube, path, handler, "test-informer").start()
    assert informer.synced.wait(10)
    name = {"name": "one", "namespace": "default"} if path.endswith("pods") else {"name": "one"}
    body = {"metadata": name, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    kube.create(path if path.endswith("nodes") else "/api/v1/namespaces/default/pods", body)
    assert added.wait(10), "the informer saw no change"
    time.sleep(0.5)  # idle: nothing changes, so the stream sends nothing

    informer.stop(wait=5.0)  # without the interrupt the thread is still blocked in the read after 5 s
    assert not informer._thread.is_alive(), "stop did not interrupt the idle watch"
    before = list(seen)
    kube.create(
        path if path.endswith("nodes") else "/api/v1/namespaces/default/pods",
        {**body, "metadata": {**name, "name": "two"}},
    )
    time.sleep(0.5)
    assert seen == before == ["ADDED"]
