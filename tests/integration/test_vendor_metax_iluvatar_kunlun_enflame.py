"""Metax (GPU, sGPU), Iluvatar, Kunlunxin (XPU, vXPU) and Enflame (GCU, DRS) through real processes (the API
emulator, Gunicorn, the registration worker), on nodes as their device plugins publish them
(sim.nodes.vendors): Metax GPUs, Kunlunxin XPUs and Enflame GCUs derived from capacity, Metax sGPUs from
Metax's device list, Iluvatar and Kunlunxin vXPUs from HAMi register annotations, Enflame DRS from its
capacity annotation. Pods of each vendor, and pods asking two of them at once, are filtered, bound and
allocated by the simulated device plugins (HAMi's lock-and-to-allocate protocol; Kunlunxin's XPU plugin
reading `BAIDU_COM_DEVICE_IDX`; Enflame's DRS plugin flipping `enflame.com/gcu-assigned`); then no device is
oversubscribed, no node lock is left, and a ledger rebuilt from the pods equals the live one.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_vendor_mixed_cluster import (
    assert_rebuild_equals_live,
    kubelets,
    pod,
    schedule_all,
    start_with_sections,
)

from app.devices import build_vendors
from sim.nodes.objects import ClusterSpec, build_cluster
from sim.nodes.twobackends import TWO_BACKEND_SECTIONS
from sim.nodes.vendors import parse_vendors
from sim.workload.report import summarize

pytestmark = pytest.mark.integration
__all__ = ["kubelets"]  # the mixed-cluster module's fixture: the simulated kubelets of `spec`

MIX = "nvidia+metax-sgpu,metax+iluvatar,kunlun+enflame,kunlun-vxpu+enflame-drs"
SECTIONS = {"nvidia": {"resourceCountName": "nvidia.com/gpu"}, **TWO_BACKEND_SECTIONS}
VENDORS = build_vendors(SECTIONS, frozenset({"iluvatar"}))
MUTEX = "hami.io/mutex.lock"

SGPU = {"metax-tech.com/sgpu": "1", "metax-tech.com/vmemory": "4", "metax-tech.com/vcore": "30"}
PODS = [
    pod("metax-cards", {"metax-tech.com/gpu": "2"}),
    pod("sgpu", SGPU, annotations={"metax-tech.com/sgpu-qos-policy": "best-effort"}),
    pod("bi", {"iluvatar.ai/BI-V150-vgpu": "1", "iluvatar.ai/BI-V150.vMem": "16"}),  # 16 x 256 MiB
    pod("xpu", {"kunlunxin.com/xpu": "2"}),
    pod("vxpu", {"kunlunxin.com/vxpu": "1", "kunlunxin.com/vxpu-memory": "24576"}),
    pod("gcu", {"enflame.com/gcu": "1"}),
    pod("drs", {"enflame.com/drs-gcu": "3"}),
    pod("nv-sgpu", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000", **SGPU}),
    pod("xpu-gcu", {"kunlunxin.com/xpu": "1"}, {"enflame.com/gcu": "1"}),
    pod(
        "vxpu-drs",
        {"kunlunxin.com/vxpu": "1", "kunlunxin.com/vxpu-memory": "49152"},
        {"enflame.com/drs-gcu": "1"},
    ),
]


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return build_cluster(4, seed=5, gpus_per_node=2, zones=1, vendors=parse_vendors(MIX))


@pytest.fixture(scope="module")
def service(
    start_service: Any, cluster: Any, spec: ClusterSpec, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    folder = tmp_path_factory.mktemp("metax-iluvatar-kunlun-enflame")
    return start_with_sections(
        start_service, cluster, spec, folder, SECTIONS, {"HAMI_ENABLE_ILUVATAR": "true"}
    )


def test_metax_iluvatar_kunlun_enflame_are_scheduled_and_allocated(
    service: Any, cluster: Any, spec: ClusterSpec, kubelets: Any, wait_for: Any
) -> None:
    placed = schedule_all(service, cluster, spec, PODS, wait_for)
    names = [node.name for node in spec.nodes]
    nodes = [cluster.node(n) for n in names]
    assert not any(MUTEX in (n["metadata"].get("annotations") or {}) for n in nodes), "no lock left"
    report = summarize(cluster.pods(), nodes)
    assert report["oversubscribed_devices"] == 0 and report["misplaced_devices"] == []
    assert report["pods_bound_by_vendor"] == {
        "BI-V150": 1, "Enflame": 2, "GCU": 2, "Metax-GPU": 1, "Metax-SGPU": 2, "NVIDIA": 1, "XPU": 2,
        "kunlun": 2,
    }  # fmt: skip
    assert kubelets.stats.counters["allocate_failed"] == 0

    cards = cluster.pod_annotations("metax-cards")["hami.io/metax-gpu-devices-allocated"]
    assert cards.count(",Metax-GPU,65536,100") == 2  # V§2.4: whole cards of one pod
    sgpu = cluster.pod_annotations("sgpu")
    assert sgpu["metax-tech.com/gpu-devices-allocated"].startswith("[")  # Metax's own JSON (V§2.5)
    assert sgpu["hami.io/metax-sgpu-devices-allocated"].endswith(",Metax-SGPU,4096,30:;")
    indexes = sorted(int(i) for i in cluster.pod_annotations("xpu")["BAIDU_COM_DEVICE_IDX"].split(","))
    assert len(indexes) == 2 and (indexes[0] // 4 == indexes[1] // 4 or indexes[1] - indexes[0] == 4)
    drs = cluster.pod_annotations("drs")
    assert drs["enflame.com/gcu-assigned"] == "true"  # the DRS plugin's flip (V§2.9)
    assert drs["enflame.com/gcu-request-size"] == "3"
    assert cluster.pod_annotations("bi")["hami.io/BI-V150-devices-allocated"].endswith(",BI-V150,4096,0:;")

    live = assert_rebuild_equals_live(cluster, service, VENDORS, placed)
    tags = {e.name: e.uses for e in live if e.name in ("sgpu", "nv-sgpu")}
    assert [u.tags for u in tags["sgpu"].values()] == [("qos=best-effort",)]  # kept in the ledger


PLUGIN_SA = "system:serviceaccount:kube-system:hami-device-plugin"
FORGERIES = [
    # (id, pod, key, forged value, user, allowed): UPDATEs of the bound pods above, through /webhook
    ("kunlun-index-by-anyone", "xpu", "BAIDU_COM_DEVICE_IDX", "0,1,2,3", "mallory", False),
    ("kunlun-index-by-plugin", "xpu", "BAIDU_COM_DEVICE_IDX", "0,1,2,3", PLUGIN_SA, False),
    ("drs-index-by-anyone", "drs", "enflame.com/gcu-assigned-index", "1", "mallory", False),
    ("drs-flag-by-anyone", "drs", "enflame.com/gcu-assigned", "false", "mallory", False),
    ("drs-flag-by-plugin", "drs", "enflame.com/gcu-assigned", "false", PLUGIN_SA, True),
    ("sgpu-devices-by-anyone", "sgpu", "metax-tech.com/gpu-devices-allocated", "[]", "mallory", False),
]


@pytest.mark.parametrize(
    ("name", "key", "value", "user", "allowed"), [f[1:] for f in FORGERIES], ids=[f[0] for f in FORGERIES]
)
def test_the_keys_plugins_allocate_from_are_protected(
    service: Any, cluster: Any, name: str, key: str, value: str, user: str, allowed: bool
) -> None:
    """Issue 19, finding 1, through the running webhook: the keys Kunlunxin's, Enflame's and Metax's own
    plugins allocate from cannot be rewritten on UPDATE (before, only `hami.io/*` keys were protected);
    the plugin keeps its flag. Runs after the scheduling test above bound these pods."""
    old = cluster.pod(name)
    assert old["spec"].get("nodeName") and key in old["metadata"]["annotations"], "bound by the test above"
    new = {
        **old,
        "metadata": {**old["metadata"], "annotations": {**old["metadata"]["annotations"], key: value}},
    }
    request = {
        "uid": f"update-{name}",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default",
        "operation": "UPDATE",
        "userInfo": {"username": user},
        "object": new,
        "oldObject": old,
    }
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    response = service.post_json("/webhook", body).json()["response"]
    assert response["allowed"] is allowed, response["status"]
    if not allowed:
        assert response["status"]["code"] == 403 and key in response["status"]["message"]
