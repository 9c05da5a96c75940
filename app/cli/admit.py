"""`admit`: what would the webhook answer for this pod — HAMi's mutation and checks without a cluster.

Prints the AdmissionReview v1 `response` object the webhook returns for a CREATE of the pod (uid from the
pod's metadata.uid, else a fixed placeholder), decided by the same pure core as the service. With
`--cluster` (`kubectl get pods,resourcequotas -A -o json`), ResourceQuotas give the GPU memory/core limits
and pods holding an allocation give the amount used, as for `explain`. The pod is taken as given: the
API server's defaulting (e.g. `schedulerName: default-scheduler`) is not applied, so an absent
schedulerName is added by the patch rather than replaced. Text output (the default) shows the decision, the
message, warnings and a table of the changes the patch makes, field by field and container by container;
`-o wide` adds each change's JSON-patch operation, `-o json` prints the response object.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from app.cli import tables
from app.cli.common import CliError, dump_json, load_cluster, load_disabled, load_document, load_vendors
from app.core import quota, reservations
from app.core.admission import AdmissionInput, AdmissionOutcome, AdmissionSettings, admit, review_response
from app.core.codec import CodecError
from app.core.pods import PodError
from app.core.vendor import Vendor

PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


EXAMPLE = """examples:
  hami-scheduler admit --pod pod.yaml
  kubectl get pods,resourcequotas -A -o json > cluster.json
  hami-scheduler admit --pod pod.yaml --cluster cluster.json -o wide   # with the namespace's quota usage
  hami-scheduler admit --pod pod.yaml -o json                          # the AdmissionReview response"""
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def scheduler_name(value: str) -> str:
    """argparse type: a scheduler profile name (a DNS subdomain, as kube-scheduler requires)."""
    if len(value) > 253 or not _NAME.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a valid scheduler name (a DNS subdomain)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pod", required=True, help="the pod being created (JSON or YAML)")
    parser.add_argument("--cluster", help="kubectl get pods,resourcequotas -A -o json (for quota usage)")
    parser.add_argument(
        "--scheduler-name",
        type=scheduler_name,
        default="hami-scheduler",
        help="name injected into spec.schedulerName",
    )
    parser.add_argument("--device-config", help="HAMi device-config.yaml (default: the chart's defaults)")
    parser.add_argument(
        "--output", "-o", choices=("text", "wide", "json"), default="text", help="output format"
    )


def _load_pod(path: str) -> dict[str, Any]:
    """A Pod object; unlike `load_pod`, one without containers is the webhook's to deny, not an error."""
    pod = load_document(path)
    if not isinstance(pod, dict):
        raise CliError(f"{path}: expected a Pod object")
    kind = pod.get("kind", "Pod")
    if kind != "Pod":
        raise CliError(f"{path}: expected kind Pod, got {kind!r}")
    return pod


def _held(
    cluster_pods: Sequence[Mapping[str, Any]], vendors: Sequence[Vendor], skip_uid: str
) -> list[reservations.Reservation]:
    """Reservations of the cluster's scheduled pods (the admitted pod itself excluded), as `explain`."""
    held = []
    for pod in cluster_pods:
        try:
            reservation = reservations.reservation_from_pod(pod, vendors)
        except (CodecError, PodError):
            continue  # a pod whose allocation does not decode holds nothing, as in HAMi
        if reservation is not None and (not skip_uid or reservation.uid != skip_uid):
            held.append(reservation)
    return held


def _metadata(pod: Mapping[str, Any], key: str) -> str:
    metadata = pod.get("metadata")
    value = metadata.get(key) if isinstance(metadata, Mapping) else None
    return value if isinstance(value, str) else ""


def evaluate(args: argparse.Namespace) -> tuple[AdmissionOutcome, dict[str, Any]]:
    """The decision and the AdmissionReview `response` object."""
    vendors = load_vendors(args.device_config)
    pod = _load_pod(args.pod)
    cluster = load_cluster(args.cluster)
    uid, namespace = _metadata(pod, "uid"), _metadata(pod, "namespace")
    limits = quota.quota_limits(cluster.quotas, vendors)
    used = reservations.quota_used(_held(cluster.pods, vendors, uid))
    request = AdmissionInput(
        uid=uid or PLACEHOLDER_UID, operation="CREATE", pod=pod, namespace=namespace or "default"
    )
    disabled = load_disabled(args.device_config)
    settings = AdmissionSettings(scheduler_name=args.scheduler_name, disabled_resources=disabled)
    outcome = admit(request, settings, vendors, quota.build_view(limits, used))
    return outcome, review_response(outcome, request.uid)["response"]


def _pointer(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def where(path: str, pod: Mapping[str, Any]) -> tuple[str, str]:
    """A JSON-patch path as (whose, which field): `/spec/containers/0/env` -> (`c0`, `env`), init containers
    and keys with dots or slashes spelt out (`resources.limits[nvidia.com/gpucores]`)."""
    parts = _pointer(path)
    whose = "pod"
    if len(parts) >= 3 and parts[0] == "spec" and parts[1] in ("containers", "initContainers"):
        spec = pod.get("spec")
        listed = spec.get(parts[1]) if isinstance(spec, Mapping) else None
        index = int(parts[2]) if parts[2].isdigit() else -1
        container = listed[index] if isinstance(listed, list) and 0 <= index < len(listed) else None
        name = container.get("name") if isinstance(container, Mapping) else None
        whose = str(name) if name else f"{parts[1]}[{parts[2]}]"
        parts = parts[3:]
    field = ""
    for part in parts:
        if part.isdigit() or part == "-" or "." in part or "/" in part:
            field += f"[{part}]"
        else:
            field += f".{part}" if field else part
    return whose, field or "(whole object)"


def _change(op: Mapping[str, Any]) -> str:
    if op["op"] == "remove":
        return "remove"
    if "from" in op:
        return f"{op['op']} from {op['from']}"
    return f"{op['op']}: {json.dumps(op.get('value'), ensure_ascii=False)}"


def _text(outcome: AdmissionOutcome, pod: Mapping[str, Any], wide: bool) -> str:
    if outcome.allowed:
        lines = ["allowed"]
    else:
        detail = " ".join(str(p) for p in (outcome.code, outcome.reason) if p)
        lines = [f"denied ({detail})"]
    if outcome.message:
        lines.append(f"message: {outcome.message}")
    lines.extend(f"warning: {warning}" for warning in outcome.warnings)
    if not outcome.patch:
        if outcome.allowed:
            lines.append("no changes")
        return "\n".join(lines)
    headers = ["WHERE", "FIELD", "CHANGE"] + (["JSON PATCH"] if wide else [])
    rows = []
    for op in outcome.patch:
        row = [*where(str(op["path"]), pod), _change(op)]
        if wide:
            row.append(json.dumps(dict(op), ensure_ascii=False))
        rows.append(row)
    return "\n".join([*lines, "", tables.table(headers, rows)])


def run(args: argparse.Namespace) -> str:
    outcome, response = evaluate(args)
    if args.output == "json":
        return dump_json(response)
    return _text(outcome, _load_pod(args.pod), args.output == "wide")
