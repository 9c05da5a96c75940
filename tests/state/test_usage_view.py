"""The usage view's record of which nodes changed (app/state/usage.py `touched_since`), which the fast
path's per-node caches (table rows, their stamps, the screening verdicts) rely on to stay exact."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.model import DeviceUse
from app.core.usage import same_use, sum_uses
from app.state.ledger import ASSUMED, BOUND, CONFIRMED, Entry, Ledger
from app.state.usage import UsageView


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sets(st.sampled_from(["a", "b", "c", "d"]), min_size=1), min_size=1, max_size=8))
def test_touched_since_names_every_node_changed_after_the_mark(batches: list[set[str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp))
        try:
            view = UsageView()
            view.refresh(ledger)
            marks: list[tuple[int, set[str]]] = []
            for i, nodes in enumerate(batches):
                marks.append((view.changes, set()))
                use = {"gpu": DeviceUse(1, 100 + i, 0)}
                ledger.upsert([Entry(f"{n}-{i}", "default", "x", n, BOUND, use) for n in sorted(nodes)])
                view.refresh(ledger)
                for _, touched in marks:
                    touched |= nodes
            for mark, touched in marks:
                assert view.touched_since(mark) == frozenset(touched)
            assert view.touched_since(view.changes) == frozenset()
        finally:
            ledger.close()


_NODES = ["a", "b", "c"]
_UIDS = ["p0", "p1", "p2", "p3", "p4"]
_OPS = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(_UIDS), st.sampled_from(_NODES), st.integers(1, 3)),
    st.tuples(st.just("forget"), st.sampled_from(_UIDS)),
    st.tuples(st.just("confirm"), st.sampled_from(_UIDS)),
    st.tuples(st.just("rebuild"), st.sets(st.sampled_from(_UIDS)), st.sampled_from(_NODES)),
    st.tuples(st.just("prune"), st.integers(0, 3)),
    st.tuples(st.just("refresh")),
)


def _run(ledger: Ledger, view: UsageView, op: tuple[object, ...]) -> None:
    kind = op[0]
    if kind == "put":
        uid, node, mem = str(op[1]), str(op[2]), int(op[3])  # type: ignore[call-overload]
        ledger.upsert([Entry(uid, "default", uid, node, ASSUMED, {f"{node}-0": DeviceUse(1, mem * 100, 0)})])
    elif kind == "forget":
        ledger.remove([str(op[1])])
    elif kind == "confirm":
        ledger.set_state(str(op[1]), CONFIRMED, only_from=(ASSUMED,))
    elif kind == "rebuild":
        uids, node = sorted(op[1]), str(op[2])  # type: ignore[call-overload]
        use = {f"{node}-0": DeviceUse(1, 100, 0)}
        ledger.replace_all([Entry(uid, "default", uid, node, BOUND, use) for uid in uids])
    elif kind == "prune":
        ledger.prune_tombstones(keep=int(op[1]))  # type: ignore[call-overload]
    else:
        view.refresh(ledger)


@settings(max_examples=150, deadline=None)
@given(st.lists(_OPS, max_size=14), st.lists(_OPS, max_size=4))
def test_rows_stamp_matches_the_ledger_only_for_the_rows_the_view_holds(
    before: list[tuple[object, ...]], after: list[tuple[object, ...]]
) -> None:
    """The assume's shortcut (app/state/ledger.py `node_stamp`): right after a refresh the view's count and
    newest sequence number of a node's other rows equal the ledger's; after further writes they are equal
    only while the committed rows are exactly the view's, so their summed usage is the view's."""
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp))
        try:
            view = UsageView()
            for op in before:
                _run(ledger, view, op)
            view.refresh(ledger)
            assert sorted(view.entries.values(), key=lambda e: e.uid) == ledger.all_entries()
            for node in _NODES:
                for uid in ["", *_UIDS]:
                    with ledger.transaction() as db:
                        assert view.rows_stamp(node, uid) == ledger.node_stamp(db, node, uid)
            for op in after:
                _run(ledger, view, op)
            for node in _NODES:
                for uid in ["", *_UIDS]:
                    with ledger.transaction() as db:
                        stamp = ledger.node_stamp(db, node, uid)
                        committed = ledger.node_uses_by_uid(db, node, uid)
                    if view.rows_stamp(node, uid) != stamp:
                        continue
                    held = {
                        e.uid: dict(e.uses) for e in view.entries.values() if e.node == node and e.uid != uid
                    }
                    assert held == committed
                    assert same_use(sum_uses(held.values()), sum_uses(committed.values()))
        finally:
            ledger.close()


def test_rows_loaded_without_sequence_numbers_never_match() -> None:
    view = UsageView()
    view.load([Entry("p", "default", "p", "a", BOUND, {"a-0": DeviceUse(1, 100, 0)})])
    assert view.rows_stamp("a") is None
    assert view.rows_stamp("a", "p") == (0, 0) and view.rows_stamp("b") == (0, 0)
