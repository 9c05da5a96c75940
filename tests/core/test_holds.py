"""Held reservations' pure rules (app/core/holds.py, docs/held-reservations.md): who a hold blocks, the
asker's held usage, and invariant H1 — which holds a node cannot keep, lowest priority first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from core_builders import VENDORS, gpu, node
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.holds import GANG, NOMINATION, Asker, Hold, blocks, held_use, overflowing, own, victims
from app.core.model import DeviceUse, NodeDevices

NOW = 1_000.0
USE = {"g0": DeviceUse(1, 1000, 10)}


def _hold(
    kind: str = NOMINATION,
    *,
    owner: str = "p",
    slot: str = "",
    priority: int = 10,
    expires: float = NOW + 30,
    node_name: str = "n",
    uses: Mapping[str, DeviceUse] = USE,
    victims_: tuple[str, ...] = (),
    key: str = "",
    created: float = 0.0,
) -> Hold:
    key = key or f"{kind}/{owner}"
    return Hold(
        key, slot, kind, owner, "default", owner, priority, node_name, uses, victims_, "", created, expires
    )


NOM = _hold(owner="p")
OLD = _hold(owner="p", expires=NOW)
MINE, THEIRS = _hold(GANG, owner="ns/g", slot="m1"), _hold(GANG, owner="ns/g", slot="m2")
BLOCKS = [
    pytest.param(NOM, Asker("q", 10), True, id="another's nomination, equal priority: blocked"),
    pytest.param(NOM, Asker("q", 5), True, id="another's nomination, higher priority: blocked"),
    pytest.param(NOM, Asker("q", 11), False, id="a higher-priority asker is never blocked"),
    pytest.param(NOM, Asker("p", 0), False, id="a nomination never blocks its preemptor"),
    pytest.param(OLD, Asker("q", 0), False, id="expired (now == expires_at): blocks nobody"),
    pytest.param(MINE, Asker("m1", 0, "ns/g"), False, id="its own place in its gang's plan"),
    pytest.param(THEIRS, Asker("m1", 99, "ns/g"), True, id="a place for another member, any priority"),
    pytest.param(THEIRS, Asker("x", 10), True, id="another gang, equal priority"),
    pytest.param(THEIRS, Asker("x", 11), False, id="another gang, lower priority"),
    pytest.param(THEIRS, Asker("x", 5, "ns/h"), True, id="a member of another gang"),
]


@pytest.mark.parametrize(("hold", "asker", "expected"), BLOCKS)
def test_blocks(hold: Hold, asker: Asker, expected: bool) -> None:
    assert blocks(hold, asker, NOW) is expected


OWN = [
    pytest.param(NOM, Asker("p"), True, id="its own nomination"),
    pytest.param(NOM, Asker("q"), False, id="another's nomination"),
    pytest.param(MINE, Asker("m1", 0, "ns/g"), True, id="its own gang place"),
    pytest.param(THEIRS, Asker("m1", 0, "ns/g"), False, id="another member's place"),
    pytest.param(MINE, Asker("m1"), False, id="a pod outside the gang"),
]


@pytest.mark.parametrize(("hold", "asker", "expected"), OWN)
def test_own(hold: Hold, asker: Asker, expected: bool) -> None:
    assert own(hold, asker) is expected


holds_st = st.builds(
    _hold,
    kind=st.sampled_from([NOMINATION, GANG]),
    owner=st.sampled_from(["p", "q", "ns/g", "ns/h"]),
    slot=st.sampled_from(["", "m1", "m2", "p"]),
    priority=st.integers(-5, 5),
    expires=st.sampled_from([NOW - 1, NOW, NOW + 1]),
    node_name=st.sampled_from(["n", "m"]),
    uses=st.builds(lambda m: {"g0": DeviceUse(1, m, 0)}, st.integers(0, 5000)),
)
askers = st.builds(
    Asker, st.sampled_from(["p", "q", "m1", "m2"]), st.integers(-5, 5), st.sampled_from(["", "ns/g"])
)


@settings(max_examples=300, deadline=None)
@given(holds=st.lists(holds_st, max_size=6), asker=askers)
def test_held_use_sums_exactly_the_blocking_live_slots(holds: list[Hold], asker: Asker) -> None:
    expected: dict[str, int] = {}
    for hold in holds:
        if hold.live(NOW) and not own(hold, asker):
            higher = asker.priority > hold.priority
            same_gang = hold.kind == GANG and bool(asker.gang) and hold.owner == asker.gang
            mine = hold.kind == NOMINATION and hold.owner == asker.uid
            if same_gang or not (higher or mine):
                expected[hold.node] = expected.get(hold.node, 0) + hold.uses["g0"].mem
        assert not (own(hold, asker) and blocks(hold, asker, NOW)), "an asker's own slot never blocks it"
    used = held_use(holds, asker, NOW)
    assert {n: u["g0"].mem for n, u in used.items()} == expected


# -- invariant H1 ------------------------------------------------------------------------------------------

NODE = node("n", gpu("g0", 0, count=4, mem=10000, core=100), gpu("g1", 1, count=4, mem=10000, core=100))


def _h1(
    devices: NodeDevices,
    rows: Mapping[str, Mapping[str, DeviceUse]],
    kept: Sequence[Hold],
    stale: Sequence[Hold],
) -> bool:
    """The reference H1: per device, plain sums of the rows no stored nomination claims and of the live
    slots within capacity."""
    claimed = victims([*kept, *stale])
    for device in devices.devices:
        uses = [u[device.id] for uid, u in rows.items() if uid not in claimed and device.id in u]
        uses += [h.uses[device.id] for h in kept if h.live(NOW) and device.id in h.uses]
        if sum(u.slots for u in uses) > device.count or sum(u.mem for u in uses) > device.devmem:
            return False
        if sum(u.cores for u in uses) > device.devcore:
            return False
    return True


@st.composite
def scenes(draw: st.DrawFn) -> tuple[dict[str, dict[str, DeviceUse]], list[Hold]]:
    """Rows that fit the node (invariant 1) and holds — nominations claiming some of them as victims, gang
    slots — of random sizes, priorities, ages and expiries."""
    rows: dict[str, dict[str, DeviceUse]] = {}
    free = {"g0": [4, 10000, 100], "g1": [4, 10000, 100]}
    for i in range(draw(st.integers(0, 4))):
        device = draw(st.sampled_from(["g0", "g1"]))
        mem, cores = draw(st.integers(0, free[device][1])), draw(st.integers(0, free[device][2]))
        if free[device][0] == 0:
            continue
        free[device] = [free[device][0] - 1, free[device][1] - mem, free[device][2] - cores]
        rows[f"r{i}"] = {device: DeviceUse(1, mem, cores)}
    holds = []
    for i in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from([NOMINATION, GANG]))
        device = draw(st.sampled_from(["g0", "g1"]))
        use = {device: DeviceUse(1, draw(st.integers(0, 10000)), draw(st.integers(0, 100)))}
        claimed = tuple(draw(st.sets(st.sampled_from(sorted(rows)), max_size=2))) if rows else ()
        holds.append(
            _hold(
                kind,
                owner=f"o{i}",
                slot="" if kind == NOMINATION else f"m{i}",
                key=f"{kind}/o{draw(st.integers(0, 3)) if kind == GANG else i}",
                priority=draw(st.integers(0, 3)),
                expires=draw(st.sampled_from([NOW - 1, NOW + 5])),
                node_name=draw(st.sampled_from(["n", "n", "other"])),
                uses=use,
                victims_=claimed if kind == NOMINATION else (),
                created=float(draw(st.integers(0, 3))),
            )
        )
    return rows, holds


@settings(max_examples=400, deadline=None)
@given(scene=scenes())
def test_h1_holds_once_the_overflowing_holds_are_released(
    scene: tuple[dict[str, dict[str, DeviceUse]], list[Hold]],
) -> None:
    rows, holds = scene
    released = overflowing(NODE, rows, holds, NOW)  # capacity alone: what the reference `_h1` sums
    live_here = [h for h in holds if h.node == "n" and h.live(NOW)]
    stale = [h for h in holds if h.node == "n" and not h.live(NOW)]
    assert set(released) <= {h.key for h in live_here}, "only live holds on the node are released"
    kept = [h for h in live_here if h.key not in released]
    assert _h1(NODE, rows, kept, stale)
    if _h1(NODE, rows, live_here, stale):
        assert released == [], "nothing is released where everything fits"
    priority = {h.key: max(s.priority for s in live_here if s.key == h.key) for h in live_here}
    assert [priority[k] for k in released] == sorted(priority[k] for k in released), "lowest priority first"
    for key in released:  # released only because it did not fit next to what ranks above it
        rank = (-priority[key], min(h.created_at for h in live_here if h.key == key), key)
        above = [
            h
            for h in kept
            if (-priority[h.key], min(s.created_at for s in live_here if s.key == h.key), h.key) < rank
        ]
        assert not _h1(NODE, rows, above + [h for h in live_here if h.key == key], stale)


def test_a_nomination_holds_only_what_its_victims_free() -> None:
    """A nomination of 8,000 MiB claims its victim's 8,000 MiB on a 10,000 MiB GPU: both fit together. A gang
    slot of higher priority cannot take 4,000 MiB of them (it would hold the victim's memory a second time):
    it is the one released. Once the victim is gone, a newcomer's row of 4,000 MiB (a higher-priority pod
    the nomination did not block) leaves no room for the nomination: it is released."""
    victim = {"victim": {"g0": DeviceUse(1, 8000, 0)}}
    nomination = _hold(owner="p", priority=1, uses={"g0": DeviceUse(1, 8000, 0)}, victims_=("victim",))
    assert overflowing(NODE, victim, [nomination], NOW, VENDORS) == []
    gang = _hold(GANG, owner="ns/g", slot="m1", priority=5, uses={"g0": DeviceUse(1, 4000, 0)})
    assert overflowing(NODE, victim, [nomination, gang], NOW, VENDORS) == [gang.key]
    newcomer = {"newcomer": {"g0": DeviceUse(1, 4000, 0)}}
    assert overflowing(NODE, newcomer, [nomination], NOW, VENDORS) == [nomination.key]


def test_the_vendor_judges_as_at_bind() -> None:
    """NVIDIA's Fit gives no task to a GPU whose cores are all taken, whatever it asks: neither may a
    hold (app.core.recheck.misfit, the bind's re-check)."""
    exclusive = {"r": {"g0": DeviceUse(1, 0, 100)}}
    small = _hold(owner="p", uses={"g0": DeviceUse(1, 100, 0)})
    assert overflowing(NODE, exclusive, [small], NOW) == []  # capacity alone would keep it
    assert overflowing(NODE, exclusive, [small], NOW, VENDORS) == [small.key]
