"""Watch expiry against both control planes: a watch from a version the server no longer has is 410 Gone
(what our informers relist on)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sim.controlplane import ControlPlane
from sim.kit.kube import Kube, KubeError

pytestmark = pytest.mark.integration


@pytest.fixture
def api(expiring_plane: ControlPlane) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(expiring_plane.kubeconfig)
    try:
        yield client
    finally:
        client.close()


def lease(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }


def test_a_watch_from_an_expired_resource_version_is_410_gone(api: Kube) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    first = api.create(path, lease("expiring"))["metadata"]["resourceVersion"]
    for index in range(60):  # past the emulator's 50-event window; etcd compacts every 2 s
        api.patch(f"{path}/expiring", {"spec": {"holderIdentity": f"h{index}"}})
    deadline = time.monotonic() + 30
    while True:
        try:
            list(api.watch(path, first, threading.Event(), timeout_seconds=1))
        except KubeError as gone:
            assert gone.status == 410 and gone.reason in ("Expired", "Gone"), gone
            return
        assert time.monotonic() < deadline, "a watch from an old version never expired"
        time.sleep(0.5)
