"""Shared by the gauge tests: a small cluster state with odd corners, and exposition text as samples."""

from __future__ import annotations

from core_builders import gpu, node
from prometheus_client.parser import text_string_to_metric_families

from app.core.model import DeviceUse
from app.state.ledger import Entry
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView

MEM, CORES = "nvidia.com/gpumem", "nvidia.com/gpucores"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in found, f"duplicate sample {key}"
            found[key] = sample.value
    return found


def state(
    node_name: str = "n1", device_type: str = "NVIDIA A100", namespace: str = "team"
) -> tuple[Snapshot, UsageView]:
    """Two nodes (one device without memory: no ratio sample), reservations in two namespaces, a quota
    limit that is used, one that is not, and a namespace that uses without a limit."""
    nodes = {
        node_name: NodeRecord(node(node_name, gpu("GPU-1", 0, type=device_type), gpu("GPU-2", 1, mem=0)), 1),
        "n2": NodeRecord(node("n2", gpu("GPU-3", 0, mem=81920)), 1),
    }
    limits = {namespace: {"nvidia.com/gpumem": 50000}, "idle": {"nvidia.com/gpucores": 10}}
    two = {"GPU-1": DeviceUse(1, 3000, 0), "GPU-2": DeviceUse(1, 0, 5)}
    view = UsageView()
    view.load(
        [
            Entry(
                "a", namespace, "pod-a", node_name, "bound", {"GPU-1": DeviceUse(1, 1000, 10)}, {MEM: 1000}
            ),
            Entry("b", namespace, "pod-b", node_name, "assumed", two, {MEM: 3000, CORES: 5}),
            Entry(
                "c", "other", "pod-c", "n2", "confirmed", {"GPU-3": DeviceUse(1, 81920, 100)}, {MEM: 81920}
            ),
        ]
    )
    return Snapshot(3, nodes, {"bad": "corrupt"}, limits, 1.0), view
