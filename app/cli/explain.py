"""`explain`: where would this pod go, and why not elsewhere — the filter's answer without a cluster.

The cluster file is what `kubectl get nodes,pods,resourcequotas -A -o json` prints. Pods with
`hami.io/vgpu-node` and an allocation, not Succeeded/Failed, count as usage when their `spec.schedulerName`
is ours (`--scheduler-name`) or adopted (`--adopt-scheduler-names`, HAMi's default name unless given), as
the service counts them (app/core/adoption.py); ResourceQuotas give limits. The pod is evaluated as given
(no webhook mutation), by the same decision core the service uses. JSON output is the extender's result plus
what the filter would write: `{"NodeNames", "FailedNodes", "Error", "Annotations", "Scores"}`, `Reasons`
(why each node that does not fit does not fit, also when another node fits), `Holders` (the pods counted:
`Pod`, `Node`, `SchedulerName`, `Adopted`) and `NotCounted` (pods carrying an allocation that holds nothing,
with the reason). Text output (the default) is a table: every node's verdict, score and the devices the
chosen node would give each container, or why a node does not fit; `-o wide` also shows the devices of the
other fitting nodes.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.cli import tables
from app.cli.common import (
    CliError,
    Cluster,
    decode_nodes,
    dump_json,
    load_cluster,
    load_disabled,
    load_pod,
    load_vendors,
)
from app.core import adoption, pods, quota, reservations, why
from app.core.codec import CodecError
from app.core.decision import (
    Decision,
    Policies,
    allocation_annotations,
    decide,
    pod_context,
)
from app.core.inventory import node_name
from app.core.model import PodDevices
from app.core.pods import PodError
from app.core.policy import BINPACK, GPU_POLICIES, NODE_POLICIES, SPREAD, unknown_gpu_policy
from app.core.score import format_score
from app.core.vendor import InvalidRequest, Vendor

EXAMPLE = """examples:
  kubectl get nodes,pods,resourcequotas -A -o json > cluster.json
  hami-scheduler explain --cluster cluster.json --pod pod.yaml
  hami-scheduler explain --cluster cluster.json --pod pod.yaml --gpu-policy binpack --nodes a,b -o wide
  hami-scheduler explain --cluster cluster.json --pod pod.yaml -o json  # the extender's answer"""


def gpu_policy(value: str) -> str:
    """argparse type: a GPU policy or a comma-separated chain of known ones."""
    unknown = unknown_gpu_policy(value)
    if unknown is not None:
        raise argparse.ArgumentTypeError(f"unknown GPU policy {unknown!r} (known: {', '.join(GPU_POLICIES)})")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", required=True, help="kubectl get nodes,pods,resourcequotas -A -o json")
    parser.add_argument("--pod", required=True, help="the pod to place (JSON or YAML)")
    parser.add_argument("--nodes", help="comma-separated candidate nodes (default: all nodes, in file order)")
    parser.add_argument(
        "--gpu-policy",
        type=gpu_policy,
        default=SPREAD,
        help=f"GPU policy for pods that name none: {', '.join(GPU_POLICIES)}",
    )
    parser.add_argument(
        "--node-policy", choices=NODE_POLICIES, default=BINPACK, help="node policy for pods that name none"
    )
    parser.add_argument("--device-config", help="HAMi device-config.yaml (default: the chart's defaults)")
    parser.add_argument(
        "--scheduler-name", default=adoption.HAMI_DEFAULT_SCHEDULER, help="our scheduler name (schedulerName)"
    )
    parser.add_argument(
        "--adopt-scheduler-names",
        default=adoption.HAMI_DEFAULT_SCHEDULER,
        help="comma-separated scheduler names whose pods also count (adoptSchedulerNames; default: "
        "hami-scheduler; empty: none)",
    )
    parser.add_argument(
        "--output", "-o", choices=("text", "wide", "json"), default="text", help="output format"
    )


