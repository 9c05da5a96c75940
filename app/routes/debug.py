"""GET /debug/state[?node=N|?all=true]: what this replica's cache believes, read-only (HAMi #2923).

Without `node`: counts and the replica status. With `node`: its registered devices, the usage counted on
each device, the reservations that make it up, the held reservations on it, and why the node is unusable
if it is. With `all=true`: the status and every node in that form, plus nodes that only reservations name
(`hami-scheduler inspect --url` reads this), what the registration worker found of DRA serving our names and
nodes (`dra`), every held reservation (`holds`, app/state/holdjson.py), and the gangs (`gangs`: each
PodGroup's quorum, members bound and reserved, places its plan holds, and why its quorum was last refused).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flask import Blueprint, Response, request

from app.core.holds import gang_key
from app.core.model import DeviceUse
from app.routes.common import context, json_response
from app.state import drafacts, holdjson
from app.state.podgroups import PodGroups
from app.state.snapshot import Snapshot
from app.state.usage import UsageView

blueprint = Blueprint("debug", __name__)


@blueprint.get("/debug/state")
def state() -> Response:
    ctx = context()
    snapshot = ctx.refresh()
    view = ctx.usage
    node = request.args.get("node")
    status = dataclasses.asdict(ctx.status())
    now = ctx.clock()
    if request.args.get("all", "").lower() in ("1", "true", "yes"):
        everything = _everything(snapshot, view, status)
        return json_response(
            {
                **everything,
                "dra": drafacts.encode(ctx.dra()),
                "holds": holdjson.encode(view.holds, now),
                "gangs": _gangs(PodGroups(ctx.ledger), view, now),
            }
        )
    if not node:
        return json_response(
            {
                "status": status,
                "generation": snapshot.generation if snapshot else None,
                "nodes": len(snapshot.nodes) if snapshot else 0,
                "unusable": dict(snapshot.broken) if snapshot else {},
                "reservations": len(view.entries),
                "holds": len({h.key for h in view.holds if h.live(now)}),
            }
        )
    held = holdjson.encode((h for h in view.holds if h.node == node), now)
    return json_response({**_node(snapshot, view, node), "holds": held})


def _gangs(store: PodGroups, view: UsageView, now: float) -> list[dict[str, Any]]:
    """Every PodGroup the worker knows: quorum, members, bound, reserved (unbound members holding a row),
    held (the live slots of its plan) and the last refusal's reason."""
    refusals = store.refusals()
    found = []
    for gang in store.gangs():
        group = gang.group
        if not group.is_gang:
            continue
        reserved = sum(not m.bound and m.uid in view.entries for m in gang.members)
        why = refusals.get((group.namespace, group.name), ("", 0.0))[0]
        found.append(
            {
                "namespace": group.namespace,
                "name": group.name,
                "min_count": group.min_count,
                "priority": group.priority,
                "members": len(gang.members),
                "bound": gang.bound,
                "reserved": reserved,
                "held": sum(h.key == gang_key(group.key) and h.live(now) for h in view.holds),
                "why": why if gang.bound + reserved < group.min_count else "",
            }
        )
    return found


def _everything(snapshot: Snapshot | None, view: UsageView, status: dict[str, Any]) -> dict[str, Any]:
    names = list(snapshot.nodes) if snapshot else []
    names += sorted(
        {*(snapshot.broken if snapshot else ()), *(e.node for e in view.entries.values())} - set(names)
    )
    return {
        "status": status,
        "generation": snapshot.generation if snapshot else None,
        "nodes": [_node(snapshot, view, name) for name in names],
    }


def _node(snapshot: Snapshot | None, view: UsageView, node: str) -> dict[str, Any]:
    record = snapshot.nodes.get(node) if snapshot else None
    use = view.node_use(node)
    devices = []
    for d in record.devices.devices if record else ():
        taken = use.get(d.id, DeviceUse())
        devices.append(
            {
                "uuid": d.id,
                "index": d.index,
                "vendor": d.vendor,
                "type": d.type,
                "mode": d.mode,
                "numa": d.numa,
                "health": d.health,
                "cordoned": d.id in record.devices.cordoned if record else False,
                "count": d.count,
                "memory": d.devmem,
                "cores": d.devcore,
                "used": {"slots": taken.slots, "memory": taken.mem, "cores": taken.cores},
            }
        )
    reservations = [
        {
            "uid": e.uid,
            "pod": f"{e.namespace}/{e.name}",
            "state": e.state,
            "allocation": e.allocation,
            "devices": {uuid: dataclasses.asdict(u) for uuid, u in e.uses.items()},
        }
        for e in view.entries.values()
        if e.node == node
    ]
    return {
        "node": node,
        "registered": record is not None,
        "unusable": snapshot.broken.get(node) if snapshot else None,
        "zone": record.zone if record else None,
        "devices": devices,
        "reservations": reservations,
    }
