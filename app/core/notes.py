"""What a pod's device values mean where HAMi clamps or ignores them: the notes the webhook tells.

Why it exists: HAMi admits a few values it then silently changes — `nvidia.com/gpucores: 150` is fitted as
100 (its Fit clamps, quirk #5), `nvidia.com/gpu: "0"` with `nvidia.com/gpumem` routes the pod to the GPU
scheduler and runs it with no device, `nvidia.com/gpumem-percentage: 0` and `nvidia.com/gpumem: 0` mean the
whole card, `amd.com/gpumem` without `amd.com/gpu` routes the pod and asks nothing (V§3.11 #4). We keep
HAMi's decision (refusing would break pods HAMi admits) and say what was done: the webhook returns these
notes as AdmissionReview `warnings` (kubectl prints them to whoever created the pod), and the leader's
registration worker posts them as one pod Event for pods a controller made (workers/notices.py), since a
controller does not show its warnings to anyone.

The notes are computed from the stored pod alone (the same function at admission and when the worker sees
the pod), for every vendor alike from its resource names (`Vendor.resources`) and its request
(`Vendor.container_request`); a vendor that ignores values in a way of its own says so through the
optional `RequestNotes` hook (Enflame DRS: memory and cores next to a slice count).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from app.core import pods, quantity
from app.core.model import DeviceRequest
from app.core.pods import PodError
from app.core.vendor import InvalidRequest, Vendor

WHOLE = 100  # cores of one whole device, in percent: every template Fit clamps a request to it


@runtime_checkable
class RequestNotes(Protocol):
    """Optional for a vendor that ignores or rewrites container values in a way of its own: one sentence
    per such value (without the container's name), given the container and the vendor's request for it."""

    def request_notes(
        self, container: Mapping[str, Any], request: DeviceRequest | None
    ) -> tuple[str, ...]: ...


def _number(container: Mapping[str, Any], name: str) -> tuple[Any, int | None]:
    """The raw value of `name` (limits, then requests) and its integer, (None, None) when absent."""
    if not name:
        return None, None
    raw = pods.resource(container, name)
    return raw, (None if raw is None else quantity.as_int64(raw))


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _ignored(vendor: Vendor, container: Mapping[str, Any]) -> list[str]:
    """The vendor's memory and cores when its request is none: after a count of 0 (`nvidia.com/gpu: "0"`),
    or without a count (`amd.com/gpumem` alone: AMD's webhook routes the pod all the same, V§3.11 #4)."""
    names = vendor.resources
    raw, count = _number(container, names.count)
    named = [
        n
        for n in (names.memory, names.memory_percentage, names.cores)
        if _number(container, n)[0] is not None
    ]
    if not named:
        return []
    ignored = f"{_and(named)} {'is' if len(named) == 1 else 'are'} ignored"
    why = (
        f"{names.count} is 0, so {ignored}:"
        if raw is not None and count == 0
        else f"{ignored} without {names.count}:"
    )
    return [f"{why} the container gets no {vendor.key} device (as HAMi does)"]


def _cores_above_whole(vendor: Vendor, container: Mapping[str, Any], request: DeviceRequest) -> list[str]:
    name = vendor.resources.cores
    raw, _ = _number(container, name)
    if raw is None or request.coresreq <= WHOLE:
        return []
    per_device = "" if str(raw) == str(request.coresreq) else f" ({request.coresreq} per device)"
    return [
        f"{name} {raw}{per_device} is more than one whole device ({WHOLE}): it is treated as {WHOLE}, "
        "as HAMi does"
    ]


def _memory_meaning(request: DeviceRequest) -> str:
    return f"{request.memreq} MiB (defaultMemory)" if request.memreq > 0 else "the whole device's memory"


def _zero_memory(vendor: Vendor, container: Mapping[str, Any], request: DeviceRequest) -> list[str]:
    notes = []
    pct_name, mem_name = vendor.resources.memory_percentage, vendor.resources.memory
    raw, pct = _number(container, pct_name)
    if raw is not None and pct == 0 and _number(container, mem_name)[0] is None:
        notes.append(
            f"{pct_name} 0 is read as unset: the container gets {_memory_meaning(request)}, as HAMi does"
        )
    raw, memory = _number(container, mem_name)
    if raw is not None and memory == 0 and request.memreq == 0 and request.mem_percentage == WHOLE:
        notes.append(
            f"{mem_name} 0 is read as unset: the container gets the whole device's memory, as HAMi does"
        )
    return notes


def container_notes(container: Mapping[str, Any], vendors: Sequence[Vendor]) -> list[str]:
    """What HAMi clamps or ignores in this container, one sentence each (the container not named)."""
    notes: list[str] = []
    for vendor in vendors:
        try:
            request = vendor.container_request(container)
        except InvalidRequest:  # refused, not told (the webhook's denial, the filter's Error)
            continue
        if request is None:
            notes.extend(_ignored(vendor, container))
        elif request.nums > 0:
            notes.extend(_cores_above_whole(vendor, container, request))
            notes.extend(_zero_memory(vendor, container, request))
        if isinstance(vendor, RequestNotes):
            notes.extend(vendor.request_notes(container, request))
    return notes


def pod_notes(pod: Mapping[str, Any], vendors: Sequence[Vendor]) -> tuple[str, ...]:
    """Every container's notes, init containers first, each prefixed with `container <name>: `."""
    try:
        everything = (*pods.init_containers(pod), *pods.containers(pod))
        return tuple(
            f"container {pods.container_name(c)}: {note}"
            for c in everything
            for note in container_notes(c, vendors)
        )
    except PodError:  # malformed: the webhook's decoder or the filter says so
        return ()


def controller_made(pod: Mapping[str, Any]) -> bool:
    """Made by a controller (a Deployment's ReplicaSet, a Job, ...): it has an owner reference. The API
    request that created it came from the controller, so admission warnings reached only the controller."""
    owners = pods.metadata(pod).get("ownerReferences")
    return isinstance(owners, list) and bool(owners)
