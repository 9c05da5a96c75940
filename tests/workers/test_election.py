"""Leadership: follow-mode validity math, and the status rows written on every transition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.state.ledger import Ledger
from app.state.status import ReplicaStatus
from workers.election import AlwaysLeader, Leadership, follow_verdict, holds, parse_micro_time
from workers.metrics import WorkerMetrics
from workers.status import StatusLoop

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
ME = "hami-scheduler-7d9f-abcde"


def lease(holder: Any = f"{ME}_2f1c", renewed: Any = 0.0, duration: Any = 15) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if holder is not None:
        spec["holderIdentity"] = holder
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    if isinstance(renewed, float):
        spec["renewTime"] = (NOW - timedelta(seconds=renewed)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    elif renewed is not None:
        spec["renewTime"] = renewed
    return {"metadata": {"name": "hami-scheduler", "namespace": "kube-system"}, "spec": spec}


FOLLOW = [
    pytest.param(lease(), True, id="kube-scheduler identity <hostname>_<uuid>, fresh"),
    pytest.param(lease(holder=ME), True, id="exact identity"),
    pytest.param(lease(renewed=14.0), True, id="renewed 14 s ago of 15"),
    pytest.param(lease(renewed=15.0), False, id="expired exactly at renewTime + duration"),
    pytest.param(lease(renewed=300.0), False, id="not renewed: expired (quirk #42)"),
    pytest.param(lease(holder="other-pod_2f1c"), False, id="someone else"),
    pytest.param(lease(holder=f"{ME}0_2f1c"), False, id="prefix of a longer hostname is not us"),
    pytest.param(lease(holder=""), False, id="empty holder"),
    pytest.param(lease(holder=None), False, id="nil holder"),
    pytest.param(lease(duration=None), False, id="nil duration"),
    pytest.param(lease(duration="15"), False, id="duration not an integer"),
    pytest.param(lease(renewed=None), False, id="nil renewTime"),
    pytest.param(lease(renewed="yesterday"), False, id="unparsable renewTime"),
    pytest.param(None, False, id="no Lease"),
    pytest.param({"metadata": {}}, False, id="no spec"),
]


@pytest.mark.parametrize(("observed", "leading"), FOLLOW)
def test_follow_mode_validity(observed: dict[str, Any] | None, leading: bool) -> None:
    verdict = follow_verdict(observed, ME, NOW.timestamp())
    assert verdict.leading is leading


def test_follow_mode_expiry_is_renew_time_plus_duration() -> None:
    verdict = follow_verdict(lease(renewed=5.0, duration=15), ME, NOW.timestamp())
    assert verdict.expires_at == pytest.approx(NOW.timestamp() + 10)
    assert verdict.holder == f"{ME}_2f1c"


def test_micro_time_parsing() -> None:
    assert parse_micro_time("2026-03-01T12:00:00.000000Z") == NOW.timestamp()
    assert parse_micro_time("2026-03-01T12:00:00Z") == NOW.timestamp()
    assert parse_micro_time("2026-03-01T13:00:00+01:00") == NOW.timestamp()
    assert parse_micro_time("2026-03-01T12:00:00") == NOW.timestamp(), "no zone: UTC"
    assert parse_micro_time(12) is None and parse_micro_time("") is None


def test_holds_requires_an_identity() -> None:
    assert not holds("_x", "")
    assert holds("a_b_c", "a_b")


# -- the status loop --------------------------------------------------------------------------------------


class ScriptedElector:
    def __init__(self) -> None:
        self.current = Leadership(False, "other", 0.0)

    def start(self) -> None:
        """Nothing runs."""

    def stop(self, timeout: float) -> None:
        """Nothing runs."""

    def leadership(self, now: float) -> Leadership:
        return self.current


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def rows(ledger: Ledger) -> ReplicaStatus:
    return ReplicaStatus.from_rows(ledger.status())


def test_status_rows_through_a_term(ledger: Ledger) -> None:
    elector = ScriptedElector()
    clock = [1000.0]
    promoted: list[int] = []
    loop = StatusLoop(
        ledger,
        elector,
        ME,
        WorkerMetrics(),
        period=1.0,
        clock=lambda: clock[0],
        on_promoted=lambda: promoted.append(1),
    )
    loop.evaluate()
    status = rows(ledger)
    assert (status.leader, status.synced, status.identity, status.leader_identity) == (
        False,
        False,
        ME,
        "other",
    )
    assert loop.leading_term() == 0

    elector.current = Leadership(True, ME, 1015.0)
    loop.evaluate()
    assert promoted == [1] and loop.leading_term() == 1
    status = rows(ledger)
    assert (status.leader, status.synced, status.lease_expires_at) == (True, False, 1015.0)

    loop.alive()
    loop.published(7)
    assert loop.mark_synced(1)
    loop.evaluate()
    status = rows(ledger)
    assert (status.synced, status.generation, status.heartbeat) == (True, 7, 1000.0)
    assert status.may_decide(1001.0)

    elector.current = Leadership(False, "other", 0.0)
    assert loop.leading_term() == 0, "a lapse counts before the loop writes it"
    loop.evaluate()
    status = rows(ledger)
    assert (status.leader, status.synced) == (False, False)
    assert not loop.mark_synced(1), "a finished term cannot be marked synced"

    elector.current = Leadership(True, ME, 1030.0)
    loop.evaluate()
    assert promoted == [1, 1] and loop.leading_term() == 2 and not rows(ledger).synced


def test_stop_writes_not_leader(ledger: Ledger) -> None:
    loop = StatusLoop(
        ledger,
        AlwaysLeader(ME),
        ME,
        WorkerMetrics(),
        period=0.05,
        clock=lambda: 5.0,
        on_promoted=lambda: None,
    )
    loop.start()
    loop.wake()
    deadline = time.monotonic() + 10
    while not rows(ledger).leader and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loop.mark_synced(1)
    loop.stop()
    status = rows(ledger)
    assert (status.leader, status.synced, status.leader_identity) == (False, False, ME)
