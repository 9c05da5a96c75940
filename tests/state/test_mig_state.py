"""MIG slices in the shared state: the ledger's `uses` column, the usage view's per-node sums and the fast
path's device columns (app/state/ledger.py, usage.py, columns.py, screen.py)."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from core_builders import context, ctr, gpu, node, pod
from core_strategies import A100_MIG
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.model import DeviceUse, MigInstance, MigPlacement, MigSlice
from app.devices.nvidia import Nvidia
from app.state import gauges
from app.state.columns import NodeTable, with_rows_usage
from app.state.ledger import BOUND, LEDGER_FILE, Entry, Ledger
from app.state.screen import Screen
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView


def piece(start: int, size: int, instance: MigInstance | None = None) -> MigSlice:
    return MigSlice(f"{size}g.x", MigPlacement(start, size), instance)


REALIZED = DeviceUse(2, 9728, 28, 2, (piece(5, 1), piece(6, 1, MigInstance("MIG-a", 7, 0))))


def test_ledger_keeps_mig_slices_and_reads_rows_written_before_them(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    uses = {"GPU-a": REALIZED, "GPU-b": DeviceUse(1, 100, 0), "GPU-z": DeviceUse(mig=(piece(0, 4),))}
    ledger.upsert([Entry("u1", "ns", "p", "n1", BOUND, uses)])
    assert ledger.get("u1") == Entry("u1", "ns", "p", "n1", BOUND, uses)
    raw = sqlite3.connect(tmp_path / LEDGER_FILE).execute("SELECT uses FROM reservations").fetchone()[0]
    assert bytes(raw) == (
        b'[["GPU-a",2,9728,28,2,[[5,1,"1g.x"],[6,1,"1g.x","MIG-a",7,0]]],["GPU-b",1,100,0],'
        b'["GPU-z",0,0,0,0,[[0,4,"4g.x"]]]]'
    )
    with ledger.transaction() as db:  # a row as an older version wrote it
        db.execute("UPDATE reservations SET uses = ? WHERE uid = 'u1'", (b'[["GPU-a",1,2,3]]',))
    entry = ledger.get("u1")
    assert entry is not None and entry.uses == {"GPU-a": DeviceUse(1, 2, 3)}
    ledger.close()


slices = st.lists(st.builds(piece, st.integers(0, 6), st.sampled_from([1, 2, 4])), max_size=3).map(
    lambda found: tuple(sorted(found, key=MigSlice.key))
)
uses = st.builds(
    DeviceUse, st.integers(0, 3), st.integers(0, 9), st.integers(0, 9), st.integers(0, 3), slices
)
entries = st.lists(
    st.builds(
        Entry,
        uid=st.sampled_from(["u1", "u2", "u3", "u4"]),
        namespace=st.just("ns"),
        name=st.just("p"),
        node=st.sampled_from(["n1", "n2"]),
        state=st.just(BOUND),
        uses=st.dictionaries(st.sampled_from(["GPU-a", "GPU-b"]), uses, max_size=2),
    ),
    max_size=6,
)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), entries),
        st.tuples(st.just("remove"), st.lists(st.sampled_from(["u1", "u2", "u3", "u4"]), max_size=2)),
    ),
    min_size=1,
    max_size=6,
)


def _sums(live: Iterable[Entry]) -> dict[str, dict[str, DeviceUse]]:
    total: dict[str, dict[str, DeviceUse]] = {}
    for entry in live:
        node_total = total.setdefault(entry.node, {})
        for uuid, use in entry.uses.items():
            node_total[uuid] = node_total.get(uuid, DeviceUse()).plus(use)
    kept = {n: {u: v for u, v in t.items() if v != DeviceUse()} for n, t in total.items()}
    return {n: t for n, t in kept.items() if t}


@settings(max_examples=100, deadline=None)
@given(operations)
def test_the_view_follows_the_ledger_with_slices_as_multisets(steps: list[tuple[str, Any]]) -> None:
    """Refreshed after every write (added and removed incrementally), the view's per-node usage equals the
    sum of the live reservations, slices included."""
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp))
        view = UsageView()
        live: dict[str, Entry] = {}
        for kind, argument in steps:
            if kind == "upsert":
                ledger.upsert(argument)
                live.update({entry.uid: entry for entry in argument})
            else:
                ledger.remove(argument)
                for uid in argument:
                    live.pop(uid, None)
            view.refresh(ledger)
            assert view.nodes == _sums(live.values())
        ledger.close()


def test_columns_mark_mig_devices_and_devices_with_slices() -> None:
    nodes = (
        node("plain", gpu("P0"), gpu("P1", 1)),
        node("mig", gpu("M0", mode="mig", mig_profiles=A100_MIG), gpu("H0", 1)),
        node("held", gpu("S0"), gpu("S1", 1)),
    )
    snapshot = Snapshot(1, {n.name: NodeRecord(n, 1) for n in nodes}, {})
    view = UsageView()
    view.load([Entry("u", "ns", "p", "held", BOUND, {"S1": DeviceUse(mig=(piece(0, 1),))})])
    table = NodeTable()
    table.sync(snapshot, view)
    assert table.columns is not None
    assert table.columns.mig.tolist() == [[False, False], [True, False], [False, True]]
    columns, _ = with_rows_usage(table, {2: {}})
    assert columns.mig.tolist() == [[False, False], [True, False], [False, False]]
    # screening never rejects such nodes nor states their reason: they are evaluated fully
    huge = context(pod(ctr("c", gpu=1, mem=10**6)))
    screen = Screen(table.columns, huge, {"NVIDIA": Nvidia()}, table.max_devices)
    assert screen.may_fit.tolist() == [False, True, True]
    texts, known = screen.reasons()
    assert known.tolist() == [True, False, False] and texts[0] == "2/2 CardInsufficientMemory"
    assert np.array_equal(table.columns.present, np.ones((3, 2), bool))


def test_the_mig_instance_gauge() -> None:
    """`hami_node_gpu_mig_instance_info` (reference §8): 1 per realized instance on a `mig` device, with its
    identity and placement; slices not yet realized and non-MIG devices give none."""
    ready = MigSlice("1g.5gb", MigPlacement(6, 1), MigInstance("MIG-a", 7, 0))
    pending = MigSlice("2g.10gb", MigPlacement(0, 2))
    the_node = node("n1", gpu("M0", mode="mig", mig_profiles=A100_MIG), gpu("H0", 1))
    snapshot = Snapshot(1, {"n1": NodeRecord(the_node, 1)}, {})
    view = UsageView()
    view.load(
        [
            Entry("a", "ns", "pod-a", "n1", BOUND, {"M0": DeviceUse(1, 4864, 14, 1, (ready,))}),
            Entry("b", "ns", "pod-b", "n1", BOUND, {"M0": DeviceUse(1, 9984, 28, 1, (pending,))}),
            Entry(
                "c", "ns", "pod-c", "n1", BOUND, {"H0": DeviceUse(mig=(ready,))}
            ),  # fails closed, no sample
        ]
    )
    text = "".join(gauges.render(snapshot, view))
    lines = [line for line in text.splitlines() if line.startswith("hami_node_gpu_mig_instance_info")]
    assert lines == [
        'hami_node_gpu_mig_instance_info{node="n1",device_uuid="M0",device_index="0",mig_uuid="MIG-a",'
        'profile="1g.5gb",gpu_instance_id="7",compute_instance_id="0",placement_start="6",placement_size="1",'
        'zone="vGPU"} 1'
    ]
    assert "# TYPE hami_node_gpu_mig_instance_info gauge" in text
    assert (
        'device_uuid="H0"'
        not in text.split("# HELP hami_vgpu_memory_allocated_bytes")[1].split("# HELP hami_resource")[0]
    )
