"""app/state/drafacts.py: the DRA facts travel from the worker to the HTTP side as one ledger status row."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.dra import Collision, DraFacts, Overlap
from app.state import drafacts
from app.state.drafacts import DraReader
from app.state.ledger import Ledger

text = st.text(max_size=8)
facts_strategy = st.builds(
    DraFacts,
    st.booleans(),
    st.lists(st.builds(Collision, text, text, st.lists(text, max_size=3).map(tuple)), max_size=3).map(tuple),
    st.lists(
        st.builds(Overlap, text, st.lists(text, max_size=3).map(tuple), st.integers(0, 64)), max_size=3
    ).map(tuple),
    st.floats(0, 2e9),
)


@given(facts_strategy)
def test_round_trip(facts: DraFacts) -> None:
    assert drafacts.decode(drafacts.encode(facts)) == facts


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(None, id="missing"),
        pytest.param("garbage", id="not-an-object"),
        pytest.param({"available": True, "collisions": [{"resource": "x"}]}, id="collision-without-fields"),
        pytest.param(
            {"available": True, "overlaps": [{"node": "n", "drivers": [], "devices": "many"}]}, id="bad-int"
        ),
    ],
)
def test_a_bad_row_reads_as_no_facts(raw: object) -> None:
    assert drafacts.decode(raw) == DraFacts()


def test_reader_sees_what_the_worker_published_after_its_cache_expires(tmp_path: Path) -> None:
    writer, reader_ledger = Ledger(tmp_path), Ledger(tmp_path)
    now = [100.0]
    try:
        reader = DraReader(reader_ledger, clock=lambda: now[0])
        assert reader.current() == DraFacts()  # nothing published yet
        published = DraFacts(True, (Collision("nvidia.com/gpu", "NVIDIA", ("c",)),), (), 5.0)
        drafacts.publish(writer, published)
        assert reader.current() == DraFacts()  # cached for up to MAX_AGE
        now[0] += drafacts.MAX_AGE + 0.1
        assert reader.current() == published
    finally:
        writer.close()
        reader_ledger.close()
