"""`explain`: where would this pod go, and why not elsewhere — the filter's answer without a cluster.

The cluster file is what `kubectl get nodes,pods,resourcequotas -A -o json` prints. Pods scheduled by a
HAMi-compatible scheduler (with `hami.io/vgpu-node` and an allocation, not Succeeded/Failed) count as usage;
ResourceQuotas give limits. The pod is evaluated as given (no webhook mutation), by the same decision core
the service uses. JSON output is the extender's result plus what the filter would write:
`{"NodeNames", "FailedNodes", "Error", "Annotations", "Scores"}`, and `Reasons` (why each node that does not
fit does not fit, also when another node fits).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.cli.common import CliError, decode_nodes, dump_json, load_cluster, load_pod, load_vendors
from app.core import pods, quota, reservations
from app.core.codec import CodecError, encode_container_devices
from app.core.decision import (
    Decision,
    Policies,
    allocation_annotations,
    decide,
    pod_context,
)
from app.core.inventory import node_name
from app.core.pods import PodError
from app.core.score import format_score
from app.core.vendor import InvalidRequest, Vendor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", required=True, help="kubectl get nodes,pods,resourcequotas -A -o json")
    parser.add_argument("--pod", required=True, help="the pod to place (JSON or YAML)")
    parser.add_argument("--nodes", help="comma-separated candidate nodes (default: all nodes, in file order)")
    parser.add_argument("--gpu-policy", default="spread", help="default GPU policy (default: spread)")
    parser.add_argument("--node-policy", default="binpack", help="default node policy (default: binpack)")
    parser.add_argument("--device-config", help="HAMi device-config.yaml (default: the chart's defaults)")
    parser.add_argument("--output", choices=("json", "text"), default="json")


def _reservations(
    pods: Sequence[Mapping[str, Any]], vendors: Sequence[Vendor], skip_uid: str
) -> list[reservations.Reservation]:
    result = []
    for pod in pods:
        try:
            reservation = reservations.reservation_from_pod(pod, vendors)
        except (CodecError, PodError):
            continue  # HAMi logs and ignores a pod whose allocation annotation does not decode
        if reservation is not None and (not skip_uid or reservation.uid != skip_uid):
            result.append(reservation)
    return result


@dataclass(frozen=True)
class Explanation:
    """The extender-shaped result plus the full decision, for the text renderer."""

    result: dict[str, Any]
    decision: Decision | None = None


def _result(
    names: list[str] | None,
    failed: Mapping[str, str] | None,
    error: str = "",
    annotations: Mapping[str, str] | None = None,
    decision: Decision | None = None,
) -> Explanation:
    ranked = decision.ranked if decision else ()
    result: dict[str, Any] = {
        "NodeNames": names,
        "FailedNodes": dict(failed) if failed else None,
        "Error": error,
        "Annotations": dict(annotations or {}),
        "Scores": {v.node: round(v.score, 6) for v in ranked},
        "Reasons": dict(decision.failed) if decision else {},
    }
    return Explanation(result, decision)


def evaluate(args: argparse.Namespace) -> Explanation:
    vendors = load_vendors(args.device_config)
    pod = load_pod(args.pod)
    cluster = load_cluster(args.cluster)
    registered, broken = decode_nodes(cluster.nodes, vendors)
    candidates = (
        [n.strip() for n in args.nodes.split(",") if n.strip()]
        if args.nodes
        else [node_name(n) for n in cluster.nodes]
    )
    try:
        uid = pods.uid(pod)  # raises PodError (not AttributeError) when metadata is not an object
        held = _reservations(cluster.pods, vendors, uid)
        limits = quota.quota_limits(cluster.quotas, vendors)
        view = quota.build_view(limits, reservations.quota_used(held))
        ctx = pod_context(pod, vendors, Policies(gpu=args.gpu_policy, node=args.node_policy), view)
    except PodError as exc:
        raise CliError(f"{args.pod}: {exc}") from None
    except (InvalidRequest, CodecError) as exc:
        return _result(None, None, str(exc))
    if not ctx.requests.any:
        return _result(candidates, None)
    decision = decide(ctx, candidates, registered, reservations.usage_by_node(held), vendors, broken)
    winner = decision.winner
    if winner is None or winner.devices is None:
        return _result(None, decision.failed, decision=decision)
    annotations = allocation_annotations(winner.node, winner.devices, vendors, int(time.time()))
    return _result([winner.node], None, annotations=annotations, decision=decision)


def _text(explanation: Explanation) -> str:
    result, decision = explanation.result, explanation.decision
    if result["Error"]:
        return f"error: {result['Error']}"
    if decision is None:
        return "pod requests no managed devices: every candidate node passes"
    winner = decision.winner
    rows = [("NODE", "VERDICT", "SCORE", "DETAIL")]
    for verdict in reversed(decision.ranked):
        if winner is not None and verdict.node == winner.node:
            devices = verdict.devices or {}
            detail = " | ".join(";".join(encode_container_devices(c) for c in cs) for cs in devices.values())
            rows.append((verdict.node, "chosen", format_score(verdict.score), detail))
        else:
            rows.append((verdict.node, "fits", format_score(verdict.score), ""))
    rows.extend((node, "no", "", reason) for node, reason in decision.failed.items())
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3] for row in rows
    ]
    lines.append("")
    lines.append(f"placed on {winner.node}" if winner else "no node fits this pod")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> str:
    explanation = evaluate(args)
    return _text(explanation) if args.output == "text" else dump_json(explanation.result)
