"""Resource requests: query parameters and bodies in, the real server's answer bytes out.

Sits between the HTTP plumbing (``handler``) and the semantics (``objects``): parses selectors, pagination,
DeleteOptions and watch parameters, picks the answer shape (object, List, Table, Status) and its HTTP code.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from sim.emulator import eviction, tables
from sim.emulator.errors import ApiError, bad_request
from sim.emulator.listing import Page, list_body
from sim.emulator.objects import DeleteOptions
from sim.emulator.resources import NAMESPACES, PODS
from sim.emulator.routing import Route
from sim.emulator.selectors import parse_field_selector, parse_label_selector
from sim.emulator.store import Change
from sim.emulator.watch import Watcher, WatchOptions

if TYPE_CHECKING:
    from sim.emulator.state import EmulatorState

Query = Mapping[str, str]


@dataclass(frozen=True)
class Reply:
    code: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


def decode(body: bytes) -> Any:
    try:
        return orjson.loads(body or b"null")
    except orjson.JSONDecodeError as error:
        raise bad_request(f"the body of the request could not be decoded as JSON: {error}") from error


def _int(query: Query, key: str) -> int | None:
    value = query.get(key)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError as error:
        raise bad_request(f"invalid {key}: {value!r}") from error


def _wants_table(accept: str) -> bool:
    return "as=Table" in accept


def success_status(code: int, details: dict[str, Any] | None = None) -> bytes:
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if code != 200:
        status["code"] = code
    if details:
        status["details"] = details
    return orjson.dumps(status)


def _delete_options(query: Query, body: bytes) -> DeleteOptions:
    options = decode(body) if body.strip() else {}
    if not isinstance(options, dict):
        raise bad_request("DeleteOptions must be a JSON object")
    grace = _int(query, "gracePeriodSeconds")
    if grace is None and options.get("gracePeriodSeconds") is not None:
        grace = int(options["gracePeriodSeconds"])
    preconditions = options.get("preconditions") or {}
    return DeleteOptions(grace, preconditions.get("uid"), preconditions.get("resourceVersion"))


def serve(
    em: EmulatorState, route: Route, query: Query, content_type: str, accept: str, body: bytes
) -> Reply:
    """Every verb but watch."""
    if query.get("dryRun"):
        raise bad_request("dryRun is not supported by the API emulator")
    rtype, objects = route.rtype, em.objects
    if route.verb == "get":
        entry = objects.get(rtype, route.namespace, route.name)
        if _wants_table(accept):
            return Reply(200, tables.row(rtype, entry, query.get("includeObject", "")))
        return Reply(200, entry.raw)
    if route.verb == "list":
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"), rtype.field_labels)
        limit = _int(query, "limit") or 0
        if query.get("continue"):
            page = em.pages.next(query["continue"], limit)
        else:
            rv, entries = objects.select(rtype, route.namespace, labels, fields)
            page = em.pages.first(rv, entries, limit)
        if _wants_table(accept):
            return Reply(200, tables.table(rtype, page, query.get("includeObject", "")))
        return Reply(200, list_body(rtype, page))
    if route.verb == "create" and route.subresource == "eviction":
        assert route.namespace is not None
        eviction.evict(objects, route.namespace, route.name, decode(body))
        return Reply(201, success_status(201))
    if route.verb == "create" and route.subresource == "binding":
        assert route.namespace is not None
        objects.bind(route.namespace, route.name, decode(body))
        return Reply(201, success_status(201))
    if route.verb == "create":
        return Reply(201, objects.create(rtype, route.namespace, decode(body)).raw)
    if route.verb == "update":
        return Reply(
            200, objects.replace(rtype, route.namespace, route.name, decode(body), route.subresource).raw
        )
    if route.verb == "patch":
        entry = objects.patch(
            rtype, route.namespace, route.name, content_type, decode(body), route.subresource
        )
        return Reply(200, entry.raw)
    options = _delete_options(query, body)
    if route.verb == "delete":
        deletion = objects.delete(rtype, route.namespace, route.name, options)
        if rtype in (PODS, NAMESPACES):
            return Reply(200, deletion.entry.raw)
        meta = deletion.entry.metadata
        details = {"name": meta["name"], "group": rtype.group, "kind": rtype.plural, "uid": meta["uid"]}
        return Reply(200, success_status(200, {k: v for k, v in details.items() if v}))
    labels = parse_label_selector(query.get("labelSelector"))
    fields = parse_field_selector(query.get("fieldSelector"), rtype.field_labels)
    deleted = objects.delete_collection(rtype, route.namespace, labels, fields, options)
    return Reply(200, list_body(rtype, Page(em.store.rv, deleted, "", 0)))


@dataclass(frozen=True)
class WatchSetup:
    watcher: Watcher
    backlog: list[Change]
    options: WatchOptions


def open_watch(
    em: EmulatorState, route: Route, query: Query, accept: str, drop_after: int | None, user_agent: str = ""
) -> WatchSetup:
    """Parse the watch parameters and register the watcher (410 Expired if the version left the window)."""
    rtype = route.rtype
    labels = parse_label_selector(query.get("labelSelector"))
    fields = parse_field_selector(query.get("fieldSelector"), rtype.field_labels)
    since = _int(query, "resourceVersion")
    timeout = _int(query, "timeoutSeconds")
    bookmarks = query.get("allowWatchBookmarks", "") in ("true", "1")
    initial_events = query.get("sendInitialEvents", "") in ("true", "1")
    if initial_events and not bookmarks:
        raise ApiError(422, "sendInitialEvents requires allowWatchBookmarks=true")
    render = functools.partial(tables.row, rtype, include_object=query.get("includeObject", ""))
    table = render if _wants_table(accept) else None
    watcher = Watcher(rtype, route.namespace, labels, fields, render=table, user_agent=user_agent)
    rv, backlog = em.store.subscribe(
        rtype, route.namespace, None if initial_events else since or None, watcher
    )
    options = WatchOptions(
        float(timeout) if timeout else None,
        bookmarks,
        em.config.bookmark_interval,
        drop_after,
        rv if initial_events else None,
        since or rv,
    )
    return WatchSetup(watcher, backlog, options)


def error_reply(error: ApiError) -> Reply:
    headers = (("Retry-After", str(error.retry_after)),) if error.retry_after is not None else ()
    return Reply(error.code, orjson.dumps(error.status()), headers)
