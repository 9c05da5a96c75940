"""HAMi's allocation gauges (reference §8) as Prometheus text, rendered from the snapshot and the ledger.

At 5,000 nodes × 8 GPUs and 20,000 running pods these are ~330,000 samples (~55 MB of text). Building them
with prometheus_client objects at scrape time cost a Gunicorn worker 3–5 s of CPU and ~190 MB of peak RSS
per scrape (docs/benchmarks.md, "Metrics at scale"). Instead the registration worker, which holds the
snapshot and a view of the ledger anyway, renders them here as plain text (string building, about ten
times cheaper than metric objects) into `$HAMI_STATE_DIR/hami-gauges.prom` at most once per
HAMI_STATE_METRICS_INTERVAL (workers/statemetrics.py), and each Gunicorn worker's /metrics streams that
file after its own metrics without parsing it (app/metrics.py). The gauges are therefore up to one interval
stale; HAMi's are up to 15 s stale too (they come from the last registration pass, quirk #39).

The file is published by write-temp-then-rename, so a reader never sees half of it. Its modification time
says when the worker last confirmed it (a render, or a touch when nothing changed), so a reader can tell a
file the worker stopped maintaining (`age`) and leaves it out once older than `max_age`.

Names, labels (with HAMi's constant `zone="vGPU"`) and values are HAMi's: memory in bytes (MiB × 1048576),
cores and shares raw (AMD cards: percent of their compute units, as HAMi normalises them), `container_index`
always 0 (usage is collapsed per pod, quirk #39); MIG instances from the slices in use (their runtime
identity comes with the pods' MIG allocations). Label values are escaped as the text format requires
(backslash, double quote, newline); every family is written once, HELP and TYPE first, all its samples
together.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from app.core.mig import MIG_MODE
from app.core.model import DeviceInfo, DeviceUse
from app.state.snapshot import Snapshot
from app.state.usage import UsageView

GAUGES_FILE = "hami-gauges.prom"
MIB = 1024 * 1024
ZONE = 'zone="vGPU"'
BATCH = 4096  # sample lines per chunk written
_UNUSED = DeviceUse()

# (name, help) in the order they are written.
FAMILIES = (
    ("hami_gpu_memory_limit_bytes", "GPU memory of a device"),
    ("hami_gpu_core_limit_ratio", "GPU cores of a device"),
    ("hami_gpu_memory_allocated_bytes", "GPU memory allocated on a device"),
    ("hami_gpu_shared_count", "Tasks sharing a device"),
    ("hami_gpu_core_allocated_ratio", "GPU cores allocated"),
    ("hami_node_gpu_memory_allocated_ratio", "Allocated share of a device's memory"),
    ("hami_node_gpu_overview", "GPU memory allocated on a device, with its limits"),
    ("hami_vgpu_memory_allocated_bytes", "GPU memory of a pod"),
    ("hami_vgpu_core_allocated_ratio", "GPU cores of a pod"),
    ("hami_resource_quota_used", "Quota used"),
    ("hami_resource_quota_limit", "Quota limit"),
    ("hami_node_gpu_mig_instance_info", "Realized MIG instance identity and scheduler placement"),
)
NAMES = frozenset(name for name, _ in FAMILIES)
# Extra families rendered after HAMi's (app/state/legacygauges.render).
Renderer = Callable[[Snapshot | None, UsageView], Iterator[str]]


def escape(value: str) -> str:
    """A label value as the text format wants it: `\\`, `"` and newlines escaped."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _family(index: int, lines: Iterable[str]) -> Iterator[str]:
    yield from family(*FAMILIES[index], lines)


def family(name: str, text: str, lines: Iterable[str]) -> Iterator[str]:
    """HELP and TYPE, then the samples in chunks of BATCH lines (never all of a family in memory)."""
    yield f"# HELP {name} {text}\n# TYPE {name} gauge\n"
    lines = iter(lines)
    while batch := "".join(islice(lines, BATCH)):
        yield batch


def device_rows(
    snapshot: Snapshot | None, usage: Mapping[str, Mapping[str, DeviceUse]]
) -> Iterator[tuple[str, DeviceInfo, DeviceUse]]:
    """(node, device, its use) for every registered device, in snapshot order."""
    for record in snapshot.nodes.values() if snapshot else ():
        node_use = usage.get(record.devices.name, {})
        for d in record.devices.devices:
            yield record.devices.name, d, node_use.get(d.id, _UNUSED)


