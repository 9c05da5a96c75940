"""`admit`: what would the webhook answer for this pod — HAMi's mutation and checks without a cluster.

Prints the AdmissionReview v1 `response` object the webhook returns for a CREATE of the pod (uid from the
pod's metadata.uid, else a fixed placeholder), decided by the same pure core as the service. With
`--cluster` (`kubectl get pods,resourcequotas -A -o json`), ResourceQuotas give the GPU memory/core limits
and pods holding an allocation give the amount used, as for `explain`. The pod is taken as given: the
API server's defaulting (e.g. `schedulerName: default-scheduler`) is not applied, so an absent
schedulerName is added by the patch rather than replaced. `--output text` shows the decision, the message,
warnings and the patch operations one per line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from app.cli.common import CliError, dump_json, load_cluster, load_document, load_vendors
from app.core import quota, reservations
from app.core.admission import AdmissionInput, AdmissionOutcome, AdmissionSettings, admit, review_response
from app.core.codec import CodecError
from app.core.pods import PodError
from app.core.vendor import Vendor

PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pod", required=True, help="the pod being created (JSON or YAML)")
    parser.add_argument("--cluster", help="kubectl get pods,resourcequotas -A -o json (for quota usage)")
    parser.add_argument(
        "--scheduler-name", default="hami-scheduler", help="name injected into spec.schedulerName"
    )
    parser.add_argument("--device-config", help="HAMi device-config.yaml (default: the chart's defaults)")
    parser.add_argument("--output", choices=("json", "text"), default="json")


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
    settings = AdmissionSettings(scheduler_name=args.scheduler_name)
    outcome = admit(request, settings, vendors, quota.build_view(limits, used))
    return outcome, review_response(outcome, request.uid)["response"]


def _text(outcome: AdmissionOutcome) -> str:
    if outcome.allowed:
        lines = ["allowed"]
    else:
        detail = " ".join(str(p) for p in (outcome.code, outcome.reason) if p)
        lines = [f"denied ({detail})"]
    if outcome.message:
        lines.append(f"message: {outcome.message}")
    lines.extend(f"warning: {warning}" for warning in outcome.warnings)
    if outcome.patch:
        lines.append("patch:")
        for op in outcome.patch:
            value = f" {json.dumps(op['value'], ensure_ascii=False)}" if "value" in op else ""
            source = f" from {op['from']}" if "from" in op else ""
            lines.append(f"  {op['op']} {op['path']}{source}{value}")
    elif outcome.allowed:
        lines.append("no patch")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> str:
    outcome, response = evaluate(args)
    return _text(outcome) if args.output == "text" else dump_json(response)
