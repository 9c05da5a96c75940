"""The usage view's record of which nodes changed (app/state/usage.py `touched_since`), which the fast
path's per-node caches (table rows, their stamps, the screening verdicts) rely on to stay exact."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.model import DeviceUse
from app.state.ledger import BOUND, Entry, Ledger
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
