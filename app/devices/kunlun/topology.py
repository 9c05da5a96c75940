"""Kunlunxin's interconnect groups (reference vendors §2.8 `graghSelect`, `interconnect`, `calcscore`;
quirks §3.8), shared by whole XPUs and vXPUs.

An eight-XPU node is two wings of four (indexes 0-3 and 4-7) linked pairwise across (0-4, 1-5, 2-6, 3-7).
A request of 1, 2 or 4 devices is placed in one wing when a wing has exactly the number of fitting devices
HAMi's slot order looks for (1, 3, 2, 4 for one device; 2, 3, 4 for two; 4 for four), so the emptiest
wing is kept whole; otherwise two devices take a cross-wing pair and four one of HAMi's six linked groups
(with six devices free, one that leaves a linked pair). Eight devices need all eight free; other counts
never fit.

Difference (docs/compatibility.md, §3.8 #1-2): the wings, the pairs and the result are all by device
`Index`. HAMi counts its wings by *position* in the policy-sorted candidate list while pairs and the result
use indexes, so once a device is used the wings stop meaning indexes 0-3 / 4-7; with more than eight devices
it can report success with fewer devices than requested, and eight returns indexes 0-7 whether or not those
are the free ones. Devices with an index outside 0-7 are outside the topology and never chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from app.core.model import DeviceUsage

CROSS_PAIRS = ((0, 4), (1, 5), (2, 6), (3, 7))  # InterGroupConnection
QUADS = ((0, 1, 4, 5), (2, 3, 6, 7), (0, 2, 4, 6), (1, 3, 5, 7), (0, 3, 4, 7), (1, 2, 5, 6))
WING_PAIRS = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7))
ODD_ORDER = (1, 3, 2, 4)
SLOTS = 8

Fits = Callable[[DeviceUsage], bool]


def fitting(devices: Sequence[DeviceUsage], fits: Fits) -> list[DeviceUsage]:
    """The devices of indexes 0-7 that fit, by index (the first device of a repeated index)."""
    by_index: dict[int, DeviceUsage] = {}
    for device in devices:
        if 0 <= device.index < SLOTS:
            by_index.setdefault(device.index, device)
    return [by_index[i] for i in sorted(by_index) if fits(by_index[i])]


def _interconnect(free: list[DeviceUsage], nums: int) -> list[DeviceUsage]:
    by_index = {d.index: d for d in free}
    if nums == 2:
        for a in free:
            for b in free:
                if a.index != b.index and tuple(sorted((a.index, b.index))) in CROSS_PAIRS:
                    return [a, b]
    if nums == 4:
        unused = set(by_index)
        if len(unused) in (4, 5):
            for quad in QUADS:
                if unused.issuperset(quad):
                    return [by_index[i] for i in quad]
        if len(unused) == 6:
            last: tuple[int, ...] = ()
            for quad in QUADS:
                if unused.issuperset(quad):
                    last = quad
                    rest = unused.difference(quad)
                    if any(rest.issuperset(pair) for pair in (*CROSS_PAIRS, *WING_PAIRS)):
                        return [by_index[i] for i in quad]
            return [by_index[i] for i in last]
    return []


def select(devices: Sequence[DeviceUsage], nums: int, fits: Fits) -> list[DeviceUsage]:
    """HAMi `graghSelect` by index: the devices chosen, [] when the request cannot be placed."""
    free = fitting(devices, fits)
    if nums == SLOTS:
        return free if len(free) == SLOTS else []
    if nums not in (1, 2, 4):
        return []
    left = sum(1 for d in free if d.index < 4)
    right = len(free) - left
    if left >= nums or right >= nums:
        for slots in range(nums, 5):
            wanted = ODD_ORDER[slots - 1] if nums % 2 == 1 else slots
            if left == wanted:
                return free[:nums]
            if right == wanted:
                return [d for d in free if d.index >= 4][:nums]
    return _interconnect(free, nums)


def _bubbles(indexes: Iterable[int]) -> int:
    """`countbubble`: how badly a set of devices splits the wings (0 for a full wing, 2 for one device)."""
    values = list(indexes)
    left = sum(1 for i in values if i < 4)
    right = len(values) - left
    if left == 0 and right == 0:
        return 1

    def value(count: int) -> int:
        return 0 if count == 4 else 2 if count == 1 else 1

    return value(left) + value(right)


def score(previous: Iterable[int], current: Iterable[int]) -> float:
    """`calcscore`: 3000 when the pod's devices split the wings less than the used ones do, 2000 as much,
    1000 one more (or any other difference), 0 two more."""
    return {-1: 3000.0, 0: 2000.0, 1: 1000.0, 2: 0.0}.get(
        _bubbles(set(current)) - _bubbles(set(previous)), 1000.0
    )
