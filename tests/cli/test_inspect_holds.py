"""`inspect`'s HOLDS section (app/cli/holdsection.py) from what a replica's /debug/state carries
(app/state/holdjson.py): encoded by the replica, decoded and shown by the CLI."""

from __future__ import annotations

import pytest

from app.cli import holdsection
from app.core.holds import NOMINATION, Hold
from app.core.model import DeviceUse
from app.state import holdjson

NOW = 1_000.0
HOLD = Hold(
    "nomination/u",
    "",
    NOMINATION,
    "u",
    "ns",
    "p",
    7,
    "n1",
    {"GPU-0": DeviceUse(1, 2048, 0)},
    ("v",),
    "why",
    0.0,
    NOW + 90,
)


def test_a_replica_s_holds_round_trip() -> None:
    state = {"nodes": [], "holds": holdjson.encode([HOLD], NOW)}
    (held,) = holdsection.from_state(state) or []
    assert (held.kind, held.pod, held.priority, held.node, held.victims, held.reason) == (
        NOMINATION, "ns/p", 7, "n1", ("v",), "why",
    )  # fmt: skip
    assert held.devices == {"GPU-0": (1, 2048, 0)} and held.expires_in == 90.0
    assert holdsection.from_state({"nodes": []}) is None  # an older replica: no section


@pytest.mark.parametrize(
    ("now", "shown"),
    [pytest.param(NOW, "1m30s", id="live: the time left"), pytest.param(NOW + 91, "expired", id="expired")],
)
def test_the_section_says_when_each_expires(now: float, shown: str) -> None:
    text = holdsection.render(holdjson.decode(holdjson.encode([HOLD], now)))
    assert text.startswith("HOLDS\n") and text.rstrip().endswith(shown)
    assert "GPU-0(2Gi)" in text and "ns/p" in text


def test_no_holds_says_so() -> None:
    assert holdsection.render([]) == "HOLDS\nno held reservations"
