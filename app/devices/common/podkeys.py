"""The pod keys of HAMi's own device-plugin protocol, declared alike by every vendor that speaks it.

A vendor on HAMi's protocol writes two lists at filter time: the allocation the scheduler decodes
(`hami.io/<vendor>-devices-allocated`, never changed afterwards) and the to-allocate list its device plugin
works through on the bound pod, emptying one container group per Allocate (`app.core.podkeys.consumed`).
"""

from __future__ import annotations

from app.core.podkeys import consumed
from app.core.vendor import ALLOCATION, PodKey


def hami_lists(to_allocate: str, allocated: str, plugin: str) -> tuple[PodKey, ...]:
    """The declarations of the two lists (an empty name: the vendor has no such list)."""
    keys = []
    if to_allocate:
        keys.append(PodKey(to_allocate, ALLOCATION, plugin=plugin, amend=consumed))
    if allocated:
        keys.append(PodKey(allocated, ALLOCATION))
    return tuple(keys)
