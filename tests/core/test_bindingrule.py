"""The webhook's `pods/binding` rule (issue 19): a Binding's annotations land on the pod, so one carrying a
scheduler-owned key is denied unless the user is trusted; nothing else about a Binding is judged."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.admission import AdmissionSettings
from app.core.bindingrule import review_binding
from app.core.review import AdmissionInput, parse_review
from app.devices import build_vendors

VENDORS = build_vendors(None)  # NVIDIA and Enflame
SCHEDULER_SA = "system:serviceaccount:kube-system:hami-scheduler"
PLUGIN_SA = "system:serviceaccount:kube-system:hami-device-plugin"
KUBE_SCHEDULER = "system:kube-scheduler"
USER = "alice"
DENIED = "alice may not set scheduler-owned annotations through a binding"


ZONE = {"topology.kubernetes.io/zone": "a", "topology.kubernetes.io/region": "r"}


def binding(
    annotations: dict[str, Any] | None = None, labels: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": "team", "uid": "u-1"}
    if annotations is not None:
        metadata["annotations"] = annotations
    if labels is not None:
        metadata["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"kind": "Node", "name": "n1"},
        **extra,
    }


@pytest.mark.parametrize(
    ("user", "obj", "allowed", "message"),
    [
        pytest.param(KUBE_SCHEDULER, binding(), True, "", id="kube-scheduler-plain"),
        pytest.param(USER, binding(), True, "", id="no-annotations"),
        pytest.param(USER, binding({}), True, "", id="empty-annotations"),
        pytest.param(
            USER, binding({"team": "ml", "hami.io/gpu-scheduler-policy": "spread"}), True, "", id="user-keys"
        ),
        pytest.param(
            USER,
            binding({"hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,80000,100:;", "team": "ml"}),
            False,
            f"{DENIED}: hami.io/vgpu-devices-allocated",
            id="forged-allocation",
        ),
        pytest.param(
            USER,
            binding({"hami.io/vgpu-node": "n1", "hami.io/bind-phase": "success"}),
            False,
            f"{DENIED}: hami.io/bind-phase, hami.io/vgpu-node",
            id="node-and-phase",
        ),
        pytest.param(
            USER,
            binding({"hami.io/enflame-vgpu-devices-allocated": "x"}),
            False,
            f"{DENIED}: hami.io/enflame-vgpu-devices-allocated",
            id="vendor-allocation-key",
        ),
        pytest.param(
            "",
            binding({"hami.io/vgpu-time": "1"}),
            False,
            "(unknown user) may not set scheduler-owned annotations through a binding: hami.io/vgpu-time",
            id="no-user",
        ),
        pytest.param(
            KUBE_SCHEDULER,
            binding({"hami.io/vgpu-node": "n1"}),
            False,
            "system:kube-scheduler may not",
            id="kube-scheduler-is-not-trusted",
        ),
        pytest.param(USER, binding(labels=ZONE), True, "", id="topology-labels"),
        pytest.param(
            USER,
            binding(labels={**ZONE, "hami.io/webhook": "ignore"}),
            False,
            "alice may not set scheduler-owned keys through a binding: label hami.io/webhook",
            id="opt-out-label",
        ),
        pytest.param(
            USER,
            binding({"hami.io/vgpu-node": "n1"}, {"hami.io/webhook": "x"}),
            False,
            "keys through a binding: hami.io/vgpu-node, label hami.io/webhook",
            id="owned-annotation-and-opt-out-label",
        ),
        pytest.param(
            SCHEDULER_SA, binding(labels={"hami.io/webhook": "ignore"}), True, "", id="trusted-label"
        ),
        pytest.param(SCHEDULER_SA, binding({"hami.io/vgpu-node": "n1"}), True, "", id="our-service-account"),
        pytest.param(PLUGIN_SA, binding({"hami.io/bind-phase": "allocating"}), True, "", id="device-plugin"),
    ],
)
def test_scheduler_owned_keys_need_a_trusted_user(
    user: str, obj: dict[str, Any], allowed: bool, message: str
) -> None:
    outcome = review_binding(
        AdmissionInput("r", "CREATE", obj, username=user, sub_resource="binding"),
        AdmissionSettings(),
        VENDORS,
    )
    assert outcome.allowed is allowed
    assert outcome.patch == ()
    assert outcome.code == (200 if allowed else 403)
    assert message in outcome.message


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(None, "request.object must be a Binding object, got NoneType", id="absent"),
        pytest.param([], "request.object must be a Binding object, got list", id="list"),
        pytest.param({"apiVersion": "v1", "kind": "Pod"}, "must be a v1 Binding, got v1/Pod", id="a-pod"),
        pytest.param({"metadata": "x"}, "request.object.metadata must be an object, got str", id="metadata"),
        pytest.param(
            {"metadata": {"annotations": ["a"]}}, "annotations must be an object, got list", id="annotations"
        ),
        pytest.param({"metadata": {"labels": "a"}}, "labels must be an object, got str", id="labels"),
    ],
)
def test_an_object_that_is_not_a_binding_is_a_400(obj: object, message: str) -> None:
    outcome = review_binding(
        AdmissionInput("r", "CREATE", obj, username=USER, sub_resource="binding"),
        AdmissionSettings(),
        VENDORS,
    )
    assert (outcome.allowed, outcome.code) == (False, 400)
    assert message in outcome.message


def test_the_review_carries_the_sub_resource() -> None:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "r",
            "operation": "CREATE",
            "subResource": "binding",
            "object": binding(),
            "userInfo": {"username": USER},
        },
    }
    assert parse_review(body).sub_resource == "binding"
    del body["request"]["subResource"]
    assert parse_review(body).sub_resource == ""
