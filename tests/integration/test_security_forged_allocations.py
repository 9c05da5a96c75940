"""A pod cannot grant itself GPU capacity by writing the scheduler's annotations (HAMi #3041).

Through the running service, the real registration worker and the API emulator:

(a) CREATE through /webhook (the patch applied, as the API server applies it): a pod naming another
    scheduler — or ours, or the default one — with a forged `hami.io/vgpu-node` and allocation keeps none
    of the scheduler-owned annotations; the response warns once per removed key.
(b) A pod created directly in the API (the webhook down, or the pod older than the webhook) with a foreign
    schedulerName, a forged allocation of a whole GPU and `spec.nodeName` on that GPU's node is never
    counted: not in the ledger, /debug/state or /metrics, and a following filter still gets the capacity —
    also after a leader rebuild (the worker restarted) that starts from a ledger in which a faulty
    component had recorded the forged pod.
(c) UPDATE of scheduler-owned annotations: denied for an untrusted user (adding, changing or removing
    one), allowed for the scheduler's service account; other annotations stay editable by anyone.
"""

from __future__ import annotations

import base64
import copy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.core.model import DeviceUse
from app.state.ledger import BOUND, Entry
from sim.kit.processes import ChildProcess, start_process

pytestmark = pytest.mark.integration

NODE = "gpu-forge"
GPU = f"GPU-{NODE}-0"  # the node's only GPU: 10 slots, 32768 MiB, 100 cores
FORGED_KEYS = ("hami.io/vgpu-node", "hami.io/vgpu-devices-allocated", "hami.io/vgpu-devices-to-allocate")
WHOLE_GPU = f"{GPU},NVIDIA,32768,100:;"
TRUSTED = "system:serviceaccount:kube-system:hami-scheduler"
MIB = 1024 * 1024