@dataclass(frozen=True)
class Usage:
    """The reservations the service would count, who holds them, and the allocations it would not count."""

    held: list[reservations.Reservation]
    holders: list[dict[str, Any]]
    not_counted: list[dict[str, str]]


def _who(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name') or '?'}"


def _usage(
    all_pods: Sequence[Mapping[str, Any]], vendors: Sequence[Vendor], counted: adoption.Counted, skip_uid: str
) -> Usage:
    usage = Usage([], [], [])
    for pod in all_pods:
        if not reservations.holds_devices(pod):
            continue
        name, role = adoption.scheduler_of(pod), counted.role(pod)
        try:
            reservation = reservations.reservation_from_pod(pod, vendors)
        except (CodecError, PodError) as exc:  # HAMi logs and ignores such a pod
            usage.not_counted.append({"Pod": _who(pod), "SchedulerName": name, "Reason": f"corrupt: {exc}"})
            continue
        if reservation is None or (skip_uid and reservation.uid == skip_uid):
            continue
        if role == adoption.FOREIGN:
            reason = f"schedulerName {name!r} is neither ours ({counted.ours}) nor adopted"
            usage.not_counted.append({"Pod": _who(pod), "SchedulerName": name, "Reason": reason})
            continue
        usage.held.append(reservation)
        usage.holders.append(
            {
                "Pod": f"{reservation.namespace}/{reservation.name}",
                "Node": reservation.node,
                "SchedulerName": name,
                "Adopted": role == adoption.ADOPTED,
            }
        )
    return usage


@dataclass(frozen=True)
class Explanation:
    """The extender-shaped result plus the full decision and the usage counted, for the text renderer."""

    result: dict[str, Any]
    decision: Decision | None = None
    usage: Usage | None = None
    counted: adoption.Counted | None = None


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


def _counted(args: argparse.Namespace) -> adoption.Counted:
    try:
        adopted = adoption.parse_names(args.adopt_scheduler_names)
    except ValueError as exc:
        raise CliError(f"--adopt-scheduler-names: {exc}") from None
    return adoption.Counted(args.scheduler_name, adopted)


def _decide(
    args: argparse.Namespace, pod: dict[str, Any], cluster: Cluster, vendors: tuple[Vendor, ...], usage: Usage
) -> Explanation:
    registered, broken = decode_nodes(cluster.nodes, vendors)
    candidates = (
        [n.strip() for n in args.nodes.split(",") if n.strip()]
        if args.nodes
        else [node_name(n) for n in cluster.nodes]
    )
    try:
        limits = quota.quota_limits(cluster.quotas, vendors)
        view = quota.build_view(limits, reservations.quota_used(usage.held))
        ctx = pod_context(pod, vendors, Policies(gpu=args.gpu_policy, node=args.node_policy), view)
    except PodError as exc:
        raise CliError(f"{args.pod}: {exc}") from None
    except (InvalidRequest, CodecError) as exc:
        return _result(None, None, str(exc))
    refused = pods.disabled_request(pod, load_disabled(args.device_config))
    if refused is not None:
        return _result(None, None, refused)
    if not ctx.requests.any:
        return _result(candidates, None)
    used = reservations.usage_by_node(usage.held)
    decision = decide(ctx, candidates, registered, used, vendors, broken)
    asked = _asked(pod, ctx.requests.containers, vendors)
    numbers = {
        node: why.numbers(
            reason, registered[node], used.get(node, {}), asked, ctx.annotations, view, ctx.namespace
        )
        for node, reason in decision.failed.items()
        if node in registered
    }
    winner = decision.winner
    if winner is None or winner.devices is None:
        explanation = _result(None, decision.failed, decision=decision)
    else:
        now = time.time_ns()
        annotations = allocation_annotations(winner.node, winner.devices, vendors, now // 10**9, pod, now)
        explanation = _result([winner.node], None, annotations=annotations, decision=decision)
    explanation.result["Numbers"] = numbers
    return explanation


def _asked(
    pod: Mapping[str, Any], containers: Sequence[Mapping[str, Any]], vendors: Sequence[Vendor]
) -> list[why.Asked]:
    """Each container's request of each vendor, by container name (init containers first)."""
    by_key = {v.key: v for v in vendors}
    names = container_names(pod)
    return [
        why.Asked(names[i] if i < len(names) else f"#{i}", by_key[key], request)
        for i, requests in enumerate(containers)
        for key, request in requests.items()
        if key in by_key
    ]


def evaluate(args: argparse.Namespace) -> Explanation:
    vendors = load_vendors(args.device_config)
    counted = _counted(args)
    pod = load_pod(args.pod)
    cluster = load_cluster(args.cluster)
    try:
        uid = pods.uid(pod)  # raises PodError (not AttributeError) when metadata is not an object
    except PodError as exc:
        raise CliError(f"{args.pod}: {exc}") from None
    usage = _usage(cluster.pods, vendors, counted, uid)
    explanation = _decide(args, pod, cluster, vendors, usage)
    explanation.result["Holders"] = usage.holders
    explanation.result["NotCounted"] = usage.not_counted
    return replace(explanation, usage=usage, counted=counted)


def container_names(pod: Mapping[str, Any]) -> list[str]:
    """Init containers first, as in the allocation annotations."""
    return [pods.container_name(c) for c in (*pods.init_containers(pod), *pods.containers(pod))]


def device_lines(devices: PodDevices, names: Sequence[str], vendors: Mapping[str, Vendor]) -> list[str]:
    """`c0: GPU-B (NVIDIA) 2.9Gi 30% cores` per allocated device, containers in pod order, in each vendor's
    units (`c0: dev-0 (AMD) 64Gi 152 CUs`)."""
    lines: list[str] = []
    for vendor, containers in sorted(devices.items()):
        for index, container in enumerate(containers):
            name = names[index] if index < len(names) else f"#{index}"
            lines.extend(f"{name}: {tables.device_text(d, vendor, vendors.get(vendor))}" for d in container)
    return lines


def _text(explanation: Explanation, names: Sequence[str], wide: bool, vendors: Mapping[str, Vendor]) -> str:
    result, decision = explanation.result, explanation.decision
    if result["Error"]:
        return f"error: {result['Error']}"
    if decision is None:
        return "pod requests no managed devices: every candidate node passes"
    winner = decision.winner
    rows: list[list[str]] = []
    for verdict in reversed(decision.ranked):
        chosen = winner is not None and verdict.node == winner.node
        lines: list[str] = device_lines(verdict.devices or {}, names, vendors) if (chosen or wide) else []
        score = format_score(verdict.score)
        rows.append([verdict.node, "chosen" if chosen else "fits", score, lines[0] if lines else ""])
        rows.extend(["", "", "", line] for line in lines[1:])
    numbers = result.get("Numbers") or {}
    for node, reason in decision.failed.items():  # HAMi's reason, then the amounts behind it
        rows.append([node, "no", "", reason])
        rows.extend(["", "", "", f"  {line}"] for line in numbers.get(node, ()))
    out = [tables.table(["NODE", "VERDICT", "SCORE", "DEVICES / REASON"], rows), ""]
    out.extend(_usage_lines(explanation))
    out.append(f"placed on {winner.node}" if winner else "no node fits this pod")
    return "\n".join(out)


def _usage_lines(explanation: Explanation) -> list[str]:
    usage, counted = explanation.usage, explanation.counted
    if usage is None or counted is None:
        return []
    roles = [adoption.ADOPTED if h["Adopted"] else adoption.OURS for h in usage.holders]
    lines = [f"usage: {adoption.describe(counted, roles)}"]
    lines.extend(f"not counted: {n['Pod']}: {n['Reason']}" for n in usage.not_counted)
    return lines


def run(args: argparse.Namespace) -> str:
    explanation = evaluate(args)
    if args.output == "json":
        return dump_json(explanation.result)
    vendors = {v.key: v for v in load_vendors(args.device_config)}
    return _text(explanation, container_names(load_pod(args.pod)), args.output == "wide", vendors)
