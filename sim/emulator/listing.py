"""Paginated lists with ``limit``/``continue`` and the List body built from cached object bytes.

As on a real server, every page of one list shows the same snapshot (the resourceVersion of the first page):
the first page keeps references to the matching entries (entries are immutable, so this is cheap) and the
continue token points into that snapshot. Only the most recent snapshots are kept; an evicted one answers 410
Expired with the real server's message, which is what happens there after compaction.
"""

from __future__ import annotations

import base64
import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass

import orjson

from sim.emulator.errors import bad_request, expired
from sim.emulator.resources import ResourceType
from sim.emulator.store import Entry

_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)


@dataclass(frozen=True)
class Page:
    rv: int
    items: list[Entry]
    continue_token: str
    remaining: int


class Pages:
    def __init__(self, capacity: int = 64) -> None:
        self._lock = threading.Lock()
        self._capacity = capacity
        self._snapshots: OrderedDict[int, tuple[int, list[Entry]]] = OrderedDict()
        self._ids = itertools.count(1)

    def first(self, rv: int, entries: list[Entry], limit: int) -> Page:
        if limit <= 0 or len(entries) <= limit:
            return Page(rv, entries, "", 0)
        with self._lock:
            snapshot_id = next(self._ids)
            self._snapshots[snapshot_id] = (rv, entries)
            while len(self._snapshots) > self._capacity:
                self._snapshots.popitem(last=False)
        return self._page(snapshot_id, rv, entries, 0, limit)

    def next(self, token: str, limit: int) -> Page:
        try:
            decoded = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            snapshot_id, offset = int(decoded["id"]), int(decoded["offset"])
        except (ValueError, KeyError, TypeError) as error:
            raise bad_request(f"continue key is not valid: {error}") from error
        with self._lock:
            snapshot = self._snapshots.get(snapshot_id)
            if snapshot is not None:
                self._snapshots.move_to_end(snapshot_id)
        if snapshot is None:
            raise expired(_TOO_OLD)
        rv, entries = snapshot
        return self._page(snapshot_id, rv, entries, offset, limit)

    def _page(self, snapshot_id: int, rv: int, entries: list[Entry], offset: int, limit: int) -> Page:
        end = len(entries) if limit <= 0 else offset + limit
        if end >= len(entries):
            with self._lock:
                self._snapshots.pop(snapshot_id, None)
            return Page(rv, entries[offset:], "", 0)
        payload = orjson.dumps({"rv": rv, "id": snapshot_id, "offset": end})
        token = base64.urlsafe_b64encode(payload).decode()
        return Page(rv, entries[offset:end], token, len(entries) - end)

    def clear(self) -> None:
        with self._lock:
            self._snapshots.clear()


def list_metadata(page: Page) -> bytes:
    meta: dict[str, object] = {"resourceVersion": str(page.rv)}
    if page.continue_token:
        meta["continue"] = page.continue_token
        meta["remainingItemCount"] = page.remaining
    return orjson.dumps(meta)


def list_body(rtype: ResourceType, page: Page) -> bytes:
    head = b'{"kind":"%sList","apiVersion":"%s","metadata":%s,"items":[' % (
        rtype.kind.encode(),
        rtype.api_version.encode(),
        list_metadata(page),
    )
    return head + b",".join(e.raw for e in page.items) + b"]}"