def forged(name: str, scheduler: str, **spec: Any) -> dict[str, Any]:
    """A pod carrying a forged allocation of the whole GPU (and bind annotations the device plugin reads)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {
                "hami.io/vgpu-node": NODE,
                "hami.io/vgpu-devices-allocated": WHOLE_GPU,
                "hami.io/vgpu-devices-to-allocate": WHOLE_GPU,
                "hami.io/bind-phase": "success",
                "team": "keep-me",
            },
        },
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            **spec,
        },
    }


def review(pod: dict[str, Any], operation: str = "CREATE", old: Any = None, user: str = "") -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": f"{operation}-{pod['metadata']['name']}",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default",
        "operation": operation,
        "userInfo": {"username": user or "system:serviceaccount:default:someone"},
        "object": pod,
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=1))
    svc = start_service(registrar="worker")
    wait_for(lambda: svc.debug_state(NODE)["registered"], 30, f"{NODE} registered")
    return svc


# --- (a) CREATE through the webhook ------------------------------------------------------------------------


@pytest.mark.parametrize("scheduler", ["other-scheduler", "hami-scheduler", "default-scheduler"])
def test_create_strips_forged_annotations_whatever_the_scheduler(
    scheduler: str, service: Any, cluster: Any
) -> None:
    pod = forged(f"create-{scheduler}", scheduler)
    response = service.post_json("/webhook", review(pod)).json()["response"]
    assert response["allowed"] is True
    patch = orjson.loads(base64.b64decode(response["patch"]))
    admitted = jsonpatch.apply_patch(copy.deepcopy(pod), patch)
    created = cluster.create_pod(admitted)
    annotations = created["metadata"].get("annotations") or {}
    assert not any(key.startswith(("hami.io/vgpu-", "hami.io/bind-")) for key in annotations)
    assert annotations["team"] == "keep-me"
    assert len(response["warnings"]) == 4 and all("only the GPU scheduler" in w for w in response["warnings"])


# --- (b) created behind the webhook's back ---------------------------------------------------------------


def reservations(service: Any) -> dict[str, str]:
    """uid -> pod name of every row in the shared ledger."""
    return {entry.uid: entry.name for entry in service.ledger.all_entries()}


def gpu_memory_metrics(service: Any) -> tuple[float, set[str]]:
    """(memory allocated on GPU, in MiB; the pods /metrics lists on it)."""
    allocated, pods = 0.0, set()
    for family in text_string_to_metric_families(service.metrics()):
        for sample in family.samples:
            if sample.labels.get("device_uuid") != GPU:
                continue
            if sample.name == "hami_gpu_memory_allocated_bytes":
                allocated = sample.value / MIB
            if sample.name == "hami_vgpu_memory_allocated_bytes":
                pods.add(sample.labels["pod"])
    return allocated, pods


@pytest.fixture(scope="module")
def behind_the_webhook(service: Any, cluster: Any, wait_for: Any) -> dict[str, str]:
    """The forged pod (created bound and Running, bypassing the webhook) and a legitimate one after it:
    once the ledger holds the legitimate pod, the worker has seen the forged one (one ordered watch)."""
    forger = cluster.create_pod(forged("forger", "other-scheduler", nodeName=NODE))
    cluster.core.patch_namespaced_pod_status("forger", "default", {"status": {"phase": "Running"}})
    legit = cluster.gpu_pod("legit", memory=1000, cores=10)
    legit["metadata"]["annotations"] = {
        "hami.io/vgpu-node": NODE,
        "hami.io/vgpu-devices-allocated": f"{GPU},NVIDIA,1000,10:;",
    }
    legit["spec"]["nodeName"] = NODE
    legit_uid = cluster.create_pod(legit)["metadata"]["uid"]
    wait_for(lambda: legit_uid in reservations(service), 30, "the worker to count the legitimate pod")
    return {"forger": forger["metadata"]["uid"], "legit": legit_uid}


def assert_never_counted(service: Any, uids: dict[str, str], wait_for: Any) -> None:
    assert uids["legit"] in reservations(service)
    assert uids["forger"] not in reservations(service)
    state = service.debug_state(NODE)
    assert [r["pod"] for r in state["reservations"]] == ["default/legit"]
    assert state["devices"][0]["used"] == {"slots": 1, "memory": 1000, "cores": 10}
    # /metrics lags the ledger by at most one render of the registration worker (1 s here)
    wait_for(lambda: gpu_memory_metrics(service) == (1000.0, {"legit"}), 15, "HAMi's gauges")


def test_a_forged_pod_is_never_counted(
    service: Any, behind_the_webhook: dict[str, str], wait_for: Any
) -> None:
    assert_never_counted(service, behind_the_webhook, wait_for)


def test_a_following_filter_gets_the_capacity_the_forged_pod_claims(
    service: Any, cluster: Any, behind_the_webhook: dict[str, str]
) -> None:
    # 31000 MiB and 90 cores fit only if the forged 32768 MiB / 100 cores are not counted
    pod = cluster.create_pod(cluster.gpu_pod("after-forgery", memory=31000, cores=90))
    answer = service.filter(pod, [NODE])
    assert answer["NodeNames"] == [NODE], answer
    cluster.core.delete_namespaced_pod("after-forgery", "default")


@pytest.fixture
def rebuilt(service: Any, behind_the_webhook: dict[str, str], tmp_path: Path) -> Iterator[ChildProcess]:
    """The registration worker stopped, the forged pod recorded in the ledger (as a faulty component
    might have done), and the worker started again: a starting leader rebuilds the ledger from a list."""
    assert service.worker is not None
    service.worker.stop()
    forged_row = Entry(
        uid=behind_the_webhook["forger"],
        namespace="default",
        name="forger",
        node=NODE,
        state=BOUND,
        uses={GPU: DeviceUse(1, 32768, 100)},
    )
    service.ledger.upsert([forged_row])
    env = {
        **service.env,
        "HAMI_REGISTRATION_INTERVAL": "1s",
        "HAMI_STATE_METRICS_INTERVAL": "1s",
        "HAMI_WORKER_METRICS_BIND": "127.0.0.1:0",
    }
    repo = Path(__file__).resolve().parents[2]
    worker = start_process(
        [sys.executable, "-m", "workers"], log_path=tmp_path / "workers.log", env=env, cwd=repo
    )
    try:
        yield worker
    finally:
        worker.stop(15.0)


def test_a_rebuild_never_counts_it_either(
    service: Any, behind_the_webhook: dict[str, str], rebuilt: ChildProcess, wait_for: Any
) -> None:
    wait_for(lambda: behind_the_webhook["forger"] not in reservations(service), 60, "the rebuild")
    service.wait_ready(60.0)
    assert rebuilt.alive()
    assert_never_counted(service, behind_the_webhook, wait_for)


# --- (c) UPDATE ---------------------------------------------------------------------------------------------


def _with(annotations: dict[str, str]) -> dict[str, Any]:
    pod = forged("updated", "hami-scheduler")
    pod["metadata"]["annotations"] = annotations
    return pod


OURS = {"hami.io/vgpu-node": NODE, "hami.io/vgpu-devices-allocated": f"{GPU},NVIDIA,1000,10:;"}


@pytest.mark.parametrize(
    ("old", "new", "user", "allowed"),
    [
        ({}, OURS, "system:serviceaccount:default:mallory", False),
        (OURS, {**OURS, "hami.io/vgpu-devices-allocated": WHOLE_GPU}, "mallory", False),
        (OURS, {"hami.io/vgpu-node": NODE}, "mallory", False),
        (OURS, {**OURS, "hami.io/bind-phase": "success"}, "", False),
        ({}, OURS, TRUSTED, True),
        (
            OURS,
            {**OURS, "hami.io/bind-phase": "success"},
            "system:serviceaccount:kube-system:hami-device-plugin",
            True,
        ),
        (OURS, {**OURS, "team": "x"}, "mallory", True),
    ],
    ids=["add", "change", "remove", "no-user", "scheduler-adds", "device-plugin-changes", "other-keys"],
)
def test_update_of_scheduler_owned_annotations_needs_a_trusted_user(
    old: dict[str, str], new: dict[str, str], user: str, allowed: bool, service: Any
) -> None:
    body = review(_with(new), "UPDATE", _with(old), user)
    response = service.post_json("/webhook", body).json()["response"]
    assert response["allowed"] is allowed
    assert "patch" not in response
    if not allowed:
        assert response["status"]["code"] == 403
        assert "may not change scheduler-owned annotations" in response["status"]["message"]


def _bound(annotations: dict[str, str]) -> dict[str, Any]:
    pod = _with(annotations)
    pod["spec"]["nodeName"] = NODE
    return pod


@pytest.mark.parametrize(
    ("new", "allowed"),
    [
        ({**OURS, "hami.io/vgpu-devices-allocated": WHOLE_GPU}, False),
        ({**OURS, "hami.io/vgpu-node": "elsewhere"}, False),
        ({"hami.io/vgpu-node": NODE}, False),
        ({**OURS, "hami.io/bind-phase": "success"}, True),
    ],
    ids=["rewrite-devices", "move-node", "drop-allocation", "bind-phase"],
)
def test_nobody_may_change_a_bound_pods_allocation(new: dict[str, str], allowed: bool, service: Any) -> None:
    """Issue 11, finding 3 without our service: even the scheduler's own ServiceAccount (the identity a
    forged /filter used to borrow) may not rewrite the allocation of a bound pod."""
    body = review(_bound(new), "UPDATE", _bound(OURS), TRUSTED)
    response = service.post_json("/webhook", body).json()["response"]
    assert response["allowed"] is allowed
    if not allowed:
        assert response["status"]["code"] == 403
        assert "the allocation of a bound pod is immutable" in response["status"]["message"]
