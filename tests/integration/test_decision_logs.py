"""One structured log line per decision (app/decisions.py), from a real Gunicorn service and worker.

Traffic: a pod placed by /filter and bound by /bind, a pod that fits nowhere, a bind of a pod /filter
never placed, and two admission reviews. Each request must leave exactly one `hami.decisions` line in the
service's JSON log with the pod's identity, the outcome and its reason, the node, the devices and score
of a placement, and the phase times. HAMI_DECISION_LOG=OFF leaves none.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

pytestmark = pytest.mark.integration

NODE = "gpu-d"


def decisions(service: Any) -> list[dict[str, Any]]:
    lines = []
    for line in service.process.log().splitlines():
        if line.startswith("{"):
            entry = orjson.loads(line)
            if entry.get("logger") == "hami.decisions":
                lines.append(entry)
    return lines


def traffic(service: Any, cluster: Any, tag: str) -> dict[str, dict[str, Any]]:
    placed = cluster.create_pod(cluster.gpu_pod(f"{tag}-fits", memory=2000, cores=30))
    assert service.filter(placed, [NODE])["NodeNames"] == [NODE]
    assert service.bind(cluster.pod(placed["metadata"]["name"]), NODE) == {"Error": ""}
    cluster.allocate(NODE)
    huge = cluster.create_pod(cluster.gpu_pod(f"{tag}-huge", memory=40000))
    assert service.filter(huge, [NODE])["FailedNodes"] == {NODE: "2/2 CardInsufficientMemory"}
    assert "filtered onto node <none>" in service.bind(huge, NODE)["Error"]
    for name in (f"{tag}-w-gpu", f"{tag}-w-node"):
        pod = cluster.gpu_pod(name, gpus=0)
        pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        if name.endswith("node"):
            pod["spec"]["nodeName"] = NODE  # denied: pod has node assigned
        request = {"uid": f"{name}-r", "operation": "CREATE", "namespace": "default", "object": pod}
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        assert service.post_json("/webhook", review).status == 200
    return {"placed": placed, "huge": huge}


def test_one_line_per_decision(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> None:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=2))
    service = start_service(workers=2, env={"HAMI_LOG_LEVEL": "INFO"})
    wait_for(lambda: service.debug_state(NODE)["registered"], 15, f"{NODE} registered")
    pods = traffic(service, cluster, "d")
    lines = wait_for(lambda: (found := decisions(service)) and len(found) >= 6 and found, 10, "6 lines")
    assert len(lines) == 6, lines
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_kind.setdefault(line["decision"], []).append(line)
    assert sorted((k, len(v)) for k, v in by_kind.items()) == [("admission", 2), ("bind", 2), ("filter", 2)]
    assert all(line["level"] == "info" for line in lines)

    placed_meta, huge_meta = pods["placed"]["metadata"], pods["huge"]["metadata"]
    placed, unplaced = sorted(by_kind["filter"], key=lambda line: line["result"])
    assert placed["result"] == "placed" and placed["pod_uid"] == placed_meta["uid"]
    assert (placed["namespace"], placed["pod"], placed["node"]) == ("default", "d-fits", NODE)
    assert placed["candidates"] == 1 and isinstance(placed["score"], float)
    (device,) = placed["devices"]
    assert device["vendor"] == "NVIDIA" and device["uuid"].startswith(f"GPU-{NODE}-")
    assert (device["container"], device["memory_mib"], device["cores"]) == (0, 2000, 30)
    assert {"decode", "fit", "assume", "patch"} <= set(placed["phases_ms"])
    assert placed["duration_ms"] >= sum(placed["phases_ms"].values()) * 0.99

    assert unplaced["result"] == "unschedulable" and unplaced["pod_uid"] == huge_meta["uid"]
    assert unplaced["reason"] == "CardInsufficientMemory"
    assert unplaced["reasons"] == {"2/2 CardInsufficientMemory": 1}
    assert "node" not in unplaced and "devices" not in unplaced

    bound, refused = sorted(by_kind["bind"], key=lambda line: line["result"])
    assert (bound["result"], bound["reason"], bound["node"]) == ("bound", "ok", NODE)
    assert bound["pod_uid"] == placed_meta["uid"] and {"lock", "patch", "binding"} <= set(bound["phases_ms"])
    assert (refused["result"], refused["reason"]) == ("error", "not-filtered-here")
    assert "filtered onto node <none>" in refused["error"]

    allowed, denied = sorted(by_kind["admission"], key=lambda line: line["result"])
    assert allowed["result"] == "allowed" and allowed["pod"] == "d-w-gpu" and allowed["patch_operations"] > 0
    assert allowed["request_uid"] == "d-w-gpu-r" and allowed["operation"] == "CREATE"
    assert "pod_uid" not in allowed  # not named by the API server yet
    assert denied["result"] == "denied" and denied["pod"] == "d-w-node"
    assert "node assigned" in denied["status_message"]


def test_decision_log_off(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> None:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=2))
    service = start_service(workers=1, env={"HAMI_LOG_LEVEL": "INFO", "HAMI_DECISION_LOG": "OFF"})
    wait_for(lambda: service.debug_state(NODE)["registered"], 15, f"{NODE} registered")
    traffic(service, cluster, "o")
    service.close()  # flushes and stops: every line that was going to be written is in the log now
    assert "Booting worker" in service.process.log()  # INFO lines are written, just not decisions
    assert decisions(service) == []
