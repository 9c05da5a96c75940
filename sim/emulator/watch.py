"""Watch streams: per-watcher queues, selector filtering with transitions, bookmarks and the stream loop.

Filtering follows kube-apiserver's watch cache (``cacheWatcher.convertToWatchEvent``): a MODIFIED object that
starts matching the watch's selectors is sent as ADDED, one that stops matching as DELETED (carrying the
previous state stamped with the event's resourceVersion), for label and field selectors alike. So a watch on
``spec.nodeName=`` sees a pod leave when it is bound, as on a real cluster.

The store pushes every change of the resource into the watcher's queue under the store lock (cheap); the
filtering and encoding run here, in the watch's own thread. A watcher that falls too far behind is closed,
like the real server closes slow watchers; the client re-watches from its last resourceVersion.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import orjson

from sim.emulator.resources import ResourceType
from sim.emulator.selectors import FieldSelector, LabelSelector
from sim.emulator.store import ADDED, DELETED, Change, Entry, Store, stamp

_FLUSH_BYTES = 256 * 1024
_TICK_SECONDS = 1.0


class Watcher:
    def __init__(
        self,
        rtype: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        max_pending: int = 100_000,
        render: Callable[[Entry], bytes] | None = None,
        user_agent: str = "",
    ) -> None:
        """``render`` turns the object into the event's ``object`` (default: the stored JSON; kubectl's
        ``get -w`` asks for one-row Tables); ``user_agent`` is the client's, for the close hook."""
        self.rtype = rtype
        self.user_agent = user_agent
        self.ending = "closed"  # how a close() ends the stream: closed (cleanly), dropped or expired
        self._render = render
        self._namespace = namespace
        self._labels = labels
        self._fields = fields
        self._max_pending = max_pending
        self._pending: deque[Change] = deque()
        self._wake = threading.Event()
        self._closed = False

    def push(self, change: Change) -> None:
        """Called by the store with its lock held."""
        if len(self._pending) >= self._max_pending:
            self._closed = True
        else:
            self._pending.append(change)
        self._wake.set()

    def close(self, ending: str = "closed") -> None:
        """End the stream from another thread: `closed` cleanly, `dropped` (the connection is cut) or
        `expired` (an ERROR 410 event first, so the client lists again)."""
        self.ending = ending
        self._closed = True
        self._wake.set()

    @property
    def idle(self) -> bool:
        return not self._pending

    def take(self, timeout: float) -> list[Change] | None:
        """The queued changes (possibly none after ``timeout``); None once the watcher is closed."""
        self._wake.wait(timeout)
        self._wake.clear()
        if self._closed:
            return None
        changes: list[Change] = []
        while self._pending:
            changes.append(self._pending.popleft())
        return changes

    def _passes(self, entry: Entry) -> bool:
        meta = entry.metadata
        if self._namespace is not None and meta.get("namespace") != self._namespace:
            return False
        return self._labels.matches(meta.get("labels")) and self._fields.matches(entry.obj)

    def encode(self, change: Change) -> bytes | None:
        """The watch-event line this watcher sends for ``change``, or None if it does not concern it."""
        now_passes = change.type != DELETED and self._passes(change.entry)
        before_passes = change.prev is not None and self._passes(change.prev)
        if now_passes:
            kind, entry = (change.type if before_passes else ADDED), change.entry
        elif before_passes:
            assert change.prev is not None
            kind, entry = (
                DELETED,
                (change.entry if change.type == DELETED else stamp(change.prev.obj, change.rv)),
            )
        else:
            return None
        raw = entry.raw if self._render is None else self._render(entry)
        return b'{"type":"%s","object":%s}\n' % (kind.encode(), raw)


class Sink(Protocol):
    """Where a watch stream goes: the HTTP layer's chunked response."""

    def send(self, data: bytes) -> None: ...

    def client_gone(self) -> bool: ...


@dataclass(frozen=True)
class WatchOptions:
    timeout: float | None
    bookmarks: bool
    bookmark_interval: float
    drop_after: int | None  # end the stream after this many events (a drop_watch fault)
    initial_events_end: int | None = None  # sendInitialEvents: mark the end of the backlog at this version
    start_rv: int = 0  # the version the watch starts after: no bookmark until the store moved past it


def error_line(status: dict[str, object]) -> bytes:
    return b'{"type":"ERROR","object":%s}\n' % orjson.dumps(status)


def _bookmark(rtype: ResourceType, rv: int, initial_events_end: bool = False) -> bytes:
    meta: dict[str, object] = {"resourceVersion": str(rv)}
    if initial_events_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
    return b'{"type":"BOOKMARK","object":%s}\n' % orjson.dumps(obj)


def _periodic_bookmark(store: Store, watcher: Watcher, last: int) -> tuple[bytes | None, int]:
    """A BOOKMARK at the current version, only when every change up to it has been sent and the version
    moved past `last` (what the watcher has seen), as kube-apiserver's cacher does; and the new `last`."""
    with store.lock:
        if not watcher.idle or store.rv <= last:
            return None, last
        rv = store.rv
    return _bookmark(watcher.rtype, rv), rv


def run_watch(
    store: Store,
    watcher: Watcher,
    backlog: list[Change],
    sink: Sink,
    options: WatchOptions,
    stopping: threading.Event,
) -> str:
    """Stream until timeout, client disconnect, server stop, watcher close (closed, dropped or expired) or a
    drop fault (dropped); say which."""
    deadline = time.monotonic() + options.timeout if options.timeout else None
    next_bookmark = time.monotonic() + options.bookmark_interval
    sent, last = 0, options.start_rv

    def emit(changes: list[Change]) -> bool:
        nonlocal sent, last
        buffer: list[bytes] = []
        size = 0
        for change in changes:
            line = watcher.encode(change)
            if line is None:
                continue
            if options.drop_after is not None and sent >= options.drop_after:
                break
            buffer.append(line)
            size += len(line)
            sent += 1
            last = max(last, change.rv)
            if size >= _FLUSH_BYTES:
                sink.send(b"".join(buffer))
                buffer, size = [], 0
        if buffer:
            sink.send(b"".join(buffer))
        return options.drop_after is None or sent < options.drop_after

    if not emit(backlog):
        return "dropped"
    if options.initial_events_end is not None:
        sink.send(_bookmark(watcher.rtype, options.initial_events_end, initial_events_end=True))
    while True:
        now = time.monotonic()
        if stopping.is_set():
            return "stopped"
        if deadline is not None and now >= deadline:
            return "timeout"
        wait = _TICK_SECONDS
        if deadline is not None:
            wait = min(wait, deadline - now)
        if options.bookmarks:
            wait = max(0.0, min(wait, next_bookmark - now))
        changes = watcher.take(wait)
        if changes is None:
            return watcher.ending
        if changes:
            if not emit(changes):
                return "dropped"
        elif sink.client_gone():
            return "client"
        if options.bookmarks and time.monotonic() >= next_bookmark:
            line, last = _periodic_bookmark(store, watcher, last)
            if line is not None:
                sink.send(line)
            next_bookmark = time.monotonic() + options.bookmark_interval