def _amd(device: DeviceInfo) -> bool:
    """HAMi reports the cores of devices whose type starts with `AMD` (any case) in percent (S§8): their
    `devcore` and allocations are compute units."""
    return device.type[:3].upper() == "AMD"


def _core_limit(device: DeviceInfo) -> int:
    if _amd(device):
        return 100 if device.devcore > 0 else 0
    return device.devcore


def _cores_used(device: DeviceInfo, cores: int) -> str:
    return _core_ratio(device.devcore, cores) if _amd(device) else str(cores)


def _core_ratio(total: int, allocated: int) -> str:
    """HAMi `normalizeCoreMetrics`: (limit, allocated) as 100 and `ceil(allocated / total x 100)`."""
    return "0" if total <= 0 else str(math.ceil(allocated / total * 100))


def _devices(snapshot: Snapshot | None, usage: Mapping[str, Mapping[str, DeviceUse]]) -> Iterator[str]:
    """The seven per-device families."""
    rows: list[tuple[str, str, DeviceInfo, DeviceUse]] = []  # labels before and after device_cores
    for name, d, use in device_rows(snapshot, usage):
        head = f'node="{escape(name)}",device_uuid="{escape(d.id)}",device_index="{d.index}"'
        rows.append((head, f'device_type="{escape(d.type)}",{ZONE}', d, use))
    yield from _family(
        0, (f"hami_gpu_memory_limit_bytes{{{h},{t}}} {d.devmem * MIB}\n" for h, t, d, _ in rows)
    )
    yield from _family(1, (f"hami_gpu_core_limit_ratio{{{h},{t}}} {_core_limit(d)}\n" for h, t, d, _ in rows))
    yield from _family(
        2,
        (
            f'hami_gpu_memory_allocated_bytes{{{h},device_cores="{d.devcore}",{t}}} {u.mem * MIB}\n'
            for h, t, d, u in rows
        ),
    )
    yield from _family(3, (f"hami_gpu_shared_count{{{h},{t}}} {u.slots}\n" for h, t, _, u in rows))
    yield from _family(
        4, (f"hami_gpu_core_allocated_ratio{{{h},{t}}} {_cores_used(d, u.cores)}\n" for h, t, d, u in rows)
    )
    yield from _family(
        5,
        (
            f"hami_node_gpu_memory_allocated_ratio{{{h},{t}}} {u.mem / d.devmem!r}\n"
            for h, t, d, u in rows
            if d.devmem > 0
        ),
    )
    yield from _family(
        6,
        (
            f'hami_node_gpu_overview{{{h},device_cores="{d.devcore}",device_memory_limit="{d.devmem}",{t}}}'
            f" {u.mem * MIB}\n"
            for h, t, d, u in rows
        ),
    )


def _pods(snapshot: Snapshot | None, view: UsageView) -> Iterator[str]:
    """Per pod and device (collapsed usage, so container_index is always 0 as in HAMi, quirk #39); an AMD
    device's cores in percent of its compute units."""
    amd = {
        (name, d.id): d.devcore
        for name, record in (snapshot.nodes.items() if snapshot else ())
        for d in record.devices.devices
        if _amd(d)
    }
    rows: list[tuple[str, DeviceUse, str]] = []
    for entry in view.entries.values():
        pod = f'namespace="{escape(entry.namespace)}",node="{escape(entry.node)}",pod="{escape(entry.name)}"'
        for uuid, use in entry.uses.items():
            if use.slots:  # not the MIG slices of a GPU the pod's device list does not name
                total = amd.get((entry.node, uuid))
                cores = str(use.cores) if total is None else _core_ratio(total, use.cores)
                rows.append((f'{pod},container_index="0",device_uuid="{escape(uuid)}",{ZONE}', use, cores))
    yield from _family(
        7, (f"hami_vgpu_memory_allocated_bytes{{{labels}}} {u.mem * MIB}\n" for labels, u, _ in rows)
    )
    yield from _family(8, (f"hami_vgpu_core_allocated_ratio{{{labels}}} {c}\n" for labels, _, c in rows))


