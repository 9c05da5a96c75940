"""The inventory snapshot: what the registration worker knows about nodes, shared with Gunicorn workers.

Only the registration worker writes it, only when something changed, by write-temp-then-rename, so a reader
never sees a torn file (ARCHITECTURE.md, shared state). It holds the registered devices of every usable
node, the reason for every node that is not usable, per-namespace quota limits and a generation number.
Each node carries its own revision so a reader can rebuild only what changed since its last load, like
kube-scheduler's generation-based UpdateSnapshot.

Devices are stored as positional lists rather than objects: the file is read by every Gunicorn worker on
each change, and decoding 40,000 devices is the cost that matters.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from app.core.model import DeviceInfo, MigPlacement, MigProfile, NodeDevices

SNAPSHOT_FILE = "inventory.json"
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class NodeRecord:
    devices: NodeDevices
    rev: int
    zone: str = ""
    region: str = ""


@dataclass(frozen=True, slots=True)
class Snapshot:
    generation: int
    nodes: Mapping[str, NodeRecord] = field(default_factory=dict)
    broken: Mapping[str, str] = field(default_factory=dict)  # node -> why it is not usable
    quota_limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # ns -> resource -> limit
    written_at: float = 0.0


class SnapshotError(ValueError):
    """The snapshot file is missing or unreadable."""


def _encode_device(d: DeviceInfo) -> list[Any]:
    profiles = [
        [p.name, p.memory_mb, p.core, p.slice_count, [[pl.start, pl.size] for pl in p.placements]]
        for p in d.mig_profiles
    ]
    return [
        d.id,
        d.index,
        d.count,
        d.devmem,
        d.devcore,
        d.type,
        d.numa,
        d.mode,
        d.health,
        d.vendor,
        dict(d.pair_scores) or None,
        profiles or None,
    ]


def _decode_device(raw: list[Any]) -> DeviceInfo:
    profiles = tuple(
        MigProfile(p[0], p[1], p[2], p[3], tuple(MigPlacement(s, z) for s, z in p[4])) for p in raw[11] or ()
    )
    return DeviceInfo(
        raw[0],
        raw[1],
        raw[2],
        raw[3],
        raw[4],
        raw[5],
        raw[6],
        raw[7],
        raw[8],
        raw[9],
        profiles,
        raw[10] or {},
    )


def encode_node(record: NodeRecord) -> dict[str, Any]:
    return {
        "rev": record.rev,
        "zone": record.zone,
        "region": record.region,
        "cordoned": sorted(record.devices.cordoned),
        "devices": [_encode_device(d) for d in record.devices.devices],
    }


def decode_node(name: str, raw: Mapping[str, Any]) -> NodeRecord:
    devices = NodeDevices(
        name, tuple(_decode_device(d) for d in raw["devices"]), frozenset(raw.get("cordoned") or ())
    )
    return NodeRecord(devices, raw["rev"], raw.get("zone", ""), raw.get("region", ""))


def encode(snapshot: Snapshot) -> bytes:
    return orjson.dumps(
        {
            "format": FORMAT_VERSION,
            "generation": snapshot.generation,
            "written_at": snapshot.written_at,
            "nodes": {name: encode_node(record) for name, record in snapshot.nodes.items()},
            "broken": dict(snapshot.broken),
            "quota_limits": {ns: dict(limits) for ns, limits in snapshot.quota_limits.items()},
        }
    )


def write(state_dir: Path, snapshot: Snapshot) -> None:
    """Publish atomically: write a temporary file in the same directory, then rename over the old one."""
    state_dir.mkdir(parents=True, exist_ok=True)
    target = state_dir / SNAPSHOT_FILE
    temporary = state_dir / f".{SNAPSHOT_FILE}.{os.getpid()}.tmp"
    temporary.write_bytes(encode(snapshot))
    os.replace(temporary, target)


def read_raw(state_dir: Path) -> dict[str, Any]:
    try:
        data = orjson.loads((state_dir / SNAPSHOT_FILE).read_bytes())
    except FileNotFoundError:
        raise SnapshotError("no inventory snapshot yet") from None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise SnapshotError(f"unreadable inventory snapshot: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION:
        raise SnapshotError("inventory snapshot has an unknown format")
    return data


def decode(data: Mapping[str, Any], previous: Snapshot | None = None) -> Snapshot:
    """Build a Snapshot, reusing `previous` node records whose revision did not change."""
    old = previous.nodes if previous is not None else {}
    nodes: dict[str, NodeRecord] = {}
    for name, raw in data["nodes"].items():
        kept = old.get(name)
        nodes[name] = kept if kept is not None and kept.rev == raw["rev"] else decode_node(name, raw)
    return Snapshot(
        generation=data["generation"],
        nodes=nodes,
        broken=data.get("broken") or {},
        quota_limits=data.get("quota_limits") or {},
        written_at=data.get("written_at", 0.0),
    )


def read(state_dir: Path, previous: Snapshot | None = None) -> Snapshot:
    return decode(read_raw(state_dir), previous)


def file_stamp(state_dir: Path) -> tuple[int, int] | None:
    """(inode, mtime_ns) of the snapshot file: changes whenever a new snapshot is published."""
    try:
        stat = os.stat(state_dir / SNAPSHOT_FILE)
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_mtime_ns)
