"""What the bind without reads relies on, shown on the real kube-apiserver (issue 20 scope 2; app/k8s/
objects.py `add_node_annotation_if_absent`, app/bind/usecase.py `_written`). One control plane start, no
kube-scheduler:

- a JSON patch `test` of `null` passes on a missing annotation (gopkg.in/evanphx/json-patch.v4, which
  kube-apiserver applies) and is refused with 422 once the annotation is there, so the node lock is taken
  while free in one request and never overwrites a lock (the emulator mirrors this: sim/emulator/patching.py);
- `lock_node(..., blind=True)` takes a free lock in that one request, HAMi's value byte for byte, and falls
  back to the read-decide-CAS on a held one (HAMi's contention text);
- a stamp like the bind-phase one (a merge patch carrying the old incarnation's UID and resourceVersion)
  is refused once the pod was deleted and recreated under the same name; the new pod is left untouched.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.core.nodelock import LOCK_ANNOTATION, contention_message, format_lock
from app.k8s import objects
from app.k8s.client import connect
from app.k8s.errors import ApiError
from app.k8s.nodelock import Backoff, LockContention, lock_node
from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.emulator.testing import pod
from sim.kit.kube import pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]
EXPIRE = timedelta(minutes=5)


def test_the_requests_the_bind_saves_rely_on_kube_apiservers_own_answers(
    real_binaries: object, tmp_path: Path
) -> None:
    options = ClusterSpec(control_plane="real", nodes=1, gpus_per_node=1, zones=1, scheduler=False)
    with running_cluster(tmp_path / "run", options) as stack:
        assert stack.control_plane is not None and stack.kube is not None
        kube = connect(str(stack.control_plane.kubeconfig))
        try:
            node = stack.kube.list("/api/v1/nodes")[1][0]["metadata"]["name"]
            objects.patch_node_annotations(kube, node, {LOCK_ANNOTATION: None})

            objects.add_node_annotation_if_absent(kube, node, "example.com/free", "first")
            with pytest.raises(ApiError) as refused:
                objects.add_node_annotation_if_absent(kube, node, "example.com/free", "second")
            assert refused.value.status == 422, refused.value
            assert objects.annotations_of(objects.get_node(kube, node))["example.com/free"] == "first"

            now = datetime.now(UTC).replace(microsecond=0)
            taken = lock_node(kube, node, "default", "p", EXPIRE, lambda: now, blind=True)
            assert taken.value == format_lock(now, "default", "p") and not taken.reentered
            assert objects.annotations_of(objects.get_node(kube, node))[LOCK_ANNOTATION] == taken.value
            stack.kube.create(pod_path("default"), pod("p"))  # the holder exists, unbound: active
            with pytest.raises(LockContention) as contended:
                lock_node(kube, node, "default", "q", EXPIRE, lambda: now, Backoff(steps=1), blind=True)
            assert str(contended.value) == contention_message(node, EXPIRE)

            old = stack.kube.create(pod_path("default"), pod("again"))
            stack.kube.delete(pod_path("default", "again"), grace=0)
            fresh = stack.kube.create(pod_path("default"), pod("again"))
            with pytest.raises(ApiError) as stale:
                objects.patch_pod_metadata(
                    kube,
                    "default",
                    "again",
                    {"example.com/stamp": "allocating"},  # (the chart's webhook guards hami.io/ keys)
                    uid=old["metadata"]["uid"],
                    resource_version=old["metadata"]["resourceVersion"],
                )
            assert stale.value.status in (409, 422), stale.value
            annotations = objects.annotations_of(objects.get_pod(kube, "default", "again"))
            assert "example.com/stamp" not in annotations
            assert objects.get_pod(kube, "default", "again")["metadata"]["uid"] == fresh["metadata"]["uid"]
        finally:
            kube.close()
