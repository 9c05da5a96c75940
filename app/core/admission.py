"""The mutating admission webhook's decision: HAMi's `webhook.Handle` (reference §6.1), pure.

Why it exists: the webhook is where a GPU pod is routed to our scheduler (schedulerName), given its
implicit defaults (exclusive cores, a default GPU count, env) and checked against the namespace's GPU
quota. It is stateless, so any replica answers; the caller supplies the vendors and the quota view.

Sequence on CREATE: decode (400) → no containers (403) → strip scheduler-owned annotations → HAMi's skip
rule → each vendor's `mutate_container` on every init then regular container of a deep copy (500 on
`AdmissionError`) → our request validation (400 on `InvalidRequest`) → privileged (403) → schedulerName,
then nodeName (403) → quota (403) → allowed with the JSON Patch (original → mutated).

Differences from HAMi (docs/webhook.md): the pod annotations only the scheduler and the device plugins may
write — every key a vendor declares by role (`Vendor.pod_keys`), the core's own and anything under
`hami.io/vgpu-` / `hami.io/bind-` (app.core.podkeys) — are removed on CREATE whatever the pod's scheduler
(HAMi #3041: a foreign-scheduler pod could carry a forged allocation the device plugin honours), and on
UPDATE a change to any of them is denied unless the user is trusted; UPDATE mutates nothing else. A bound
pod's allocation keys (its `hami.io/vgpu-node`, every vendor's allocation lists and the keys its device
plugin allocates from, e.g. `AWS_NEURON_IDS`) change, for everyone, trusted users included (issue 11),
only as their declaration allows the device plugin (emptying HAMi's to-allocate list, MIG runtime
identity): its devices were handed to the running containers, so no write, forged or buggy, may make the
capacity look free or name other devices. A device resource value the
filter would refuse (e.g. `nvidia.com/gpumem: 16Gi`) is denied with code 400 instead of admitted as a
non-GPU pod (quirk #5).

An allowed pod routed to our scheduler carries one warning per value HAMi clamps or ignores
(`app.core.notes`: cores above 100, a count of 0 next to memory, ...), said rather than refused.

The HTTP layer calls `parse_review` → `admit` → `review_response` (the envelope lives in app.core.review
and is re-exported here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import orjson

from app.core import notes, podkeys, pods
from app.core.model import QuotaView
from app.core.pods import PodError
from app.core.quota import admission_excess
from app.core.review import (
    AdmissionInput,
    AdmissionOutcome,
    ReviewError,
    allowed,
    denied,
    errored,
    parse_review,
    review_response,
)
from app.core.vendor import AdmissionError, InvalidRequest, Vendor

DEFAULT_SCHEDULER = "default-scheduler"
NO_CONTENT = "there is no content to decode"  # controller-runtime's decoder, for an absent object
SKIPPED = "pod already has different scheduler assigned"
QUOTA_DENIED = "exceeding resource quota"  # HAMi's denial; ours adds the resource and the amounts after it


@dataclass(frozen=True, slots=True)
class AdmissionSettings:
    """HAMi's `--scheduler-name` and `--force-overwrite-default-scheduler`, plus who may write our keys.

    `trusted_users` are `request.userInfo.username` values allowed to change scheduler-owned annotations
    on UPDATE: the scheduler's and the device plugin's service accounts. The defaults are the HAMi chart's
    names in kube-system; the chart passes the release namespace's.
    """

    scheduler_name: str = "hami-scheduler"
    force_overwrite_default_scheduler: bool = True
    trusted_users: tuple[str, ...] = (
        "system:serviceaccount:kube-system:hami-scheduler",
        "system:serviceaccount:kube-system:hami-device-plugin",
    )
    # resource name -> why no enabled vendor serves it: an admitted pod asking for one gets a warning
    disabled_resources: Mapping[str, str] = field(default_factory=dict)


def scheduler_owned(key: str, vendors: Sequence[Vendor]) -> bool:
    """Is this pod annotation written only by the scheduler or a device plugin (a key some vendor or the
    core declares, app.core.podkeys, or one under `hami.io/vgpu-` / `hami.io/bind-`)?"""
    return podkeys.owned(key, podkeys.declared(vendors))


def admit(
    request: AdmissionInput, settings: AdmissionSettings, vendors: Sequence[Vendor], quota: QuotaView
) -> AdmissionOutcome:
    """The webhook's answer to one AdmissionReview request. Never raises for any JSON input."""
    if request.operation == "CREATE":
        return _create(request, settings, vendors, quota)
    if request.operation == "UPDATE":
        return _update(request, settings, vendors)
    return allowed()  # DELETE/CONNECT: nothing to decide (the chart registers neither)


# --- decoding: what the Go decoder would reject, for the fields the decision reads -------------------


def _expect(value: Any, kind: type, path: str, what: str) -> None:
    if value is not None and not isinstance(value, kind):
        raise PodError(f"{path} must be {what}, got {type(value).__name__}")


