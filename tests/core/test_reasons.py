"""GenReason and the reason keys (reference §4.7, §4.8)."""

from __future__ import annotations

import pytest

from app.core import reasons


@pytest.mark.parametrize(
    ("counts", "total", "expected"),
    [
        ({}, 4, ""),
        ({"CardInsufficientMemory": 2}, 2, "2/2 CardInsufficientMemory"),
        (
            {"ResourceQuotaNotFit": 3, "AllocatedCardsInsufficientRequest": 1},
            4,
            "1/4 AllocatedCardsInsufficientRequest, 3/4 ResourceQuotaNotFit",
        ),
        ({"CardNotHealth": 2, "CardCordoned": 10}, 12, "10/12 CardCordoned, 2/12 CardNotHealth"),
        ({"B": 1, "A": 1}, 2, "1/2 A, 1/2 B"),
        ({"A": 2, "B": 1}, 3, "1/3 B, 2/3 A"),
    ],
    ids=[
        "nothing",
        "one",
        "spec-example",
        "sorted-as-strings-not-numbers",
        "same-count-by-key",
        "count-first",
    ],
)
def test_gen_reason(counts: dict[str, int], total: int, expected: str) -> None:
    assert reasons.gen_reason(counts, total) == expected


def test_reason_spellings_are_hamis() -> None:
    assert reasons.CARD_UUID_MISMATCH == "CardUuidMismatch"
    assert reasons.NODE_UNREGISTERED == "node unregistered"
    assert reasons.NODE_USAGE_UNAVAILABLE == "node usage unavailable"
    assert reasons.DEVICE_TYPE_NOT_FOUND == "Device type not found"
    assert (
        reasons.device_not_found("GPU-x", "n1") == 'Device with UUID "GPU-x" not found on node n1 after Fit'
    )
