"""POST /webhook with the reviews kube-apiserver sends for a Binding at either endpoint (issue 28, finding 1).

The review of the legacy `POST namespaces/{ns}/bindings` names resource `bindings` and no subresource; before
the fix the webhook routed Bindings by `subResource == "binding"` only, so such a review was decided as a
pod CREATE (a 400 for the wrong object kind, whatever the Binding carried). Now both endpoints' reviews
reach the binding rule, and a shape we do not recognise is refused saying what was sent.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from flask.testing import FlaskClient

FORGED = {"hami.io/vgpu-devices-allocated": "GPU-forged,NVIDIA,80000,100:;"}
BINDING_KIND = {"group": "", "version": "v1", "kind": "Binding"}
PODS = {"group": "", "version": "v1", "resource": "pods"}
BINDINGS = {"group": "", "version": "v1", "resource": "bindings"}


def review(resource: dict[str, str], sub: str, annotations: dict[str, str], kind: Any = None) -> bytes:
    obj = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "team", "annotations": annotations},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    request = {
        "uid": "u-1",
        "kind": kind or BINDING_KIND,
        "resource": resource,
        "operation": "CREATE",
        "namespace": "team",
        "name": "p",
        "userInfo": {"username": "alice"},
        "object": obj,
    }
    if sub:
        request["subResource"] = sub
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def answer(client: FlaskClient, body: bytes) -> dict[str, Any]:
    reply = client.post("/webhook", data=body, content_type="application/json")
    assert reply.status_code == 200
    response: dict[str, Any] = orjson.loads(reply.data)["response"]
    assert response["uid"] == "u-1" and "patch" not in response
    return response


@pytest.mark.parametrize(
    ("resource", "sub"), [(PODS, "binding"), (BINDINGS, "")], ids=["pods-binding", "legacy-bindings"]
)
def test_a_forged_binding_is_denied_at_either_endpoint(
    client: FlaskClient, resource: dict[str, str], sub: str
) -> None:
    response = answer(client, review(resource, sub, FORGED))
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert response["status"]["message"] == (
        "alice may not set scheduler-owned annotations through a binding: hami.io/vgpu-devices-allocated"
    )
    assert answer(client, review(resource, sub, {"example.com/note": "x"}))["allowed"] is True


def test_a_request_for_bindings_that_is_not_a_binding_is_refused(client: FlaskClient) -> None:
    pod_kind = {"group": "", "version": "v1", "kind": "Pod"}
    response = answer(client, review(BINDINGS, "", {}, kind=pod_kind))
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert response["status"]["message"].startswith(
        "unrecognised admission request: kind v1/Pod for v1/bindings"
    )