def _quotas(snapshot: Snapshot | None, view: UsageView) -> Iterator[str]:
    """Used for every tracked (namespace, resource), with its limit as a label (0 when none); limit only
    where one is set, as HAMi's LimitSet."""
    limits = snapshot.quota_limits if snapshot else {}
    used, limited = [], []
    for namespace in sorted(limits.keys() | view.quota.keys()):
        ns_limits, ns_used = limits.get(namespace, {}), view.quota.get(namespace, {})
        for resource in sorted(ns_limits.keys() | ns_used.keys()):
            value = ns_limits.get(resource)
            labels = f'namespace="{escape(namespace)}",quota_name="{escape(resource)}"'
            amount = ns_used.get(resource, 0)
            used.append(f'hami_resource_quota_used{{{labels},limit="{value or 0}",{ZONE}}} {amount}\n')
            if value is not None:
                limited.append(f"hami_resource_quota_limit{{{labels},{ZONE}}} {value}\n")
    yield from _family(9, used)
    yield from _family(10, limited)


def _mig_instances(snapshot: Snapshot | None, usage: Mapping[str, Mapping[str, DeviceUse]]) -> Iterator[str]:
    """One sample per MIG instance the device plugin realized (its identity is in the pod's allocation) on
    a `mig` device; an instance two containers of a pod share is one sample."""
    lines: list[str] = []
    nodes = snapshot.nodes if snapshot else {}
    for name, node_use in usage.items():
        record = nodes.get(name)
        if record is None or not any(use.mig for use in node_use.values()):
            continue
        for d in record.devices.devices:
            use = node_use.get(d.id)
            if use is None or d.mode != MIG_MODE:
                continue
            head = f'node="{escape(name)}",device_uuid="{escape(d.id)}",device_index="{d.index}"'
            realized = {(s.instance, s.profile, s.placement) for s in use.mig if s.instance is not None}
            for i, profile, p in sorted(realized, key=lambda r: (r[2].start, r[2].size, r[1], r[0].uuid)):
                lines.append(
                    f'hami_node_gpu_mig_instance_info{{{head},mig_uuid="{escape(i.uuid)}",'
                    f'profile="{escape(profile)}",gpu_instance_id="{i.gpu_instance_id}",'
                    f'compute_instance_id="{i.compute_instance_id}",placement_start="{p.start}",'
                    f'placement_size="{p.size}",{ZONE}}} 1\n'
                )
    yield from _family(11, lines)


def render(snapshot: Snapshot | None, view: UsageView, legacy: Renderer | None = None) -> Iterator[str]:
    """The exposition text in chunks: each family's HELP and TYPE, then its samples a batch at a time, so
    a writer never holds more than one batch of lines (plus the per-device labels shared by 7 families).
    `legacy` (app/state/legacygauges.render) adds HAMi's old names (--legacy-metrics)."""
    yield from _devices(snapshot, view.nodes)
    yield from _pods(snapshot, view)
    yield from _quotas(snapshot, view)
    yield from _mig_instances(snapshot, view.nodes)
    if legacy is not None:
        yield from legacy(snapshot, view)


def write(
    state_dir: Path,
    snapshot: Snapshot | None,
    view: UsageView,
    legacy: Renderer | None = None,
) -> int:
    """Render into the file, atomically (temporary file in the same directory, then rename); its size in
    bytes."""
    temporary = state_dir / f".{GAUGES_FILE}.{os.getpid()}.tmp"
    size = 0
    try:
        with open(temporary, "wb") as out:
            for chunk in render(snapshot, view, legacy):
                size += out.write(chunk.encode())
        os.replace(temporary, state_dir / GAUGES_FILE)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return size


def touch(state_dir: Path) -> bool:
    """Confirm the file as current (nothing changed since it was rendered); False when it is gone."""
    try:
        os.utime(state_dir / GAUGES_FILE)
    except FileNotFoundError:
        return False
    return True


def max_age(interval: float) -> float:
    """How old the file may get before readers leave it out: three missed renders, at least a minute (a
    busy worker, a restart)."""
    return max(3 * interval, 60.0)


def age(state_dir: Path, now: float) -> float:
    """Seconds since the worker last rendered or confirmed the file; NaN when there is none."""
    try:
        return max(0.0, now - os.stat(state_dir / GAUGES_FILE).st_mtime)
    except FileNotFoundError:
        return math.nan


def open_fresh(state_dir: Path, now: float, limit: float) -> BinaryIO | None:
    """The file opened for reading (the open file outlives a later rename), None when it is missing or
    older than `limit` seconds."""
    try:
        file = open(state_dir / GAUGES_FILE, "rb")  # noqa: SIM115 - the caller streams and closes it
    except FileNotFoundError:
        return None
    if now - os.fstat(file.fileno()).st_mtime > limit:
        file.close()
        return None
    return file
