"""The ledger keeps the usage tags of a reservation (`Vendor.usage_tags`: Metax sGPU's app class and QoS,
HAMi's in-process PodInfos), so the live ledger equals one rebuilt from the pods' annotations and every
replica's Fit sees the tasks' QoS; rows written before tags were kept read back without them. Likewise
the core bitmasks of AWS Neuron's holders (`DeviceUse.masks`, issue 19 finding 2): usage ORs them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.core.model import DeviceUse, MigPlacement, MigSlice
from app.state.ledger import BOUND, LEDGER_FILE, Entry, Ledger

TAGGED = DeviceUse(1, 4096, 30, tags=("app=online", "qos=best-effort"))
BOTH = DeviceUse(1, 100, 0, 1, (MigSlice("1g.x", MigPlacement(3, 1)),), ("qos=",))


@pytest.mark.parametrize(
    ("use", "row"),
    [
        pytest.param(TAGGED, b'[["d",1,4096,30,0,[],["app=online","qos=best-effort"]]]', id="tags"),
        pytest.param(BOTH, b'[["d",1,100,0,1,[[3,1,"1g.x"]],["qos="]]]', id="mig-and-tags"),
        pytest.param(DeviceUse(1, 2, 3), b'[["d",1,2,3]]', id="neither"),
        pytest.param(DeviceUse(1, 0, 2, masks=(2,)), b'[["d",1,0,2,0,[],[],[2]]]', id="core-masks"),
    ],
)
def test_tags_are_kept(tmp_path: Path, use: DeviceUse, row: bytes) -> None:
    ledger = Ledger(tmp_path)
    try:
        ledger.upsert([Entry("u1", "ns", "p", "n1", BOUND, {"d": use})])
        assert ledger.get("u1") == Entry("u1", "ns", "p", "n1", BOUND, {"d": use})
        raw = sqlite3.connect(tmp_path / LEDGER_FILE).execute("SELECT uses FROM reservations").fetchone()[0]
        assert bytes(raw) == row
    finally:
        ledger.close()
