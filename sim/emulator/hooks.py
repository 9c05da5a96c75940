"""Test hooks over HTTP under ``/_sim/``, for tests that run the emulator as a separate process.

They bypass fault injection and the request log, so a test's own assertions never trip a fault it set up.

    GET    /_sim/faults                -> {"faults_injected": n, "by_action": {...}, "rules": [...]}
    POST   /_sim/faults      {rule}    -> 201 {"id": n}
    DELETE /_sim/faults                -> {"cleared": n}            (counters are kept)
    DELETE /_sim/faults/{id}           -> {"removed": bool}
    GET    /_sim/requests              -> {"requests": [record, ...]}
    DELETE /_sim/requests              -> {"cleared": true}
    POST   /_sim/bulk        {"objects": [...]} or [...]  -> 201 {"created": n, "resourceVersion": "rv"}
    GET    /_sim/store/{resource}?namespace=&name=&labelSelector=&fieldSelector=
                                       -> the object (404 if missing) or {"items": [...]} without name
    DELETE /_sim/store/{resource}?namespace=&name=  -> {"deleted": bool}   (immediate, no grace period)
    POST   /_sim/watches/close {"resource", "user_agent"?, "ending"?}  -> {"closed": n}
                                       (the open watches of clients whose User-Agent matches the
                                        regex end: closed cleanly, dropped, or expired with a 410)
    POST   /_sim/reset       {"fault_seed": n}?     -> {"reset": true}
    GET    /_sim/stats                 -> {"resourceVersion", "objects": {resource: n}, "watchers",
                                           "faults_injected"}
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from sim.emulator import api
from sim.emulator.errors import ApiError, bad_request, method_not_allowed, page_not_found
from sim.emulator.faults import FaultRule

if TYPE_CHECKING:
    from sim.emulator.state import EmulatorState

logger = logging.getLogger(__name__)


def _ok(payload: Any, code: int = 200) -> api.Reply:
    return api.Reply(code, orjson.dumps(payload))


def _store(em: EmulatorState, method: str, resource: str, query: dict[str, str]) -> api.Reply:
    namespace, name = query.get("namespace") or None, query.get("name", "")
    if method == "GET" and name:
        found = em.get(resource, name, namespace)
        if found is None:
            raise ApiError(404, f'{resource} "{name}" not found', name=name, kind=resource)
        return _ok(found)
    if method == "GET":
        items = em.list(resource, namespace, query.get("labelSelector", ""), query.get("fieldSelector", ""))
        return _ok({"items": items})
    if method == "DELETE" and name:
        return _ok({"deleted": em.delete(resource, name, namespace)})
    raise method_not_allowed()


def _route(em: EmulatorState, method: str, parts: list[str], query: dict[str, str], body: bytes) -> api.Reply:
    match (method, parts):
        case ("GET", ["faults"]):
            return _ok(em.faults.report())
        case ("POST", ["faults"]):
            return _ok({"id": em.faults.add(FaultRule.from_json(api.decode(body)))}, 201)
        case ("DELETE", ["faults"]):
            return _ok({"cleared": em.faults.clear()})
        case ("DELETE", ["faults", rule_id]) if rule_id.isdigit():
            return _ok({"removed": em.faults.remove(int(rule_id))})
        case ("GET", ["requests"]):
            return _ok({"requests": em.requests.as_json()})
        case ("DELETE", ["requests"]):
            em.requests.clear()
            return _ok({"cleared": True})
        case ("POST", ["bulk"]):
            payload = api.decode(body)
            objects = payload.get("objects") if isinstance(payload, dict) else payload
            if not isinstance(objects, list):
                raise bad_request('expected {"objects": [...]} or a list of objects')
            created = em.seed(objects)
            return _ok({"created": created, "resourceVersion": str(em.store.rv)}, 201)
        case ("POST", ["watches", "close"]):
            options = api.decode(body)
            if not isinstance(options, dict) or not isinstance(options.get("resource"), str):
                raise bad_request('expected {"resource": "pods", "user_agent": "...", "ending": "dropped"}')
            closed = em.close_watches(
                options["resource"],
                str(options.get("user_agent") or ""),
                str(options.get("ending") or "dropped"),
            )
            return _ok({"closed": closed})
        case (_, ["store", resource]):
            return _store(em, method, resource, query)
        case ("POST", ["reset"]):
            options = api.decode(body) if body.strip() else {}
            em.reset(options.get("fault_seed") if isinstance(options, dict) else None)
            return _ok({"reset": True})
        case ("GET", ["stats"]):
            return _ok(em.stats())
    raise page_not_found()


def handle(em: EmulatorState, method: str, path: str, query: dict[str, str], body: bytes) -> api.Reply:
    parts = [p for p in path.split("/") if p][1:]
    try:
        return _route(em, method, parts, query, body)
    except ApiError as error:
        return api.error_reply(error)
    except Exception as error:
        logger.exception("test hook %s %s failed", method, path)
        return api.error_reply(ApiError(500, f"test hook failed: {error!r}"))
