"""The handshake/health rule of reference §2.3, including the NVIDIA bookkeeping (app/core/health.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.core import health
from app.core.health import Reported

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"


def stamp(seconds_ago: float) -> str:
    return health.handshake_value(NOW - timedelta(seconds=seconds_ago))


def test_handshake_value_is_hami_layout_in_utc() -> None:
    assert health.handshake_value(NOW) == "Requesting_2026-03-01 12:00:00"
    local = datetime(2026, 3, 1, 14, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    assert health.handshake_value(local) == "Requesting_2026-03-01 12:00:00"


# (annotation value, allocatable, healthy, stamp written)
GENERIC = [
    pytest.param(None, 0, True, True, id="absent: stamp, healthy"),
    pytest.param("Reported 2026-03-01 11:00:00", 0, True, True, id="old plugin Reported: stamp"),
    pytest.param("Deleted_2026-03-01 11:00:00", 4, True, True, id="old cleanup Deleted: stamp"),
    pytest.param("Requesting", 0, True, False, id="no underscore: healthy"),
    pytest.param("Requesting_yesterday", 0, True, False, id="unparsable time: healthy"),
    pytest.param("Requesting_2026-13-01 00:00:00", 0, True, False, id="month 13: healthy"),
    pytest.param("Requesting_2026-3-1 12:00:00", 0, True, False, id="Go needs two-digit fields"),
    pytest.param(stamp(30), 0, True, False, id="fresh stamp, no allocatable: healthy"),
    pytest.param(stamp(59), 0, True, False, id="59 s: healthy"),
    pytest.param(stamp(60), 0, False, False, id="exactly 60 s and allocatable 0: unhealthy"),
    pytest.param(stamp(3600), 0, False, False, id="old stamp, allocatable 0: unhealthy"),
    pytest.param(stamp(3600), 8, True, False, id="old stamp, allocatable 8: healthy"),
    pytest.param(stamp(-600), 0, True, False, id="stamp in the future: healthy"),
    pytest.param(stamp(3600) + ".123", 0, False, False, id="fractional seconds parse like Go"),
    pytest.param("xRequesting_2026-03-01 10:00:00", 0, False, False, id="contains (not prefix) Requesting"),
]


@pytest.mark.parametrize(("value", "allocatable", "healthy", "stamped"), GENERIC)
def test_generic_handshake_rule(value: str | None, allocatable: int, healthy: bool, stamped: bool) -> None:
    verdict = health.check_handshake(value, allocatable, NOW, GPU)
    assert verdict.healthy is healthy
    assert (verdict.stamp == health.handshake_value(NOW)) is stamped
    assert bool(verdict.reason) is not healthy


# (allocatable now, bookkeeping before, register now, handshake) -> (healthy, bookkeeping after)
NVIDIA = [
    pytest.param(0, Reported(), "A", stamp(3600), False, Reported(), id="0 and was 0: generic (expired)"),
    pytest.param(0, Reported(), "A", stamp(10), True, Reported(), id="0 and was 0: generic (fresh)"),
    pytest.param(0, Reported(4, "A"), "A", stamp(10), False, Reported(0, "A"), id="dropped to 0: unhealthy"),
    pytest.param(4, Reported(), "A", stamp(10), True, Reported(4, "A"), id="count appeared: healthy, kept"),
    pytest.param(8, Reported(4, "A"), "B", stamp(3600), True, Reported(8, "B"), id="count changed: healthy"),
    pytest.param(
        4, Reported(4, "A"), "B", stamp(3600), True, Reported(4, "B"), id="register changed: stored"
    ),
    pytest.param(4, Reported(4, "A"), "A", stamp(3600), True, Reported(4, "A"), id="nothing changed"),
]


@pytest.mark.parametrize(("allocatable", "before", "register", "handshake", "healthy", "after"), NVIDIA)
def test_nvidia_bookkeeping(
    allocatable: int, before: Reported, register: str, handshake: str, healthy: bool, after: Reported
) -> None:
    verdict = health.check(handshake, allocatable, register, before, NOW, GPU)
    assert (verdict.healthy, verdict.reported) == (healthy, after)
    assert verdict.stamp is None  # a Requesting stamp is never rewritten


def test_stamp_is_written_even_when_unhealthy_by_bookkeeping() -> None:
    verdict = health.check(None, 0, "A", Reported(4, "A"), NOW, GPU)
    assert not verdict.healthy
    assert verdict.stamp == health.handshake_value(NOW)
    assert "dropped to 0" in verdict.reason


def test_plugin_without_allocatable_stays_out_instead_of_flapping() -> None:
    """HAMi quirk #21: HAMi deletes the handshake of an unhealthy node, re-stamps it and flaps every ~60 s.
    We never delete the stamp, so the node stays out until allocatable appears."""
    value, reported, timeline = None, Reported(), []
    for minute in range(5):
        now = NOW + timedelta(minutes=minute)
        verdict = health.check(value, 0, "A", reported, now, GPU)
        value, reported = verdict.stamp or value, verdict.reported
        timeline.append(verdict.healthy)
    assert timeline == [True, False, False, False, False]
    assert health.check(value, 4, "A", reported, NOW + timedelta(minutes=6), GPU).healthy
