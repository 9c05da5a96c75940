"""The filter decision across candidate nodes, as HAMi makes it (reference §4.1, §4.5, §4.8, §4.10).

This is the reference path: every candidate is evaluated fully, fitting nodes are sorted by the node
policy and the last one wins. The service's fast path must give the same winner and allocation; tests
compare the two. Also here: the annotations written to the pod and the text of HAMi's filter events.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core import pods, reasons
from app.core.codec import decode_scoring_weights, encode_pod_single_device
from app.core.fit import NodeVerdict, PodContext, evaluate_node
from app.core.model import NodeDevices, NodeUse, PodDevices, QuotaView
from app.core.policy import gpu_policy, node_policy, node_sort_key, numa_bind
from app.core.score import format_score
from app.core.vendor import AnnotationContext, Vendor

ASSIGNED_NODE = "hami.io/vgpu-node"
ASSIGNED_TIME = "hami.io/vgpu-time"
WEIGHTS_ANNOTATION = "hami.io/device-scoring-weights"


@dataclass(frozen=True, slots=True)
class Policies:
    """Scheduler-wide defaults (HAMi --gpu-scheduler-policy / --node-scheduler-policy)."""

    gpu: str = "spread"
    node: str = "binpack"


def pod_context(
    pod: Mapping[str, Any], vendors: Sequence[Vendor], policies: Policies, quota: QuotaView
) -> PodContext:
    """Parse what the decision needs from the pod.

    Raises PodError (malformed pod), InvalidRequest (a device resource we refuse) or CodecError (invalid
    `hami.io/device-scoring-weights`).
    """
    annotations = pods.annotations_of(pod)
    return PodContext(
        name=pods.name(pod),
        namespace=pods.namespace(pod),
        annotations=annotations,
        requests=pods.pod_requests(pod, vendors),
        gpu_policy=gpu_policy(annotations, policies.gpu),
        node_policy=node_policy(annotations, policies.node),
        numa_bind=numa_bind(annotations),
        weights=decode_scoring_weights(annotations.get(WEIGHTS_ANNOTATION)),
        quota=quota,
    )


@dataclass(frozen=True, slots=True)
class Decision:
    ranked: tuple[NodeVerdict, ...]  # fitting nodes in node-policy order; the winner is the last
    failed: Mapping[str, str]

    @property
    def winner(self) -> NodeVerdict | None:
        return self.ranked[-1] if self.ranked else None


def unregistered_reason(detail: str | None) -> str:
    """HAMi's `node unregistered`, with our reason appended when we know why (a corrupt annotation)."""
    return f"{reasons.NODE_UNREGISTERED}: {detail}" if detail else reasons.NODE_UNREGISTERED


def rank(verdicts: Sequence[NodeVerdict], policy: str) -> tuple[NodeVerdict, ...]:
    """Stable sort by node score under the node policy; ties keep candidate order."""
    key = node_sort_key(policy)
    return tuple(sorted(verdicts, key=lambda v: key(v.score)))


def decide(
    ctx: PodContext,
    candidates: Sequence[str],
    nodes: Mapping[str, NodeDevices],
    usage: Mapping[str, NodeUse],
    vendors: Sequence[Vendor],
    broken: Mapping[str, str] | None = None,
) -> Decision:
    """Evaluate every candidate (in order) and rank the fitting ones."""
    by_key = {v.key: v for v in vendors}
    fits: list[NodeVerdict] = []
    failed: dict[str, str] = {}
    for name in candidates:
        node = nodes.get(name)
        if node is None:
            failed[name] = unregistered_reason((broken or {}).get(name))
            continue
        verdict = evaluate_node(node, usage.get(name, {}), ctx, by_key)
        if verdict.fits:
            fits.append(verdict)
        else:
            failed[name] = verdict.reason
    return Decision(rank(fits, ctx.node_policy), failed)


