"""The object store: one lock, one global resourceVersion, a bounded event log and watch fan-out.

Objects are stored as immutable ``Entry`` values holding both the decoded dict and its orjson bytes, so reads,
lists and watch events reuse the serialized form and nothing is deep-copied: every write builds a new dict
(sharing untouched sub-trees with the previous version) and a new Entry. Each write consumes exactly one
resourceVersion and appends exactly one ``Change`` to the log, so the log is a contiguous run of versions and
a watch "since N" finds its starting point by arithmetic. The critical section is the dictionary update, the
log append and the fan-out (a deque append per watcher); filtering and serialization of watch events happen in
the watchers' own threads.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from sim.emulator.errors import expired
from sim.emulator.resources import ResourceType

JsonObj = dict[str, Any]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored version of an object. ``obj`` is never mutated; ``raw`` is its JSON encoding."""

    obj: JsonObj
    raw: bytes
    rv: int

    @property
    def metadata(self) -> JsonObj:
        meta: JsonObj = self.obj["metadata"]
        return meta


@dataclass(frozen=True, slots=True)
class Change:
    """One event-log record; ``prev`` is the version before a MODIFIED or DELETED."""

    rv: int
    resource: str
    type: str
    entry: Entry
    prev: Entry | None


class Subscriber(Protocol):
    def push(self, change: Change) -> None: ...

    def close(self) -> None: ...


def stamp(obj: JsonObj, rv: int) -> Entry:
    """A new Entry for ``obj`` with ``metadata.resourceVersion`` set (``obj`` itself is not modified)."""
    stamped = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}
    return Entry(stamped, orjson.dumps(stamped), rv)