def _annotations(obj: Mapping[str, Any], path: str) -> dict[str, str]:
    metadata = obj.get("metadata")
    _expect(metadata, dict, f"{path}.metadata", "an object")
    raw = (metadata or {}).get("annotations")
    _expect(raw, dict, f"{path}.metadata.annotations", "an object")
    for key, value in (raw or {}).items():
        _expect(value, str, f"{path}.metadata.annotations[{key}]", "a string")
    return dict(raw or {})


def _decode_pod(obj: object, path: str) -> dict[str, Any]:
    """The object as a Pod; raises PodError with the reason (HAMi: `Errored(400, err)`)."""
    if obj is None:
        raise PodError(NO_CONTENT)
    if not isinstance(obj, dict):
        raise PodError(f"{path} must be a Pod object, got {type(obj).__name__}")
    if obj.get("kind") not in (None, "", "Pod") or obj.get("apiVersion") not in (None, "", "v1"):
        raise PodError(f"{path} must be a v1 Pod, got {obj.get('apiVersion')}/{obj.get('kind')}")
    _annotations(obj, path)
    metadata = obj.get("metadata") or {}
    for key in ("name", "namespace"):
        _expect(metadata.get(key), str, f"{path}.metadata.{key}", "a string")
    spec = obj.get("spec")
    _expect(spec, dict, f"{path}.spec", "an object")
    for key in ("schedulerName", "nodeName", "runtimeClassName"):
        _expect((spec or {}).get(key), str, f"{path}.spec.{key}", "a string")
    for key in ("initContainers", "containers"):
        containers = (spec or {}).get(key)
        _expect(containers, list, f"{path}.spec.{key}", "a list")
        for position, container in enumerate(containers or []):
            _check_container(container, f"{path}.spec.{key}[{position}]")
    return obj


def _check_container(container: object, path: str) -> None:
    if not isinstance(container, dict):
        raise PodError(f"{path} must be an object, got {type(container).__name__}")
    _expect(container.get("name"), str, f"{path}.name", "a string")
    _expect(container.get("env"), list, f"{path}.env", "a list")
    resources = container.get("resources")
    _expect(resources, dict, f"{path}.resources", "an object")
    for section in ("limits", "requests"):
        _expect((resources or {}).get(section), dict, f"{path}.resources.{section}", "an object")
    security = container.get("securityContext")
    _expect(security, dict, f"{path}.securityContext", "an object")
    _expect((security or {}).get("privileged"), bool, f"{path}.securityContext.privileged", "a boolean")


# --- CREATE ----------------------------------------------------------------------------------------


def _pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def _create(
    request: AdmissionInput, settings: AdmissionSettings, vendors: Sequence[Vendor], quota: QuotaView
) -> AdmissionOutcome:
    try:
        original = _decode_pod(request.pod, "request.object")
    except PodError as exc:
        return errored(400, str(exc))
    if not pods.containers(original):
        return denied("pod has no containers")

    # Before the skip rule: a pod naming another scheduler must not keep a forged allocation (HAMi #3041).
    base = _copy(original)
    annotations = (base.get("metadata") or {}).get("annotations") or {}
    keys = podkeys.declared(vendors)
    stripped = tuple(key for key in annotations if podkeys.owned(key, keys))
    for key in stripped:
        del annotations[key]

    pod = _copy(base)
    # The API server sets the object's namespace from the request's before admission; HAMi reads the pod's.
    namespace = request.namespace or pods.metadata(pod).get("namespace") or "default"
    verdict = dataclasses.replace(_decide(pod, settings, vendors, quota, namespace), stripped=stripped)
    if not verdict.allowed:
        return verdict
    removals = [{"op": "remove", "path": _pointer("metadata", "annotations", key)} for key in stripped]
    patch = (*removals, *jsonpatch.make_patch(*_differing(base, pod)).patch)
    warnings = tuple(f"annotation {key} removed: only the GPU scheduler may set it" for key in stripped)
    refused = pods.disabled_request(pod, settings.disabled_resources)
    if refused is not None:  # not ours to place: HAMi admits it silently
        warnings = (*warnings, f"{refused}; this scheduler will not place it")
    if settings.scheduler_name and pods.spec(pod).get("schedulerName") == settings.scheduler_name:
        warnings = (*warnings, *notes.pod_notes(pod, vendors))  # what HAMi clamps or ignores, told
    return dataclasses.replace(verdict, patch=patch, warnings=warnings, pod=pod)


