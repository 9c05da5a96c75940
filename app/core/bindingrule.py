"""The webhook's rule for Bindings: a Binding may not write scheduler-owned keys (issues 19 and 28).

Why it exists: Kubernetes' pod storage copies a Binding's `metadata.annotations` onto the pod as it binds
it (`BindingREST.Create` -> `assignPod` -> `setPodHostAndAnnotations`: `for k, v := range annotations {
pod.Annotations[k] = v }`, since the first releases). Whoever may create `pods/binding` could therefore
bind an unbound pod with a forged `hami.io/vgpu-devices-allocated` (or `hami.io/vgpu-node`, a vendor's
allocation key), which the device plugin honours, without the pod UPDATE the annotation rule guards. The
legacy endpoint `namespaces/{ns}/bindings` does the same (`LegacyBindingREST.Create` -> the same
`assignPod`), so the rule decides every v1 Binding whichever endpoint it came to (app/core/admissionroute.py).
Since PodTopologyLabels the storage copies the Binding's labels too: a Binding may not set a label the
chart's opt-out reads (`podkeys.OPT_OUT_LABELS`); every other label (the zone and region that plugin adds
to every `pods/binding`) passes.

The rule is the UPDATE rule's (app/core/admission.py): only trusted users may set scheduler-owned keys
(`scheduler_owned`). A Binding can only add or overwrite keys, of a pod that is not bound yet (the API
server refuses to bind a bound pod), and the webhook is not shown the pod, so every scheduler-owned key it
carries counts as a change; the bound-pod immutability rule has nothing to guard here. Nothing is
mutated: the answer is allowed without a patch, denied (403), or 400 for an object that is not a v1
Binding. kube-scheduler's binder and our /bind send Bindings without annotations, so they always pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.admission import AdmissionSettings, scheduler_owned
from app.core.podkeys import OPT_OUT_LABELS
from app.core.review import AdmissionInput, AdmissionOutcome, allowed, denied, errored
from app.core.vendor import Vendor


class _Malformed(ValueError):
    pass


def _binding_metadata(obj: object) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The Binding's (annotations, labels); raises _Malformed for an object that is not a v1 Binding."""
    if not isinstance(obj, Mapping):
        raise _Malformed(f"request.object must be a Binding object, got {type(obj).__name__}")
    if obj.get("kind") not in (None, "", "Binding") or obj.get("apiVersion") not in (None, "", "v1"):
        raise _Malformed(
            f"request.object must be a v1 Binding, got {obj.get('apiVersion')}/{obj.get('kind')}"
        )
    metadata = obj.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise _Malformed(f"request.object.metadata must be an object, got {type(metadata).__name__}")
    found = []
    for field in ("annotations", "labels"):
        value = (metadata or {}).get(field)
        if value is not None and not isinstance(value, Mapping):
            raise _Malformed(f"request.object.metadata.{field} must be an object, got {type(value).__name__}")
        found.append(value or {})
    return found[0], found[1]


def review_binding(
    request: AdmissionInput, settings: AdmissionSettings, vendors: Sequence[Vendor]
) -> AdmissionOutcome:
    """The webhook's answer to a CREATE of a Binding (either endpoint). Never raises for any JSON input."""
    try:
        annotations, labels = _binding_metadata(request.pod)
    except _Malformed as exc:
        return errored(400, str(exc))
    owned = sorted(key for key in annotations if isinstance(key, str) and scheduler_owned(key, vendors))
    opt_out = [f"label {key}" for key in sorted(set(OPT_OUT_LABELS) & set(labels))]
    if (owned or opt_out) and request.username not in settings.trusted_users:
        user = request.username or "(unknown user)"
        what = "keys" if opt_out else "annotations"
        keys = ", ".join((*owned, *opt_out))
        return denied(f"{user} may not set scheduler-owned {what} through a binding: {keys}")
    return allowed()
