"""The AdmissionReview envelope of the `/webhook` contract (reference §1.2): request in, response out.

HAMi leaves this part to controller-runtime's `admission.Webhook`; the decision itself is in
`app.core.admission`. Keeping the wire shapes here means the decision works on frozen dataclasses, and the
HTTP layer, the `admit` command and the tests all produce byte-identical responses. The rules are
controller-runtime's: `admission.k8s.io/v1` and `v1beta1` (identical apart from apiVersion) are accepted
and answered in the request's version; every response carries `status` (code 200 when allowed); the JSON
Patch and `patchType` appear only when there are operations. Absent `apiVersion`/`kind`/`uid` are
tolerated as controller-runtime tolerates them (v1, empty uid); present but wrong values are not.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

V1 = "admission.k8s.io/v1"
V1BETA1 = "admission.k8s.io/v1beta1"
API_VERSIONS = (V1, V1BETA1)
KIND = "AdmissionReview"
FORBIDDEN = "Forbidden"


# (group, version, kind) of `request.kind`, or (group, version, resource) of `request.resource`; all three
# empty when the review leaves the field out (hand-made reviews; the API server always sends both).
GroupVersionName = tuple[str, str, str]


class ReviewError(ValueError):
    """The body is not an AdmissionReview we can answer (HTTP layer: allowed=false, status.code 400)."""


@dataclass(frozen=True, slots=True)
class AdmissionInput:
    """What the decision needs from `request` (the object fields are the raw JSON; `admit` decodes them)."""

    uid: str
    operation: str
    pod: object
    old_pod: object = None
    username: str = ""
    namespace: str = ""
    api_version: str = V1
    sub_resource: str = ""  # `request.subResource`: "binding" for pods/binding, "status" for pods/status
    kind: GroupVersionName = ("", "", "")  # `request.kind`: ("", "v1", "Binding") at both binding endpoints
    resource: GroupVersionName = ("", "", "")  # `request.resource`: ("", "v1", "bindings") for the legacy one


@dataclass(frozen=True, slots=True)
class AdmissionOutcome:
    """The webhook's answer. `pod` is the pod as admitted (the original with `patch` applied) on CREATE."""

    allowed: bool
    code: int = 200
    reason: str = ""
    message: str = ""
    patch: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    stripped: tuple[str, ...] = ()
    pod: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.patch and not self.allowed:
            raise ValueError("a denied admission carries no patch")


def allowed(message: str = "") -> AdmissionOutcome:
    """controller-runtime `Allowed(message)`."""
    return AdmissionOutcome(allowed=True, message=message)


def denied(message: str) -> AdmissionOutcome:
    """controller-runtime `Denied(message)`: code 403, reason Forbidden."""
    return AdmissionOutcome(allowed=False, code=403, reason=FORBIDDEN, message=message)


def errored(code: int, message: str) -> AdmissionOutcome:
    """controller-runtime `Errored(code, err)`: no reason, the error text as message."""
    return AdmissionOutcome(allowed=False, code=code, message=message)


def _string(request: Mapping[str, Any], key: str, path: str) -> str:
    value = request.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ReviewError(f"{path}.{key} must be a string, got {type(value).__name__}")
    return value


def _group_version(request: Mapping[str, Any], key: str, name: str) -> GroupVersionName:
    value = request.get(key)
    if value is None:
        return ("", "", "")
    if not isinstance(value, Mapping):
        raise ReviewError(f"request.{key} must be an object")
    parts = (_string(value, "group", f"request.{key}"), _string(value, "version", f"request.{key}"))
    return (*parts, _string(value, name, f"request.{key}"))


def parse_review(body: object) -> AdmissionInput:
    """Read an AdmissionReview request body (parsed JSON); raises ReviewError when it is malformed.

    A missing `operation` means CREATE: HAMi's handler ignores the operation and treats every review as a
    pod creation, and that is also the safe reading for the annotation rule.
    """
    if not isinstance(body, Mapping):
        raise ReviewError("the body must be an AdmissionReview object")
    api_version = body.get("apiVersion") or V1
    if api_version not in API_VERSIONS:
        raise ReviewError(
            f"unsupported AdmissionReview apiVersion {api_version!r}: want {' or '.join(API_VERSIONS)}"
        )
    kind = body.get("kind") or KIND
    if kind != KIND:
        raise ReviewError(f"expected kind {KIND}, got {kind!r}")
    request = body.get("request")
    if request is None:
        raise ReviewError("got an empty AdmissionRequest")
    if not isinstance(request, Mapping):
        raise ReviewError("request must be an object")
    user = request.get("userInfo")
    if user is not None and not isinstance(user, Mapping):
        raise ReviewError("request.userInfo must be an object")
    return AdmissionInput(
        uid=_string(request, "uid", "request"),
        operation=_string(request, "operation", "request") or "CREATE",
        pod=request.get("object"),
        old_pod=request.get("oldObject"),
        username=_string(user or {}, "username", "request.userInfo"),
        namespace=_string(request, "namespace", "request"),
        api_version=api_version,
        sub_resource=_string(request, "subResource", "request"),
        kind=_group_version(request, "kind", "kind"),
        resource=_group_version(request, "resource", "resource"),
    )


def encode_patch(patch: tuple[Mapping[str, Any], ...]) -> str:
    """The `response.patch` field: base64 of the JSON Patch array."""
    raw = json.dumps(list(patch), separators=(",", ":"), ensure_ascii=False).encode()
    return base64.b64encode(raw).decode("ascii")


def review_response(outcome: AdmissionOutcome, uid: str, api_version: str = V1) -> dict[str, Any]:
    """The complete AdmissionReview the webhook answers with (its `response` member is §1.2's object)."""
    if api_version not in API_VERSIONS:
        raise ReviewError(f"unsupported AdmissionReview apiVersion {api_version!r}")
    status: dict[str, Any] = {"code": outcome.code}
    if outcome.reason:
        status["reason"] = outcome.reason
    if outcome.message:
        status["message"] = outcome.message
    response: dict[str, Any] = {"uid": uid, "allowed": outcome.allowed, "status": status}
    if outcome.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = encode_patch(outcome.patch)
    if outcome.warnings:
        response["warnings"] = list(outcome.warnings)
    return {"apiVersion": api_version, "kind": KIND, "response": response}
