"""The inventory snapshot: what the registration worker knows about nodes, shared with Gunicorn workers.

Only the registration worker writes it, only when something changed, by write-temp-then-rename, so a reader
never sees a torn file (ARCHITECTURE.md, shared state). It holds the registered devices of every usable
node, the reason for every node that is not usable, per-namespace quota limits and a generation number.
Each node carries its own revision so a reader can rebuild only what changed since its last load, like
kube-scheduler's generation-based UpdateSnapshot.

The file is read by every Gunicorn worker on each change, so it is laid out for that reader: a header line,
then one line per node starting with the node's revision and name, so that a reload parses only the nodes
whose revision moved (one node changed at 5,000 nodes: about 10 ms, against 60-90 ms to parse the whole
4 MB JSON document of format 1, and without its tens of megabytes of transient objects). Devices are
positional lists rather than objects, because decoding 40,000 of them is what a first load costs. Each line
is still JSON after its two tab-separated prefix fields (`cut -f3 inventory.json | jq` reads it).
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
FORMAT_VERSION = 2


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
        dict(d.custom) or None,
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
        (raw[12] if len(raw) > 12 else None) or {},  # custom info (absent in files of older versions)
    )


def encode_node(record: NodeRecord) -> dict[str, Any]:
    """A node's line body (its revision and name are the line's prefix fields)."""
    return {
        "zone": record.zone,
        "region": record.region,
        "cordoned": sorted(record.devices.cordoned),
        "devices": [_encode_device(d) for d in record.devices.devices],
        "info": {key: dict(info) for key, info in record.devices.info.items()},
    }


def decode_node(name: str, rev: int, raw: Mapping[str, Any]) -> NodeRecord:
    devices = NodeDevices(
        name,
        tuple(_decode_device(d) for d in raw["devices"]),
        frozenset(raw.get("cordoned") or ()),
        raw.get("info") or {},
    )
    return NodeRecord(devices, rev, raw.get("zone", ""), raw.get("region", ""))


def encode(snapshot: Snapshot) -> bytes:
    """The file: a header line, then one line per node, `<rev> TAB <name as JSON> TAB <node as JSON>`."""
    header = {
        "format": FORMAT_VERSION,
        "generation": snapshot.generation,
        "written_at": snapshot.written_at,
        "broken": dict(snapshot.broken),
        "quota_limits": {ns: dict(limits) for ns, limits in snapshot.quota_limits.items()},
    }
    lines = [orjson.dumps(header)]
    for name, record in snapshot.nodes.items():
        lines.append(b"%d\t%s\t%s" % (record.rev, orjson.dumps(name), orjson.dumps(encode_node(record))))
    return b"\n".join(lines) + b"\n"


def write(state_dir: Path, snapshot: Snapshot) -> None:
    """Publish atomically: write a temporary file in the same directory, then rename over the old one."""
    state_dir.mkdir(parents=True, exist_ok=True)
    target = state_dir / SNAPSHOT_FILE
    temporary = state_dir / f".{SNAPSHOT_FILE}.{os.getpid()}.tmp"
    temporary.write_bytes(encode(snapshot))
    os.replace(temporary, target)


def decode(data: bytes, previous: Snapshot | None = None) -> Snapshot:
    """Build a Snapshot from the file's bytes, parsing only the nodes whose revision is not `previous`'s
    (JSON strings escape tabs and newlines, so they cannot occur inside a line's fields)."""
    head, _, body = data.partition(b"\n")
    header = orjson.loads(head)
    if not isinstance(header, dict) or header.get("format") != FORMAT_VERSION:
        raise SnapshotError("inventory snapshot has an unknown format")
    old = previous.nodes if previous is not None else {}
    nodes: dict[str, NodeRecord] = {}
    for line in body.split(b"\n"):
        if not line:
            continue
        rev_field, name_field, node = line.split(b"\t", 2)
        name, rev = orjson.loads(name_field), int(rev_field)
        kept = old.get(name)
        if kept is None or kept.rev != rev:
            kept = decode_node(name, rev, orjson.loads(node))
        nodes[name] = kept
    return Snapshot(
        generation=header["generation"],
        nodes=nodes,
        broken=header.get("broken") or {},
        quota_limits=header.get("quota_limits") or {},
        written_at=header.get("written_at", 0.0),
    )


def read(state_dir: Path, previous: Snapshot | None = None) -> Snapshot:
    try:
        data = (state_dir / SNAPSHOT_FILE).read_bytes()
    except FileNotFoundError:
        raise SnapshotError("no inventory snapshot yet") from None
    except OSError as exc:
        raise SnapshotError(f"unreadable inventory snapshot: {exc}") from None
    try:
        return decode(data, previous)
    except (orjson.JSONDecodeError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise SnapshotError(f"unreadable inventory snapshot: {type(exc).__name__}: {exc}") from None


def file_stamp(path: str) -> tuple[int, int] | None:
    """(inode, mtime_ns) of the snapshot file at `path` (`state_dir / SNAPSHOT_FILE`, joined once by the
    caller: this runs on every filter): changes whenever a new snapshot is published."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_mtime_ns)
