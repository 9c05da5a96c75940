"""Held reservations as plain data: who a hold blocks, what it adds to an asker's usage, and which holds a
node cannot keep (docs/held-reservations.md).

A hold is capacity held for someone who is not being filtered right now: a *nomination* (the devices a
preemption frees, held for its preemptor) or a *gang plan* (places for a gang's quorum). It is stored as
slots (`Hold`: devices on one node, one row of the ledger's `holds` table); a hold is all slots of one key.
The rules here are pure; app/state/holdstore.py applies them in the ledger's transactions.

Rule 1 (who is blocked): a live slot counts as usage for the asker when it is a nomination owned by
another pod, or a slot of another gang, of priority >= the asker's; or a slot of the asker's own gang
assigned to another member. A nomination never counts against its preemptor, a higher-priority asker is
never blocked (kube-scheduler's nominated pods block only pods of equal or lower priority), and an expired
slot (now >= `expires_at`) blocks nobody.

Invariant H1 (`overflowing` keeps it): on every node, the rows no stored nomination claims as victims
plus every live slot fit each device's slots, memory and cores — judged as the bind's re-check judges an
allocation (`app.core.recheck.misfit`: the vendor's placement rules where it has them). Holds that do not
fit are released whole, lowest priority first (a gang plan missing a slot is no plan). A victim's capacity
is being freed for as long as its nomination is stored — expired but not yet swept included, so time
alone never breaks H1; deleting a nomination makes its victims count again, which is why every release
is followed by this check on its nodes (app/state/holdstore.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.core.model import DeviceUse, NodeDevices
from app.core.recheck import misfit
from app.core.usage import sum_uses
from app.core.vendor import Vendor

NOMINATION, GANG = "nomination", "gang"
KINDS = (NOMINATION, GANG)


@dataclass(frozen=True, slots=True)
class Hold:
    """One slot of a hold (a row of the `holds` table, docs/held-reservations.md)."""

    key: str  # the hold: `nomination/<preemptor uid>` or `gang/<namespace>/<podgroup>`
    slot: str  # "" for a nomination; the member pod's UID for a gang slot
    kind: str  # NOMINATION or GANG
    owner: str  # the preemptor's UID, or `<namespace>/<podgroup>`
    namespace: str  # the preemptor pod's, or the PodGroup's
    name: str
    priority: int
    node: str
    uses: Mapping[str, DeviceUse]  # device UUID -> use, as a reservation row's
    victims: tuple[str, ...] = ()  # a nomination's victim UIDs; empty for a gang
    reason: str = ""
    created_at: float = 0.0
    expires_at: float = 0.0

    def live(self, now: float) -> bool:
        return now < self.expires_at


@dataclass(frozen=True, slots=True)
class Asker:
    """The pod being filtered: its UID, its priority (`spec.priority`, 0 when unset) and its gang
    (`<namespace>/<spec.schedulingGroup.podGroupName>`, "" for none)."""

    uid: str
    priority: int = 0
    gang: str = ""


def nomination_key(preemptor_uid: str) -> str:
    return f"{NOMINATION}/{preemptor_uid}"


def gang_key(gang: str) -> str:
    """`gang` is `<namespace>/<podgroup>`."""
    return f"{GANG}/{gang}"


def blocks(hold: Hold, asker: Asker, now: float) -> bool:
    """Rule 1: does this slot count as usage for `asker`?"""
    if not hold.live(now):
        return False
    if hold.kind == GANG and asker.gang and hold.owner == asker.gang:
        return hold.slot != asker.uid  # a place planned for another member of its own gang
    if hold.kind == NOMINATION and hold.owner == asker.uid:
        return False
    return hold.priority >= asker.priority


def own(hold: Hold, asker: Asker) -> bool:
    """Rule 3 (consumed): is this slot the asker's own — a slot of a nomination it owns, or its own place
    in its gang's plan? Its assume deletes it."""
    if hold.kind == NOMINATION:
        return hold.owner == asker.uid
    return bool(asker.gang) and hold.owner == asker.gang and hold.slot == asker.uid


def blocking(holds: Iterable[Hold], asker: Asker, now: float) -> list[Hold]:
    return [hold for hold in holds if blocks(hold, asker, now)]


def held_use(holds: Iterable[Hold], asker: Asker, now: float) -> dict[str, dict[str, DeviceUse]]:
    """Rule 2's addition: node -> device UUID -> the uses of the slots that block `asker` there."""
    by_node: dict[str, list[Mapping[str, DeviceUse]]] = {}
    for hold in blocking(holds, asker, now):
        by_node.setdefault(hold.node, []).append(hold.uses)
    return {node: sum_uses(uses) for node, uses in by_node.items()}


def victims(holds: Iterable[Hold]) -> frozenset[str]:
    """The UIDs of the rows the nominations among `holds` claim as victims (H1 does not count them)."""
    return frozenset(uid for hold in holds if hold.kind == NOMINATION for uid in hold.victims)


@dataclass(frozen=True, slots=True)
class _Key:
    """One hold's slots on a node, with the order H1 keeps holds in."""

    key: str
    priority: int
    created_at: float
    slots: tuple[Hold, ...]


def _fits(
    node: NodeDevices,
    rows: Mapping[str, Mapping[str, DeviceUse]],
    kept: Sequence[_Key],
    claimed: frozenset[str],
    vendors: Sequence[Vendor],
) -> bool:
    """H1 on `node` with exactly the live holds `kept`: the rows neither they nor a stored expired
    nomination (`claimed`) claim as victims, then each slot in turn, judged as the bind's re-check judges
    an allocation."""
    slots = [slot for key in kept for slot in key.slots]
    claimed = claimed | victims(slots)
    used: dict[str, DeviceUse] = sum_uses(uses for uid, uses in rows.items() if uid not in claimed)
    for slot in slots:
        if misfit(node, used, slot.uses, vendors):
            return False
        used = sum_uses((used, slot.uses))
    return True


def overflowing(
    node: NodeDevices,
    rows: Mapping[str, Mapping[str, DeviceUse]],
    holds: Iterable[Hold],
    now: float,
    vendors: Sequence[Vendor] = (),
) -> list[str]:
    """The keys of the live holds on `node` to release so that H1 holds there, lowest priority first.

    `rows`: the node's reservation rows by UID, all of them; `holds`: the stored slots (expired ones too:
    a nomination's victims stay claimed — their capacity is being freed — until it is deleted; only live
    slots hold capacity). Holds are kept greedily from the highest priority (then the oldest, then by
    key); a hold any of whose slots on the node does not fit next to the rows and the holds kept before it
    is released whole (and the victims it claimed count again for the holds after it).
    """
    grouped: dict[str, list[Hold]] = {}
    stale: list[Hold] = []
    for hold in holds:
        if hold.node == node.name:
            (grouped.setdefault(hold.key, []) if hold.live(now) else stale).append(hold)
    claimed = victims(stale)
    keys = [
        _Key(key, max(s.priority for s in slots), min(s.created_at for s in slots), tuple(slots))
        for key, slots in grouped.items()
    ]
    keys.sort(key=lambda k: (-k.priority, k.created_at, k.key))
    if _fits(node, rows, keys, claimed, vendors):
        return []
    kept: list[_Key] = []
    dropped: list[_Key] = []
    for key in keys:
        if _fits(node, rows, [*kept, key], claimed, vendors):
            kept.append(key)
        else:
            dropped.append(key)
    return [key.key for key in sorted(dropped, key=lambda k: (k.priority, -k.created_at, k.key))]