class Store:
    def __init__(self, window: int) -> None:
        self.lock = threading.Lock()
        self._rv = 0
        self._window = window
        self._objects: dict[str, dict[str, dict[str, Entry]]] = {}
        self._log: deque[Change] = deque(maxlen=window)
        self._floor = 0  # newest version no longer in the log (watches from below it get 410)
        self._subscribers: dict[str, set[Subscriber]] = {}
        # pods by spec.nodeName, as kube-apiserver's watch cache indexes them (the kubelet's and /bind's
        # `fieldSelector=spec.nodeName=N` lists then cost the pods of one node, not of the cluster)
        self._pods_on_node: dict[str, dict[tuple[str, str], Entry]] = {}

    @property
    def rv(self) -> int:
        return self._rv

    def get(self, rtype: ResourceType, namespace: str, name: str) -> Entry | None:
        """Lock-free read: a dict lookup is atomic and entries are immutable."""
        return self._objects.get(rtype.key, {}).get(namespace, {}).get(name)

    def snapshot(self, rtype: ResourceType, namespace: str | None) -> tuple[int, list[Entry]]:
        """The current version and references to every entry of the type (one namespace or all)."""
        with self.lock:
            buckets = self._objects.get(rtype.key, {})
            if namespace is not None:
                return self._rv, list(buckets.get(namespace, {}).values())
            return self._rv, [e for bucket in buckets.values() for e in bucket.values()]

    def pods_on_node(self, node: str) -> tuple[int, list[Entry]]:
        """The current version and the pods bound to `node` (every namespace)."""
        with self.lock:
            return self._rv, list(self._pods_on_node.get(node, {}).values())

    def _index(self, rtype: ResourceType, entry: Entry | None, prev: Entry | None) -> None:
        if rtype.key != "pods":
            return
        for old, new in ((prev, None), (entry, entry)):
            if old is None:
                continue
            node = (old.obj.get("spec") or {}).get("nodeName")
            if not isinstance(node, str) or not node:
                continue
            key = (old.metadata.get("namespace", ""), old.metadata["name"])
            if new is None:
                bucket = self._pods_on_node.get(node, {})
                bucket.pop(key, None)
                if not bucket:
                    self._pods_on_node.pop(node, None)
            else:
                self._pods_on_node.setdefault(node, {})[key] = new

    def bucket(self, rtype: ResourceType, namespace: str) -> list[Entry]:
        """The entries of one namespace; the caller holds ``lock``."""
        return list(self._objects.get(rtype.key, {}).get(namespace, {}).values())

    def count(self, rtype: ResourceType) -> int:
        return sum(len(bucket) for bucket in self._objects.get(rtype.key, {}).values())

    # --- writes: the caller holds ``lock`` ------------------------------------------------------------------

    def put(self, rtype: ResourceType, obj: JsonObj, prev: Entry | None) -> Entry:
        """Store a new version; an update that changes nothing is a no-op, as on a real server."""
        if (
            prev is not None
            and {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(prev.rv)}} == prev.obj
        ):
            return prev
        self._rv += 1
        entry = stamp(obj, self._rv)
        meta = entry.metadata
        namespace = meta.get("namespace", "") if rtype.namespaced else ""
        self._objects.setdefault(rtype.key, {}).setdefault(namespace, {})[meta["name"]] = entry
        self._index(rtype, entry, prev)
        self._publish(Change(self._rv, rtype.key, MODIFIED if prev else ADDED, entry, prev))
        return entry

    def remove(self, rtype: ResourceType, current: Entry) -> Entry:
        """Delete; the DELETED event carries the last state stamped with the deletion's version."""
        self._rv += 1
        final = stamp(current.obj, self._rv)
        meta = current.metadata
        namespace = meta.get("namespace", "") if rtype.namespaced else ""
        bucket = self._objects[rtype.key][namespace]
        del bucket[meta["name"]]
        if not bucket:
            del self._objects[rtype.key][namespace]
        self._index(rtype, None, current)
        self._publish(Change(self._rv, rtype.key, DELETED, final, current))
        return final

    def _publish(self, change: Change) -> None:
        if len(self._log) == self._window:
            self._floor = self._log[0].rv
        self._log.append(change)
        for subscriber in self._subscribers.get(change.resource, ()):
            subscriber.push(change)

    # --- watch registration ---------------------------------------------------------------------------------

    def subscribe(
        self, rtype: ResourceType, namespace: str | None, since: int | None, subscriber: Subscriber
    ) -> tuple[int, list[Change]]:
        """Register a watcher atomically with its backlog: synthetic ADDED events for the current objects when
        ``since`` is None, else the logged changes after ``since`` (410 Expired when they left the window).
        Also returns the current version, which the backlog brings the watcher up to."""
        with self.lock:
            if since is None:
                entries: Iterable[Entry]
                buckets = self._objects.get(rtype.key, {})
                if namespace is not None:
                    entries = buckets.get(namespace, {}).values()
                else:
                    entries = (e for bucket in buckets.values() for e in bucket.values())
                backlog = [Change(e.rv, rtype.key, ADDED, e, None) for e in entries]
            elif since < self._floor:
                raise expired(f"too old resource version: {since} ({self._floor})")
            else:
                start = max(0, since - self._floor)
                backlog = [c for c in itertools.islice(self._log, start, None) if c.resource == rtype.key]
            self._subscribers.setdefault(rtype.key, set()).add(subscriber)
            return self._rv, backlog

    def unsubscribe(self, rtype: ResourceType, subscriber: Subscriber) -> None:
        with self.lock:
            self._subscribers.get(rtype.key, set()).discard(subscriber)

    def watcher_count(self) -> int:
        return sum(len(subs) for subs in self._subscribers.values())

    # --- reset ----------------------------------------------------------------------------------------------

    def clear(self) -> None:
        """Drop every object and the log and end every watch. The reset consumes a version, so a watch from
        any earlier version is 410 Expired and its client re-lists instead of missing the deletions."""
        with self.lock:
            self._objects.clear()
            self._pods_on_node.clear()
            self._log.clear()
            self._rv += 1
            self._floor = self._rv
        self.close_watches()

    def close_watches(self) -> None:
        with self.lock:
            subscribers = [s for subs in self._subscribers.values() for s in subs]
            self._subscribers.clear()
        for subscriber in subscribers:
            subscriber.close()

    def subscribers(self, resource: str) -> list[Subscriber]:
        """The watchers of one resource now (the caller may close some: see EmulatorState.close_watches)."""
        with self.lock:
            return list(self._subscribers.get(resource, ()))