def _copy(pod: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of JSON data (what orjson parsed), about ten times cheaper than `copy.deepcopy`."""
    copied: dict[str, Any] = orjson.loads(orjson.dumps(pod))
    return copied


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON, types included (1, 1.0 and true differ, as jsonpatch compares leaves)."""
    try:
        return orjson.dumps(a) == orjson.dumps(b)
    except orjson.JSONEncodeError:
        return False


def _differing(old: dict[str, Any], new: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`old` and `new` without the members equal in both, nested objects trimmed the same way: jsonpatch
    makes the same operations at the same paths from them (an equal member makes none), without walking
    what the mutation left alone (managedFields, status, unchanged containers): `make_patch` of a whole
    pod was most of the webhook's CPU."""
    trimmed_old: dict[str, Any] = {}
    trimmed_new: dict[str, Any] = {}
    for key, value in old.items():
        if key not in new:
            trimmed_old[key] = value
            continue
        other = new[key]
        if isinstance(value, dict) and isinstance(other, dict):
            inner_old, inner_new = _differing(value, other)
            if inner_old or inner_new:
                trimmed_old[key], trimmed_new[key] = inner_old, inner_new
        elif not _same(value, other):
            trimmed_old[key], trimmed_new[key] = value, other
    for key, value in new.items():
        if key not in old:
            trimmed_new[key] = value
    return trimmed_old, trimmed_new


def _skip(scheduler: str, settings: AdmissionSettings) -> bool:
    """HAMi's three conditions for leaving a pod to the scheduler it names."""
    return (
        scheduler != ""
        and (scheduler != DEFAULT_SCHEDULER or not settings.force_overwrite_default_scheduler)
        and (not settings.scheduler_name or scheduler != settings.scheduler_name)
    )


def _containers(pod: dict[str, Any], key: str) -> list[dict[str, Any]]:
    containers: list[dict[str, Any]] = pod["spec"].get(key) or []
    return containers


def _first_privileged(pod: dict[str, Any]) -> str | None:
    for container in (*_containers(pod, "initContainers"), *_containers(pod, "containers")):
        if (container.get("securityContext") or {}).get("privileged") is True:
            return pods.container_name(container)
    return None


def _decide(
    pod: dict[str, Any],
    settings: AdmissionSettings,
    vendors: Sequence[Vendor],
    quota: QuotaView,
    namespace: str,
) -> AdmissionOutcome:
    """Steps 3-7 of §6.1 on `pod` (a decoded deep copy with containers), mutating it in place."""
    spec = pod["spec"]
    if _skip(spec.get("schedulerName") or "", settings):
        return allowed(SKIPPED)

    has_resource = False
    try:
        for container in (*_containers(pod, "initContainers"), *_containers(pod, "containers")):
            for vendor in vendors:
                has_resource = vendor.mutate_container(container, pod) or has_resource
    except AdmissionError as exc:
        return errored(500, str(exc))

    try:
        requests = pods.pod_requests(pod, vendors)
    except InvalidRequest as exc:
        return errored(400, str(exc))

    privileged = _first_privileged(pod)
    if privileged is not None and has_resource:
        return denied(f"container {privileged} is privileged")

    if has_resource and settings.scheduler_name:
        spec["schedulerName"] = settings.scheduler_name
        if spec.get("nodeName"):
            return denied("pod has node assigned")

    exceeded = admission_excess(requests, vendors, quota, namespace)
    if exceeded is not None:  # HAMi's text first, so whatever matches it still matches
        return denied(f"{QUOTA_DENIED}: {exceeded}")
    return allowed()


# --- UPDATE ----------------------------------------------------------------------------------------


def _update(
    request: AdmissionInput, settings: AdmissionSettings, vendors: Sequence[Vendor]
) -> AdmissionOutcome:
    """Only the annotation rule (app.core.podkeys): HAMi's webhook is CREATE-only, so nothing else is
    checked or mutated. Untrusted users change no declared key; on a bound pod nobody changes an allocation
    key beyond what its declaration allows (the device plugin's own writes)."""
    try:
        new = _annotations(_object(request.pod, "request.object"), "request.object")
        old = _annotations(_object(request.old_pod, "request.oldObject"), "request.oldObject")
    except PodError as exc:
        return errored(400, str(exc))
    keys = podkeys.declared(vendors)
    who = request.username or "(unknown user)"
    changed = podkeys.changed(old, new, keys)
    if changed and request.username not in settings.trusted_users:
        return denied(f"{who} may not change scheduler-owned annotations: {', '.join(changed)}")
    spec = request.old_pod.get("spec") if isinstance(request.old_pod, dict) else None
    if isinstance(spec, dict) and spec.get("nodeName"):
        moved = podkeys.reallocated(old, new, keys)
        if moved:
            return denied(
                f"the allocation of a bound pod is immutable: {who} may not change {', '.join(moved)}"
            )
    return allowed()


def _object(obj: object, path: str) -> dict[str, Any]:
    if obj is None:
        raise PodError(f"{path}: {NO_CONTENT}")
    if not isinstance(obj, dict):
        raise PodError(f"{path} must be a Pod object, got {type(obj).__name__}")
    return obj


__all__ = [
    "AdmissionInput",
    "AdmissionOutcome",
    "AdmissionSettings",
    "ReviewError",
    "admit",
    "parse_review",
    "review_response",
    "scheduler_owned",
]
