"""HAMi's legacy metric names (its --legacy-metrics; here HAMI_LEGACY_METRICS), rendered after the new ones.

Dashboards written before HAMi renamed its gauges (GPUDeviceMemoryLimit, nodeGPUOverview, vGPUCoreAllocated,
QuotaUsed, …) keep working when this is on. Names, label names and values are HAMi's (reference §8 and its
cmd/scheduler/metrics.go): the same numbers as the new families, core values raw, every family with the
constant `zone="vGPU"`; `nodeGPUMigInstance` names an instance `<profile>-<gpu instance id>`. HAMi has no
legacy twin of `hami_resource_quota_limit`, so neither do we.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from app.core.mig import MIG_MODE
from app.core.model import DeviceInfo, DeviceUse
from app.state.gauges import MIB, ZONE, device_rows, escape, family
from app.state.snapshot import Snapshot
from app.state.usage import UsageView

FAMILIES = (
    ("GPUDeviceMemoryLimit", "Device memory limit for a certain GPU"),
    ("GPUDeviceCoreLimit", "Device memory core limit for a certain GPU"),
    ("GPUDeviceMemoryAllocated", "Device memory allocated for a certain GPU"),
    ("GPUDeviceSharedNum", "Number of containers sharing this GPU"),
    ("GPUDeviceCoreAllocated", "Device core allocated for a certain GPU"),
    ("nodeGPUOverview", "GPU overview on a certain node"),
    ("nodeGPUMemoryPercentage", "GPU Memory Allocated Percentage on a certain GPU"),
    ("nodeGPUMigInstance", "GPU Sharing mode. 0 for hami-core, 1 for mig, 2 for mps"),
    ("vGPUMemoryAllocated", "vGPU memory allocated from a container"),
    ("vGPUCoreAllocated", "vGPU core allocated from a container"),
    ("QuotaUsed", "resourcequota usage for a certain device"),
)
NAMES = frozenset(name for name, _ in FAMILIES)


def render(snapshot: Snapshot | None, view: UsageView) -> Iterator[str]:
    """Every legacy family, HELP and TYPE first, all its samples together."""
    rows = [
        (f'nodeid="{escape(node)}",deviceuuid="{escape(d.id)}",deviceidx="{d.index}"', d, use)
        for node, d, use in device_rows(snapshot, view.nodes)
    ]

    def typed(d_type: str) -> str:
        return f'devicetype="{escape(d_type)}",{ZONE}'

    values: tuple[Callable[[str, DeviceInfo, DeviceUse], str], ...] = (
        (lambda h, d, u: f"{h},{typed(d.type)}}} {d.devmem * MIB}"),
        (lambda h, d, u: f"{h},{typed(d.type)}}} {d.devcore}"),
        (lambda h, d, u: f'{h},devicecores="{d.devcore}",{typed(d.type)}}} {u.mem * MIB}'),
        (lambda h, d, u: f"{h},{typed(d.type)}}} {u.slots}"),
        (lambda h, d, u: f"{h},{typed(d.type)}}} {u.cores}"),
        (
            lambda h, d, u: (
                f'{h},devicecores="{d.devcore}",devicememorylimit="{d.devmem}",'
                f"{typed(d.type)}}} {u.mem * MIB}"
            )
        ),
    )
    for index, value in enumerate(values):
        name, text = FAMILIES[index]
        yield from family(name, text, (f"{name}{{{value(h, d, u)}\n" for h, d, u in rows))
    name, text = FAMILIES[6]
    yield from family(
        name, text, (f"{name}{{{h},{ZONE}}} {u.mem / d.devmem!r}\n" for h, d, u in rows if d.devmem > 0)
    )
    yield from _mig(rows)
    yield from _pods(view)
    yield from _quota(snapshot, view)


def _mig(rows: list[tuple[str, DeviceInfo, DeviceUse]]) -> Iterator[str]:
    name, text = FAMILIES[7]
    lines = []
    for head, d, use in rows:
        if d.mode != MIG_MODE:
            continue
        realized = {(s.profile, s.instance.gpu_instance_id) for s in use.mig if s.instance}
        for profile, gpu_instance in sorted(realized):
            lines.append(f'{name}{{{head},migname="{escape(profile)}-{gpu_instance}",{ZONE}}} 1\n')
    yield from family(name, text, lines)


def _pods(view: UsageView) -> Iterator[str]:
    rows = []
    for entry in view.entries.values():
        pod = (
            f'podnamespace="{escape(entry.namespace)}",nodename="{escape(entry.node)}",'
            f'podname="{escape(entry.name)}",containeridx="0"'
        )
        for uuid, use in entry.uses.items():
            if use.slots:
                rows.append((f'{pod},deviceuuid="{escape(uuid)}",{ZONE}', use))
    for index, attribute in ((8, "mem"), (9, "cores")):
        name, text = FAMILIES[index]
        scale = MIB if attribute == "mem" else 1
        yield from family(
            name, text, (f"{name}{{{labels}}} {getattr(u, attribute) * scale}\n" for labels, u in rows)
        )


def _quota(snapshot: Snapshot | None, view: UsageView) -> Iterator[str]:
    name, text = FAMILIES[10]
    limits = snapshot.quota_limits if snapshot else {}
    lines = []
    for namespace in sorted(limits.keys() | view.quota.keys()):
        ns_limits, ns_used = limits.get(namespace, {}), view.quota.get(namespace, {})
        for resource in sorted(ns_limits.keys() | ns_used.keys()):
            labels = f'quotanamespace="{escape(namespace)}",quotaName="{escape(resource)}"'
            limit = ns_limits.get(resource) or 0
            lines.append(f'{name}{{{labels},limit="{limit}",{ZONE}}} {ns_used.get(resource, 0)}\n')
    yield from family(name, text, lines)