def allocation_annotations(
    node: str,
    devices: PodDevices,
    vendors: Sequence[Vendor],
    now_unix: int,
    pod: Mapping[str, Any] | None = None,
    now_nanos: int | None = None,
) -> dict[str, str]:
    """The pod annotations Filter writes for the winner (§4.10; vendors §1.4: `hami.io/vgpu-node` and
    `-time` first, then every vendor's, in registry order); `now_unix`/`now_nanos` are the caller's clock.

    A vendor the pod got no device of (padded: it has devices on the node, app.core.fit) writes its lists
    as HAMi does — `EncodePodSingleDevice` of its empty groups, one `;` per container, under each list key
    its `pod_annotations` writes (to-allocate, allocated) — and nothing else: no key its device plugin uses
    to find or configure its pods (docs/compatibility.md, decision core, issue 19)."""
    annotations = {ASSIGNED_NODE: node, ASSIGNED_TIME: str(now_unix)}
    nanos = now_unix * 1_000_000_000 if now_nanos is None else now_nanos
    for vendor in vendors:
        containers = devices.get(vendor.key)
        if not containers:  # HAMi: `len(devlist) > 0`
            continue
        if not any(containers):
            empty = encode_pod_single_device(containers)
            annotations.update((key, empty) for key in _padded_lists(vendor))
            continue
        ctx = AnnotationContext(node, pod or {}, dict(annotations), now_unix, nanos)
        annotations.update(vendor.pod_annotations(containers, ctx))
    return annotations


def _padded_lists(vendor: Vendor) -> tuple[str, ...]:
    """The list keys a vendor's `pod_annotations` writes: its allocated list, and its to-allocate list when
    a device plugin works through it (declared with that plugin; Moore Threads' is only registered)."""
    declared = {key.name: key for key in vendor.pod_keys}
    to_allocate = declared.get(vendor.to_allocate_annotation)
    lists = (vendor.to_allocate_annotation if to_allocate is not None and to_allocate.plugin else "",)
    return tuple(k for k in (*lists, vendor.allocated_annotation) if k and k in declared)


def stale_annotations(
    pod_annotations: Mapping[str, str], written: Mapping[str, str], vendors: Sequence[Vendor]
) -> list[str]:
    """Vendor annotations an earlier decision left on a re-filtered pod that this one does not rewrite."""
    return [
        key
        for vendor in vendors
        for key in (declared.name for declared in vendor.pod_keys)
        if key in pod_annotations and key not in written
    ]


_REASON = re.compile(r"^(\d+)/(\d+) (\S+)")


def reason_keys(reason: str) -> list[str]:
    """The reason keys of a `GenReason` string; reasons without a count prefix yield none (quirk #11)."""
    keys = []
    for part in reason.split(", "):
        match = _REASON.match(part)
        if match:
            keys.append(match.group(3))
    return keys


def failure_events(failed: Mapping[str, str], candidate_count: int) -> list[str]:
    """FilteringFailed messages when no node fits: one per reason key, then the summary (§4.8)."""
    parsed: dict[str, list[str]] = {}  # thousands of nodes share a handful of reason texts
    by_key: dict[str, list[str]] = {}
    for node, reason in failed.items():
        keys = parsed.get(reason)
        if keys is None:
            keys = parsed[reason] = reason_keys(reason)
        for key in keys:
            by_key.setdefault(key, []).append(node)
    messages = [
        f"{len(nodes)} nodes {key}({','.join(sorted(nodes))})" for key, nodes in sorted(by_key.items())
    ]
    messages.append(f"no available node, {candidate_count} nodes do not meet")
    return messages


def success_event(winner: NodeVerdict, candidate_count: int, ranked_ahead: int) -> str:
    """FilteringSucceed message: the winner, its node score, its rank, and that the nodes ranked ahead of
    it do not fit.

    HAMi lists every fitting node with its score (§4.8); the service stops at the first node that fits in
    winner order, so it reports what it knows (docs/compatibility.md).
    """
    return (
        f"find fit node({winner.node}), score {format_score(winner.score)}, ranked {ranked_ahead + 1} of "
        f"{candidate_count} nodes (the {ranked_ahead} ranked ahead do not fit)"
    )


def binding_success_event(node: str, namespace: str, name: str) -> str:
    return f"Successfully binding node [{node}] to {namespace}/{name}"
