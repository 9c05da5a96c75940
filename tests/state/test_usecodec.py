"""The ledger's byte form of device uses (app/state/usecodec.py), and its remembered read-only decoding
that the assume re-check reads."""

from __future__ import annotations

import pytest

from app.core.model import DeviceUse, MigPlacement, MigSlice
from app.state.usecodec import decode_uses, decoded_uses, encode_uses

USES = {
    "GPU-a": DeviceUse(1, 4096, 20),
    "GPU-b": DeviceUse(2, 1024, 0, 1, (MigSlice("1g.10gb", MigPlacement(0, 1)),)),
    "GPU-c": DeviceUse(1, 0, 1, 0, (), ("app", "qos"), (3,)),
}


def test_decoded_uses_is_decode_uses_and_cannot_be_changed() -> None:
    raw = encode_uses(USES)
    assert decode_uses(raw) == USES
    decoded = decoded_uses(raw)
    assert dict(decoded) == USES
    assert decoded_uses(raw) is decoded  # remembered
    with pytest.raises(TypeError):
        decoded["GPU-a"] = DeviceUse()  # type: ignore[index]
