"""GET /healthz (the process answers) and GET /readyz (this replica may decide: leader, synced, fresh).

Only the leader is Ready, so the Service routes kube-scheduler and webhook traffic to it (HAMi answers 200
everywhere, quirk #14). The body says why a replica is not ready. A follow-mode leader whose node is
cordoned reports not ready while it keeps deciding (workers/handover.py), so the disruption budget lets a
drain evict it; its kube-scheduler then releases the Lease. Where the scheduler verbs have a server
of their own (HAMI_EXTENDER_ADDRESS, the chart's layout), Ready also means that server accepts
connections: kube-scheduler must not be routed to a replica whose extender is still starting.
"""

from __future__ import annotations

import socket

from flask import Blueprint, Response

from app.routes.common import context, text_response

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
def healthz() -> Response:
    return text_response("ok", 200)


@blueprint.get("/readyz")
def readyz() -> Response:
    ctx = context()
    status, now = ctx.status(), ctx.clock()
    if not status.may_decide(now):
        return text_response(f"not ready: {status.why_not(now)}", 503)
    if ctx.inventory.current() is None:
        return text_response("not ready: no node inventory published yet", 503)
    address = ctx.settings.http.extender_address
    if address and not _accepts(address):
        return text_response(f"not ready: the extender at {address} does not accept connections", 503)
    if status.draining:  # still decides (kube-scheduler's loopback calls), but lets a drain evict it
        return text_response(f"not ready: {status.draining}", 503)
    return text_response("ok", 200)


def _accepts(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=1.0):
            return True
    except (OSError, ValueError):
        return False
