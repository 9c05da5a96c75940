"""Does a pod fit one node, with which devices, and at what node score (HAMi `scoreNode`, §4.3–4.4).

Init containers run one at a time before the app containers, so each init container is fitted against the
node as it is before this pod; app containers are fitted one after another on a working copy where each
allocation is added (and the device order left by the previous container's sort carries over).

The allocation is padded by vendor key, one group per container, for every vendor the pod asks for — so
that entry i of the annotation is container i for the device plugin (HAMi pads by device model instead,
which drops GPU-less containers from the list: quirk #1, fixed) — and, as HAMi's padding over the node's
device types does, for every other vendor with devices on the node: all its groups empty (issue 19;
`app.core.decision.allocation_annotations` writes only their lists; docs/compatibility.md). Only the
requested vendors score. A request sees the devices its vendor says it may use (`Vendor.sees`); vendors
that score nodes add to the base node score.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from app.core import quota, reasons
from app.core.codec import ScoringWeights
from app.core.model import (
    ContainerDevice,
    ContainerDevices,
    ContainerRequests,
    DeviceUsage,
    NodeDevices,
    NodeUse,
    PodDevices,
    PodRequests,
    QuotaView,
)
from app.core.policy import ScoredDevice, sort_devices
from app.core.score import device_score, f32, node_score
from app.core.usage import collapse, working_devices
from app.core.vendor import AddUsageError, FitContext, ScoreContext, Vendor, quota_amounts


@dataclass(frozen=True, slots=True)
class PodContext:
    """Everything about the pod that every node evaluation needs, computed once per decision."""

    name: str
    namespace: str
    annotations: Mapping[str, str]
    requests: PodRequests
    gpu_policy: str
    node_policy: str
    numa_bind: bool
    weights: ScoringWeights
    quota: QuotaView


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node: str
    fits: bool
    score: float = 0.0
    devices: PodDevices | None = None
    reason: str = ""


class _Unfit(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _requested_vendors(requests: PodRequests) -> list[str]:
    return sorted({key for container in requests.containers for key in container})


def _always(candidate: Sequence[ContainerDevice]) -> bool:
    return True


def _quota_fits(
    ctx: PodContext,
    vendor: Vendor,
    allocated: Sequence[Mapping[str, ContainerDevices]],
    position: int,
) -> Callable[[Sequence[ContainerDevice]], bool]:
    """Would this pod, with `candidate` as container `position`'s devices, stay within its quota?

    The hypothetical allocation is collapsed with init containers at their real indexes (HAMi counts the
    first app containers as init containers here: quirk #3, fixed). Where the namespace sets no limit on
    the vendor's memory or cores, `quota.fits` is true whatever the amounts: nothing is collapsed then.
    """
    if not quota.limited(ctx.quota, ctx.namespace, vendor):
        return _always
    groups = [a.get(vendor.key, ()) for a in allocated]

    def fits(candidate: Sequence[ContainerDevice]) -> bool:
        trial = list(groups)
        trial[position] = tuple(candidate)
        collapsed = collapse(tuple(trial), ctx.requests.init_count)
        amounts = [quota_amounts(vendor, d) for d in collapsed]
        mem, cores = sum(a[0] for a in amounts), sum(a[1] for a in amounts)
        return quota.fits(ctx.quota, ctx.namespace, vendor, mem, cores)

    return fits


def _fit_container(
    node: NodeDevices,
    scored: list[ScoredDevice],
    requests: ContainerRequests,
    ctx: PodContext,
    vendors: Mapping[str, Vendor],
    allocated: Sequence[Mapping[str, ContainerDevices]],
    position: int,
) -> dict[str, ContainerDevices]:
    """HAMi `fitInDevices`: allocate one container's requests on `scored` (sorted and mutated in place)."""
    for entry in scored:
        entry.score = device_score(entry.device, requests, ctx.weights)
    result: dict[str, ContainerDevices] = {}
    for key in sorted(requests):
        request = requests[key]
        sort_devices(scored, ctx.gpu_policy, ctx.numa_bind)
        vendor = vendors.get(request.type)
        if vendor is None:
            raise _Unfit(reasons.DEVICE_TYPE_NOT_FOUND)
        candidates = [entry.device for entry in scored if vendor.sees(entry.device.type, entry.device.vendor)]
        if request.nums > len(candidates) and not vendor.may_reuse_devices(
            candidates, request, ctx.annotations
        ):
            raise _Unfit(reasons.NODE_INSUFFICIENT_DEVICE)
        quota_fits = _quota_fits(ctx, vendor, allocated, position)
        # HAMi's `allocated`: the app phase sees the app containers fitted so far, an init container the
        # init containers before it (V§1.1, Fit)
        first = 0 if position < ctx.requests.init_count else ctx.requests.init_count
        earlier = tuple(group.get(key, ()) for group in allocated[first:position])
        fit_ctx = FitContext(ctx.annotations, ctx.namespace, ctx.gpu_policy, node, quota_fits, earlier)
        outcome = vendor.fit(candidates, request, fit_ctx)
        if not outcome.ok:
            raise _Unfit(outcome.reason)
        by_id = {entry.device.id: entry.device for entry in scored}
        final = []
        for chosen in outcome.devices:
            device = by_id.get(chosen.uuid)
            if device is None:
                raise _Unfit(reasons.device_not_found(chosen.uuid, node.name))
            try:
                final.append(vendor.add_usage(device, chosen))
            except AddUsageError as exc:
                raise _Unfit(reasons.add_usage_failed(chosen.uuid, str(exc))) from None
        result[key] = tuple(final)
    return result


def _scored(devices: Sequence[DeviceUsage]) -> list[ScoredDevice]:
    return [ScoredDevice(d.copy()) for d in devices]


def evaluate_node(
    node: NodeDevices,
    use: NodeUse,
    ctx: PodContext,
    vendors: Mapping[str, Vendor],
    working: Sequence[DeviceUsage] | None = None,
) -> NodeVerdict:
    """Fit the whole pod on one node; returns the verdict with the padded allocation and node score.

    `working`: `working_devices(node, use)` when the caller has it already (read, never changed)."""
    original = working_devices(node, use) if working is None else working
    containers = ctx.requests.containers
    allocated: list[dict[str, ContainerDevices]] = [{} for _ in containers]
    try:
        for position in range(ctx.requests.init_count):
            if containers[position]:
                allocated[position] = _fit_container(
                    node, _scored(original), containers[position], ctx, vendors, allocated, position
                )
        score = node_score(original)
        app_node = _scored(original)
        for position in range(ctx.requests.init_count, len(containers)):
            if containers[position]:
                allocated[position] = _fit_container(
                    node, app_node, containers[position], ctx, vendors, allocated, position
                )
    except _Unfit as unfit:
        return NodeVerdict(node.name, False, reason=unfit.reason)
    devices = {
        key: tuple(group.get(key, ()) for group in allocated) for key in _requested_vendors(ctx.requests)
    }
    for key, groups in devices.items():  # HAMi OverrideScore (§4.5), vendors in key order
        vendor = vendors.get(key)
        if vendor is not None and vendor.scores_nodes:
            extra = vendor.score_node(ScoreContext(node, original, groups, ctx.node_policy, ctx.annotations))
            score = f32(score + f32(extra))
    empty: ContainerDevices = ()
    for key in sorted({d.vendor for d in node.devices}.intersection(vendors).difference(devices)):
        devices[key] = (empty,) * len(containers)  # HAMi's padding of the node's other device types
    return NodeVerdict(node.name, True, score, devices)
