"""Routing an AdmissionReview by what was sent (`request.kind`), checked against where (issue 28, finding 1):
a v1 Binding is decided by the binding rule at both binding endpoints, anything we do not recognise is
refused, never decided as a pod."""

from __future__ import annotations

import pytest

from app.core import admissionroute
from app.core.review import AdmissionInput, GroupVersionName, parse_review

POD, BINDING = ("", "v1", "Pod"), ("", "v1", "Binding")
PODS, BINDINGS = ("", "v1", "pods"), ("", "v1", "bindings")
ABSENT = ("", "", "")


def request(kind: GroupVersionName, resource: GroupVersionName, sub_resource: str = "") -> AdmissionInput:
    return AdmissionInput("u", "CREATE", {}, kind=kind, resource=resource, sub_resource=sub_resource)


@pytest.mark.parametrize(
    ("kind", "resource", "sub", "binding"),
    [
        pytest.param(BINDING, PODS, "binding", True, id="pods-binding"),
        pytest.param(BINDING, BINDINGS, "", True, id="legacy-bindings"),
        pytest.param(BINDING, ABSENT, "", True, id="binding-without-resource"),
        pytest.param(POD, PODS, "", False, id="pod"),
        pytest.param(POD, PODS, "status", False, id="pod-status"),
        pytest.param(ABSENT, ABSENT, "", False, id="hand-made-pod"),
        pytest.param(ABSENT, ABSENT, "binding", True, id="hand-made-pods-binding"),
        pytest.param(ABSENT, BINDINGS, "", True, id="hand-made-legacy-binding"),
    ],
)
def test_recognised_shapes_are_routed_by_kind(
    kind: GroupVersionName, resource: GroupVersionName, sub: str, binding: bool
) -> None:
    routed = request(kind, resource, sub)
    assert admissionroute.unrecognised(routed) == ""
    assert admissionroute.is_binding(routed) is binding


@pytest.mark.parametrize(
    ("kind", "resource", "sub", "named"),
    [
        pytest.param(POD, BINDINGS, "", "kind v1/Pod for v1/bindings", id="pod-at-legacy-bindings"),
        pytest.param(POD, PODS, "binding", "kind v1/Pod for v1/pods/binding", id="pod-at-pods-binding"),
        pytest.param(BINDING, PODS, "", "kind v1/Binding for v1/pods", id="binding-at-pods"),
        pytest.param(BINDING, PODS, "status", "kind v1/Binding for v1/pods/status", id="binding-at-status"),
        pytest.param(("", "v1", "Eviction"), PODS, "eviction", "kind v1/Eviction", id="eviction"),
        pytest.param(
            ("", "v1", "Pod"), PODS, "ephemeralcontainers", "v1/pods/ephemeralcontainers", id="ephemeral"
        ),
        pytest.param(("", "v1", "Pod"), PODS, "resize", "v1/pods/resize", id="resize"),
        pytest.param(("", "v2", "Binding"), BINDINGS, "", "kind v2/Binding", id="other-version"),
        pytest.param(("apps", "v1", "Binding"), BINDINGS, "", "kind apps/v1/Binding", id="other-group"),
        pytest.param(("", "v1", "Node"), ("", "v1", "nodes"), "", "kind v1/Node for v1/nodes", id="a-node"),
    ],
)
def test_other_shapes_are_refused_saying_what_was_sent(
    kind: GroupVersionName, resource: GroupVersionName, sub: str, named: str
) -> None:
    message = admissionroute.unrecognised(request(kind, resource, sub))
    assert message.startswith("unrecognised admission request: ")
    assert named in message
    assert message.endswith(f"(this webhook decides {admissionroute.DECIDED})")


def test_the_review_carries_kind_and_resource() -> None:
    body = {
        "request": {
            "uid": "u",
            "kind": {"group": "", "version": "v1", "kind": "Binding"},
            "resource": {"group": "", "version": "v1", "resource": "bindings"},
            "operation": "CREATE",
            "object": {"kind": "Binding"},
        }
    }
    parsed = parse_review(body)
    assert (parsed.kind, parsed.resource, parsed.sub_resource) == (BINDING, BINDINGS, "")
    del body["request"]["kind"], body["request"]["resource"]
    assert parse_review(body).kind == parse_review(body).resource == ABSENT
