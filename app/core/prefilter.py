"""What can be known about a pod on a node from the node as it is before the pod (the fast path's rules).

`evaluate_node` fits a pod container by container and vendor by vendor ("steps", in `steps` order). Some
steps see the node exactly as it is before the pod: the first vendor of every init container (each init
container is fitted on a fresh copy) and the first vendor of the first app container with requests. The
others see the node after the pod's earlier allocations, which only ever add usage.

So, with a vendor's batch classification of every device on the pre-pod node (`app.devices.batch`):
- a step that cannot be satisfied on the pre-pod node cannot be satisfied later either, because every
  per-device check only gets harder as usage grows (more slots, memory and cores used). That makes "all
  steps pass on the pre-pod node" a necessary condition for the node to fit (`may fit`); it never rejects a
  node that `evaluate_node` accepts. It relies on allocations never being negative, which only a memory
  percentage of a card larger than 21 TB could break (int32 wrap-around); the caller checks.
- for a pre-pod step, the classification is the step's exact outcome, and when it fails, the reason text
  follows from per-check counts alone (`failure_reason`), unless the NUMA-binding runs or the namespace quota
  could reject a device: those depend on the order in which devices are tried. `quota_is_slack` tells when
  the quota cannot reject anything this pod could take.

Nodes with a `mig`-mode device or with MIG slices in use are outside these rules (one MIG GPU may serve
several of `nums`; the MIG check reads the slices in use and the MIG health rules depend on them): the
screening never rejects them and leaves their reasons to the full evaluation (`DeviceColumns.mig`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.core import quota, reasons
from app.core.model import DeviceRequest, PodRequests, QuotaView
from app.core.policy import TOPOLOGY, policy_contains
from app.core.vendor import Vendor


@dataclass(frozen=True, slots=True)
class Step:
    """One vendor request of one container, in the order `evaluate_node` fits them."""

    position: int  # container index, init containers first
    key: str  # vendor key of the request
    request: DeviceRequest
    pristine: bool  # fitted on the node as it is before the pod


def steps(requests: PodRequests) -> list[Step]:
    """All requests in evaluation order: init containers one by one, then app containers; within a
    container, vendors in sorted order (as `_fit_container` takes them)."""
    result: list[Step] = []
    first_app = True
    for position, container in enumerate(requests.containers):
        if not container:
            continue
        fresh = position < requests.init_count or first_app
        for i, key in enumerate(sorted(container)):
            result.append(Step(position, key, container[key], pristine=fresh and i == 0))
        if position >= requests.init_count:
            first_app = False
    return result


def failure_reason(counts: Mapping[str, int], passing: int, total: int) -> str:
    """The `GenReason` text of a Fit that found `passing` (< requested) usable devices among `total`
    candidates, the others counted under their first failing check (§4.7)."""
    if passing:
        counts = {**counts, reasons.ALLOCATED_CARDS_INSUFFICIENT_REQUEST: passing}
    return reasons.gen_reason(counts, total)


def quota_is_slack(
    quota_view: QuotaView,
    namespace: str,
    vendor: Vendor,
    policy: str,
    demands: Iterable[tuple[DeviceRequest, int]],
    devices_per_node: int,
) -> bool:
    """True when the namespace quota cannot reject any device this pod could be given.

    `demands` are the vendor's requests with the largest memory each could take on one device. Fit checks
    the quota with the container's devices chosen so far plus the candidate: at most `nums` devices, or
    every candidate of the node under topology-aware (which collects all passing devices first); the pod's
    other containers add at most their own. If even the sum of those maxima fits, no check can fail.
    """
    topology = policy_contains(policy, TOPOLOGY)
    mem = cores = 0
    for request, max_mem in demands:
        if max_mem < 0:
            return False
        devices = max(devices_per_node, request.nums) if topology else request.nums
        mem += devices * max_mem
        cores += devices * min(request.coresreq, 100)
    return quota.fits(quota_view, namespace, vendor, mem, cores)
