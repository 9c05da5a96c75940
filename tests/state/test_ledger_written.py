"""The pod as this replica's confirmed deferred write left it (`Ledger.resolve_write(pod=...)`,
`take_written`, issue 20 scope 2): handed to one bind only, and only while the row is still the
`confirmed` one that write made — never after the row was replaced by a new filter, forgotten, or rebuilt,
never for a write that failed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.core.model import DeviceUse
from app.state.ledger import ASSUMED, CONFIRMED, Entry, Ledger

POD = {"metadata": {"uid": "u1", "name": "p", "namespace": "ns", "resourceVersion": "7"}}


def row(allocation: str, state: str = ASSUMED) -> Entry:
    return Entry("u1", "ns", "p", "n1", state, {"d": DeviceUse(1, 10, 0)}, allocation=allocation)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(tmp_path)
    yield opened
    opened.close()


def test_the_written_pod_is_handed_out_once(ledger: Ledger) -> None:
    ledger.upsert([row("a")])
    assert ledger.resolve_write("u1", "a", written=True, pod=POD)
    assert ledger.get("u1") == row("a", CONFIRMED)
    assert ledger.take_written("u1") == POD
    assert ledger.take_written("u1") is None  # a second bind (another worker, a retry) reads the pod
    assert ledger.get("u1") == row("a", CONFIRMED)  # the row itself is untouched


def _refiltered(ledger: Ledger) -> None:
    ledger.upsert([row("b")])  # filtered again: a new allocation, its write pending


def _refiltered_same(ledger: Ledger) -> None:
    ledger.upsert([row("a")])  # filtered again to the same allocation: pending again


def _forgotten(ledger: Ledger) -> None:
    ledger.remove(["u1"])


def _forgotten_and_back(ledger: Ledger) -> None:
    ledger.remove(["u1"])
    ledger.upsert([row("a", CONFIRMED)])  # e.g. another replica's write seen by the watch


def _rebuilt(ledger: Ledger) -> None:
    ledger.replace_all([row("a", CONFIRMED)])


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_refiltered, id="row-replaced-by-a-new-filter"),
        pytest.param(_refiltered_same, id="same-allocation-write-pending-again"),
        pytest.param(_forgotten, id="row-forgotten"),
        pytest.param(_forgotten_and_back, id="row-forgotten-then-recorded-again"),
        pytest.param(_rebuilt, id="rebuilt"),
    ],
)
def test_no_pod_once_the_row_is_not_the_one_the_write_confirmed(
    ledger: Ledger, change: Callable[[Ledger], None]
) -> None:
    ledger.upsert([row("a")])
    assert ledger.resolve_write("u1", "a", written=True, pod=POD)
    change(ledger)
    assert ledger.take_written("u1") is None


def test_a_failed_write_keeps_no_pod(ledger: Ledger) -> None:
    ledger.upsert([row("a")])
    assert ledger.resolve_write("u1", "a", written=False, pod=POD)
    assert ledger.get("u1") is None and ledger.take_written("u1") is None


def test_a_stale_write_keeps_no_pod(ledger: Ledger) -> None:
    ledger.upsert([row("b")])  # the row was replaced before the write of "a" came back
    assert not ledger.resolve_write("u1", "a", written=True, pod=POD)
    assert ledger.take_written("u1") is None
