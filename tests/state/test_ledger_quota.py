"""The ledger's per-namespace quota totals (kept by triggers) always equal the sum over its reservations.

`assume` reads a namespace's quota usage from these totals instead of decoding every reservation of the
namespace, so they must follow every write: upserts that replace a row (INSERT OR REPLACE), removals,
state changes, rebuilds with kept rows, and a ledger created before the totals existed.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.model import DeviceUse
from app.state.ledger import BOUND, CONFIRMED, LEDGER_FILE, Entry, Ledger

NAMESPACES = ("a", "b")
quota = st.dictionaries(st.sampled_from(["nvidia.com/gpumem", "nvidia.com/gpucores"]), st.integers(0, 10**6))
entries = st.builds(
    Entry,
    uid=st.sampled_from([f"u{i}" for i in range(6)]),
    namespace=st.sampled_from(NAMESPACES),
    name=st.just("p"),
    node=st.sampled_from(["n1", "n2"]),
    state=st.just(BOUND),
    uses=st.just({"GPU-a": DeviceUse(1, 1, 1)}),
    quota=quota,
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.lists(entries, max_size=3)),
        st.tuples(st.just("forget"), st.sampled_from([f"u{i}" for i in range(7)])),
        st.tuples(st.just("state"), st.sampled_from([f"u{i}" for i in range(6)])),
        st.tuples(st.just("rebuild"), st.lists(entries, max_size=3)),
    ),
    max_size=12,
)


def expected(live: dict[str, Entry], namespace: str, exclude: str) -> dict[str, int]:
    used: dict[str, int] = {}
    for entry in live.values():
        if entry.namespace == namespace and entry.uid != exclude:
            for name, amount in entry.quota.items():
                used[name] = used.get(name, 0) + amount
    return used


def observed(ledger: Ledger, namespace: str, exclude: str) -> dict[str, int]:
    with ledger.transaction() as db:
        return ledger.quota_used(db, namespace, exclude)


def assert_totals(ledger: Ledger, live: dict[str, Entry]) -> None:
    for namespace in NAMESPACES:
        for exclude in ("", "u0", "u1"):
            got = observed(ledger, namespace, exclude)
            want = expected(live, namespace, exclude)
            # a resource whose reservations are all gone may stay with 0: the same for the quota check
            assert {k: v for k, v in got.items() if v} == {k: v for k, v in want.items() if v}
            assert set(want) <= set(got)


@settings(max_examples=150, deadline=None)
@given(operations)
def test_quota_totals_follow_every_write(steps: list[tuple[str, object]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp))
        live: dict[str, Entry] = {}
        try:
            for kind, argument in steps:
                if kind == "upsert":
                    assert isinstance(argument, list)
                    ledger.upsert(argument)
                    live.update({e.uid: e for e in argument})
                elif kind == "forget":
                    ledger.remove([str(argument)])
                    live.pop(str(argument), None)
                elif kind == "state":
                    ledger.set_state(str(argument), CONFIRMED)
                else:
                    assert isinstance(argument, list)
                    ledger.replace_all(argument, keep=lambda e: e.uid == "u0")
                    kept = {uid: e for uid, e in live.items() if uid == "u0"}
                    live = {**{e.uid: e for e in argument}, **kept}
                assert_totals(ledger, live)
        finally:
            ledger.close()


def test_a_ledger_from_before_the_totals_gets_them_filled(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    rows = [
        Entry("u1", "a", "p", "n1", BOUND, {}, {"nvidia.com/gpumem": 100}),
        Entry("u2", "a", "p", "n1", BOUND, {}, {"nvidia.com/gpumem": 50, "nvidia.com/gpucores": 5}),
    ]
    ledger.upsert(rows)
    ledger.close()
    raw = sqlite3.connect(tmp_path / LEDGER_FILE, isolation_level=None)
    raw.execute("DROP TABLE quota_used")
    for trigger in ("quota_insert", "quota_delete", "quota_update"):
        raw.execute(f"DROP TRIGGER {trigger}")
    raw.close()
    reopened = Ledger(tmp_path)
    try:
        assert observed(reopened, "a", "") == {"nvidia.com/gpumem": 150, "nvidia.com/gpucores": 5}
        assert observed(reopened, "a", "u2") == {"nvidia.com/gpumem": 100, "nvidia.com/gpucores": 0}
        reopened.remove(["u1"])
        assert observed(reopened, "a", "") == {"nvidia.com/gpumem": 50, "nvidia.com/gpucores": 5}
    finally:
        reopened.close()
