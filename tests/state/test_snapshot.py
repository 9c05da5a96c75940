"""The inventory snapshot file (app/state/snapshot.py): round trip, per-node incremental reload, bad files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest
from core_builders import gpu, node

from app.core.model import MigPlacement, MigProfile
from app.state import snapshot
from app.state.snapshot import NodeRecord, Snapshot, SnapshotError

MIG = MigProfile("1g.10gb", 10240, 14, 1, (MigPlacement(0, 1), MigPlacement(6, 1)))
NODES = {
    "a": NodeRecord(node("a", gpu("GPU-a0", 0, pair={"GPU-a1": 40}), gpu("GPU-a1", 1)), 1, "zone-a", "r"),
    "tab\there": NodeRecord(node("tab\there", dataclasses.replace(gpu("GPU-t", 0), mig_profiles=(MIG,))), 1),
    "c": NodeRecord(node("c", gpu("GPU-c", 0, health=False), cordoned=["GPU-c"]), 1),
}
SNAPSHOT = Snapshot(1, NODES, {"broken": "node unregistered: bad"}, {"ns": {"nvidia.com/gpumem": 5}}, 12.5)


def test_round_trip(tmp_path: Path) -> None:
    snapshot.write(tmp_path, SNAPSHOT)
    assert snapshot.read(tmp_path) == SNAPSHOT


def test_a_reload_parses_only_the_nodes_whose_revision_moved(tmp_path: Path) -> None:
    snapshot.write(tmp_path, SNAPSHOT)
    first = snapshot.read(tmp_path)
    changed = NodeRecord(node("a", gpu("GPU-a0", 0, mem=1000)), 2, "zone-a", "r")
    snapshot.write(tmp_path, dataclasses.replace(SNAPSHOT, generation=2, nodes={**NODES, "a": changed}))
    second = snapshot.read(tmp_path, first)
    assert second.nodes["a"] == changed
    assert second.nodes["c"] is first.nodes["c"] and second.nodes["tab\there"] is first.nodes["tab\there"]


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        orjson.dumps({"format": 1, "generation": 1, "nodes": {}}),  # the format before per-node lines
        orjson.dumps({"format": 2, "generation": 1}) + b'\n1\t"a"\n',  # a line without a body
        orjson.dumps({"format": 2, "generation": 1}) + b'\nx\t"a"\t{"devices":[]}\n',
        orjson.dumps({"format": 2}) + b"\n",
    ],
    ids=["empty", "not-json", "format-1", "short-line", "bad-revision", "no-generation"],
)
def test_a_bad_file_is_a_snapshot_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / snapshot.SNAPSHOT_FILE).write_bytes(content)
    with pytest.raises(SnapshotError):
        snapshot.read(tmp_path)


def test_no_file_is_a_snapshot_error(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no inventory snapshot yet"):
        snapshot.read(tmp_path)
