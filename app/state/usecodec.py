"""The byte form of a reservation's per-device use in the ledger (app/state/ledger.py, column `uses`): compact
JSON arrays, decoded on every refresh of every process's usage view, so kept short; older shorter rows
still decode.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import orjson

from app.core.model import DeviceUse, MigInstance, MigPlacement, MigSlice


def _slice(s: MigSlice) -> list[object]:
    item: list[object] = [s.placement.start, s.placement.size, s.profile]
    if s.instance is not None:
        item += [s.instance.uuid, s.instance.gpu_instance_id, s.instance.compute_instance_id]
    return item


def encode_uses(uses: Mapping[str, DeviceUse]) -> bytes:
    """`[[uuid, slots, mem, cores], ...]`; a use with MIG slices adds `mig_slots, [[start, size, profile
    (, mig uuid, gpu instance, compute instance)], ...]`, a use with usage tags (Metax sGPU's app class
    and QoS, `Vendor.usage_tags`) adds those two and `[tag, ...]`, and a use with core bitmasks (AWS
    Neuron, `DeviceUse.masks`) adds those three and `[mask, ...]` (shorter rows, written before MIG, tags
    or masks were kept, decode too)."""
    rows: list[list[object]] = []
    for uuid, u in sorted(uses.items()):
        row: list[object] = [uuid, u.slots, u.mem, u.cores]
        if u.mig or u.mig_slots or u.tags or u.masks:
            row += [u.mig_slots, [_slice(s) for s in u.mig]]
        if u.tags or u.masks:
            row.append(list(u.tags))
        if u.masks:
            row.append(list(u.masks))
        rows.append(row)
    return orjson.dumps(rows)


def _decode_slice(item: list[Any]) -> MigSlice:
    instance = MigInstance(item[3], item[4], item[5]) if len(item) > 3 else None
    return MigSlice(item[2], MigPlacement(item[0], item[1]), instance)


def decode_uses(raw: bytes) -> dict[str, DeviceUse]:
    uses = {}
    for row in orjson.loads(raw):
        uuid, slots, mem, cores, *more = row
        slices = tuple(_decode_slice(item) for item in more[1]) if more else ()
        tags = tuple(more[2]) if len(more) > 2 else ()
        masks = tuple(more[3]) if len(more) > 3 else ()
        uses[uuid] = DeviceUse(slots, mem, cores, more[0] if more else 0, slices, tags, masks)
    return uses


@lru_cache(maxsize=2048)
def decoded_uses(raw: bytes) -> Mapping[str, DeviceUse]:
    """`decode_uses`, remembered and read-only: the assume re-check decodes every row of the chosen node,
    and consecutive pods mostly land on nodes whose other rows have not changed."""
    return MappingProxyType(decode_uses(raw))
