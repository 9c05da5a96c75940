"""Which rule decides an AdmissionReview: routed by what was sent (`request.kind`), checked against where.

Why it exists (issue 28, finding 1): kube-apiserver binds a pod through two endpoints, `POST
.../pods/{name}/binding` (resource `pods`, subresource `binding`) and the legacy `POST
/api/v1/namespaces/{ns}/bindings` (resource `bindings`, no subresource). Both reach the same storage code,
which copies the Binding's annotations (and, with PodTopologyLabels, its labels) onto the pod. Routing a
Binding by `subResource == "binding"` missed the legacy endpoint, so the rule that keeps forged allocations
out of Bindings (app/core/bindingrule.py) must see every v1 Binding, whichever endpoint it came to.

The rule: a `v1 Binding` is decided by the binding rule at either binding endpoint; a `v1 Pod` by the pod
rule (app/core/admission.py) at `pods` and `pods/status`; every other pairing — a request for `bindings`
whose kind is not Binding, a Binding at `pods/status`, an Eviction, a kind of another group or version — is
a shape this webhook does not recognise and is refused (400) saying so, never decided as if it were a pod.
A review without `request.kind` (hand-made; the API server always sends it) is read by its endpoint.
"""

from __future__ import annotations

from app.core.review import AdmissionInput, GroupVersionName

ABSENT: GroupVersionName = ("", "", "")
POD: GroupVersionName = ("", "v1", "Pod")
BINDING: GroupVersionName = ("", "v1", "Binding")
PODS: GroupVersionName = ("", "v1", "pods")
BINDINGS: GroupVersionName = ("", "v1", "bindings")  # the legacy endpoint, namespaces/{ns}/bindings

# kind -> the (resource, subresource) endpoints it is decided at; ABSENT: a review that names no resource
ENDPOINTS: dict[GroupVersionName, frozenset[tuple[GroupVersionName, str]]] = {
    POD: frozenset({(PODS, ""), (PODS, "status"), (ABSENT, "")}),
    BINDING: frozenset({(PODS, "binding"), (BINDINGS, ""), (ABSENT, "binding"), (ABSENT, "")}),
}
DECIDED = "v1 Pods at pods and pods/status, v1 Bindings at pods/binding and bindings"


def kind_of(request: AdmissionInput) -> GroupVersionName:
    """`request.kind`, or for a review without one the kind its endpoint takes."""
    if request.kind != ABSENT:
        return request.kind
    if request.resource[2] == BINDINGS[2] or request.sub_resource == "binding":
        return BINDING
    return POD


def is_binding(request: AdmissionInput) -> bool:
    return kind_of(request) == BINDING


def _named(value: GroupVersionName, sub_resource: str = "") -> str:
    group, version, name = value
    text = "/".join(part for part in (group, version, name) if part) or "(none)"
    return f"{text}/{sub_resource}" if sub_resource else text


def unrecognised(request: AdmissionInput) -> str:
    """Why this webhook cannot decide the request ("" when it can: a kind at one of its endpoints)."""
    kind = kind_of(request)
    endpoints = ENDPOINTS.get(kind)
    if endpoints is not None and (request.resource, request.sub_resource) in endpoints:
        return ""
    endpoint = _named(request.resource, request.sub_resource)
    return (
        f"unrecognised admission request: kind {_named(kind)} for {endpoint} (this webhook decides {DECIDED})"
    )
