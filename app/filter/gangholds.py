"""A gang's plan as one held reservation: a hold of kind `gang` with a slot per planned member
(docs/held-reservations.md, docs/gangs.md).

Why: between two members' /filter calls of one pod group cycle, a lower-priority single pod — or the next
member itself — must not take the devices the plan counted on. Held, the plan's slots count as usage for
every pod of equal or lower priority and for the gang's other members (each member's own slot does not
count against it; app/core/holds.py rule 1); a member's assume consumes its own slot (rule 3), so it takes
its planned place or an equivalent one and the rest of the plan stays whole.

Invariants owned here:
- One plan per gang (`gang/<namespace>/<podgroup>`), made whole or not at all: `Ledger.create_holds`
  re-checks every node it touches in one transaction, against the rows there and every other live slot
  that blocks the asker (and keeps H1 against all of them), and replaces the gang's previous slots.
- A live plan is kept as long as it still places the quorum (`kept`): the same members waiting, one place
  per member still needed. Another call for the same members (kube-scheduler's pod group cycle filtering
  them one after another, its gang preemption simulation, a retry) changes nothing; a changed `minCount`,
  a member gone, bound or reserved meanwhile re-make it.
- A plan whose quorum is placed without it, or whose quorum can no longer be found, is released at once;
  a plan no member takes ends after the gang TTL (its slots' expiry; the leader's sweep deletes it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from app.context import Context
from app.core.gangplan import GangPlan
from app.core.holds import GANG, Asker, Hold, held_use
from app.core.model import NodeDevices, NodeUse
from app.core.recheck import misfit
from app.core.usage import sum_uses
from app.state.holdstore import RELEASED, NodeState

ATTEMPTS = 3  # plans made again when the capacity changed between the plan and its hold


def live_plan(context: Context, key: str, now: float) -> tuple[Hold, ...]:
    """The gang's live slots, as this process's usage view has them."""
    return tuple(h for h in context.usage.holds if h.key == key and h.live(now))


def kept(slots: Sequence[Hold], asker: str, waiting: Collection[str], needed: int) -> bool:
    """Does the live plan still place the quorum: every slot a waiting member's (neither bound nor reserved),
    and with the asker (a member to place, or "" when its reservation places it) one place per member
    still needed?"""
    members = {h.slot for h in slots}
    mine = {asker} if asker else set()
    return bool(slots) and members <= {*waiting, *mine} and len(members | mine) == needed


def blocking_use(context: Context, key: str, asker: Asker, now: float) -> dict[str, NodeUse]:
    """The live slots of other holds that block the asker, by node (its own gang's plan left out: it is
    what is being made again)."""
    others = [h for h in context.usage.holds if h.key != key]
    return dict(held_use(others, asker, now)) if others else {}


def hold(
    context: Context,
    key: str,
    owner: str,
    priority: int,
    result: GangPlan,
    asker: Asker,
    nodes: Mapping[str, NodeDevices],
    now: float,
) -> list[Hold] | None:
    """Store `result` as the gang's plan, re-checked in the creating transaction: on each node the rows
    (the asker's own left out) and the other live slots that block the asker, plus the new slots, must fit
    each device (with the vendors' placement rules). None when they no longer do (nothing is written)."""
    namespace, _, name = owner.partition("/")
    expires = now + context.settings.gang_ttl
    reason = f"gang {owner}: a place for each of {len(result.placements)} members"
    slots = [
        Hold(key, p.uid, GANG, owner, namespace, name, priority, p.node, p.uses, (), reason, now, expires)
        for p in result.placements
    ]
    vendors = context.settings.vendors

    def check(states: Mapping[str, NodeState]) -> list[Hold] | None:
        for node, state in states.items():
            devices = nodes.get(node)
            if devices is None:
                return None
            rows = [uses for uid, uses in state.rows.items() if uid != asker.uid]
            held = held_use(state.holds, asker, now).get(node, {})
            used = sum_uses([*rows, held])
            for slot in (s for s in slots if s.node == node):
                if misfit(devices, used, slot.uses, vendors):
                    return None
                used = sum_uses([used, slot.uses])
        return slots

    return context.ledger.create_holds(key, {p.node for p in result.placements}, check, now=now)


def release(context: Context, key: str, why: str, now: float) -> None:
    """End the gang's plan (a no-op when there is none)."""
    if any(h.key == key for h in context.usage.holds):
        context.ledger.release_holds([key], RELEASED, now, why)
