"""The ledger's held reservations (docs/held-reservations.md): the `holds` table, the capacity their endings
free (`freed`) and the count of endings by kind and cause (`hold_endings`).

Invariants owned here (with app/state/ledger.py, whose row writers call `_enforce_h1`):

- H1 at all times, across processes: every transaction that adds or changes a reservation row, or creates
  a hold, releases in the same transaction the holds that no longer fit on the nodes it touched
  (`app.core.holds.overflowing`, lowest priority first) — given this process's `Judge` (the node's devices
  from its inventory, the vendors, the clock). A process without one (tools, tests of rows alone) writes
  rows as before; every service process sets one (app/factory.py, workers/worker.py).
- A hold is created whole or not at all: `create_holds` re-checks every node it touches in one
  BEGIN IMMEDIATE transaction, against the rows there (minus the victims the hold claims) and every other
  live slot, and replaces the key's previous slots.
- Every ending (consumed, displaced, expired, released, owner gone, replaced) is counted by kind and cause,
  and records the nodes whose capacity came back in `freed` — which the leader drains to tell
  kube-scheduler (workers/freedtouch.py); so does any other release without an API event (a phantom swept,
  a pending pod's row removed on its deletion: `record_freed`).
- Every change of `holds` bumps the meta counter `holds`: readers (the usage view) reload every hold when
  it moved (holds are few: tens, not thousands).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from app.core.holds import NOMINATION, Asker, Hold, overflowing, own
from app.core.model import DeviceUse, NodeDevices
from app.core.vendor import Vendor
from app.state.changelog import ChangeLog
from app.state.usecodec import decode_uses, encode_uses

HOLD_COLUMNS = (
    "key, slot, kind, owner, namespace, name, priority, node, uses, victims, reason, created_at, expires_at"
)
_HOLD_PLACES = ", ".join(["?"] * len(HOLD_COLUMNS.split(",")))

# How a hold ends (the `hold_endings` counter's cause; the freed record says more)
CONSUMED, DISPLACED, EXPIRED, RELEASED, GONE, REPLACED = (
    "consumed",
    "displaced",
    "expired",
    "released",
    "owner-gone",
    "replaced",
)


@dataclass(frozen=True, slots=True)
class Judge:
    """What a process gives its ledger so that it keeps H1 on every write: the devices of a node as its
    inventory has them (None: unknown node), the vendors (their placement rules), the clock (expiry)."""

    devices: Callable[[str], NodeDevices | None]
    vendors: Sequence[Vendor]
    clock: Callable[[], float]


@dataclass(frozen=True, slots=True)
class NodeState:
    """What `create_holds`' check sees of one node: its rows by UID (the new hold's victims left out) and
    the other live slots there (any key but the one being created)."""

    rows: Mapping[str, Mapping[str, DeviceUse]]
    holds: tuple[Hold, ...]


@dataclass(frozen=True, slots=True)
class Asking:
    """The asker of an assume as the holds see it (app/core/holds.py rules 2-4): who, when, and the holds'
    version its decision saw (`UsageView.holds_version`; -1: unknown)."""

    asker: Asker
    now: float
    seen: int = -1
    who: str = ""  # <namespace>/<name>: the cause of the holds it displaces
    none: bool = False  # the decision saw no hold at all at version `seen`


Freeing = tuple[str, float]  # why capacity comes back, and when


@dataclass(frozen=True, slots=True)
class Freed:
    """Capacity that came back on `node` without an API event kube-scheduler would see."""

    node: str
    cause: str
    at: float


def hold_of(row: Sequence[Any]) -> Hold:
    """A stored slot (`HOLD_COLUMNS`, in order) decoded."""
    key, slot, kind, owner, namespace, name, priority, node, uses, victims, reason, created, expires = row
    return Hold(
        str(key),
        str(slot),
        str(kind),
        str(owner),
        str(namespace),
        str(name),
        int(priority),
        str(node),
        decode_uses(uses),
        tuple(orjson.loads(victims)),
        str(reason),
        float(created),
        float(expires),
    )


class _Refused(Exception):
    """Rolls back a hold that would itself overflow (`create_holds`)."""


class HoldStore(ChangeLog):
    """The holds, what their endings freed, and H1's enforcement, on this process's ledger connection."""

    judge: Judge | None = None

    def use_judge(self, judge: Judge) -> None:
        """From now on every row write of this process keeps H1 (module docstring)."""
        self.judge = judge

    # -- inside transactions ----------------------------------------------------------------------------

    def _holds_version(self, db: sqlite3.Connection) -> int:
        (value,) = db.execute("SELECT value FROM meta WHERE key = 'holds'").fetchone()
        return int(value)

    def _slots(self, db: sqlite3.Connection, where: str = "", args: Sequence[object] = ()) -> list[Hold]:
        query = f"SELECT {HOLD_COLUMNS} FROM holds {where}"
        return [hold_of(row) for row in db.execute(query, args)]

    def _rows_by_uid(self, db: sqlite3.Connection, node: str) -> dict[str, Mapping[str, DeviceUse]]:
        query = "SELECT uid, uses FROM reservations WHERE node = ?"
        return {str(uid): decode_uses(uses) for uid, uses in db.execute(query, (node,))}

    def _insert(self, db: sqlite3.Connection, hold: Hold) -> None:
        db.execute(
            f"INSERT OR REPLACE INTO holds ({HOLD_COLUMNS}) VALUES ({_HOLD_PLACES})",
            (
                hold.key,
                hold.slot,
                hold.kind,
                hold.owner,
                hold.namespace,
                hold.name,
                hold.priority,
                hold.node,
                encode_uses(hold.uses),
                orjson.dumps(list(hold.victims)),
                hold.reason,
                hold.created_at,
                hold.expires_at,
            ),
        )

    def _ended(self, db: sqlite3.Connection, slots: Iterable[Hold], cause: str) -> None:
        """Count each hold (key) among `slots` as ended by `cause`, and bump the version."""
        kinds: dict[str, str] = {slot.key: slot.kind for slot in slots}
        for kind in kinds.values():
            db.execute(
                "INSERT INTO hold_endings (kind, cause, count) VALUES (?, ?, 1)"
                " ON CONFLICT (kind, cause) DO UPDATE SET count = count + 1",
                (kind, cause),
            )
        if kinds:
            db.execute("UPDATE meta SET value = value + 1 WHERE key = 'holds'")

    def _record_freed(self, db: sqlite3.Connection, nodes: Iterable[str], cause: str, now: float) -> None:
        db.executemany(
            "INSERT INTO freed (node, cause, at) VALUES (?, ?, ?)",
            [(n, cause, now) for n in sorted(set(nodes))],
        )

    def _release(
        self, db: sqlite3.Connection, keys: Iterable[str], cause: str, detail: str, now: float
    ) -> list[Hold]:
        """Delete every slot of `keys`; each ends by `cause`, its nodes freed (`detail` says why)."""
        released: list[Hold] = []
        for key in dict.fromkeys(keys):
            rows = db.execute(f"DELETE FROM holds WHERE key = ? RETURNING {HOLD_COLUMNS}", (key,)).fetchall()
            released += [hold_of(row) for row in rows]
        self._ended(db, released, cause)
        self._record_freed(db, (slot.node for slot in released), detail, now)
        return released

    def _consume(self, db: sqlite3.Connection, asking: Asking, node: str) -> list[Hold]:
        """Rule 3: the asker's own slots go with its assume; capacity comes back where they were on other
        nodes than the one it took."""
        asker = asking.asker
        candidates = self._slots(db, "WHERE owner IN (?, ?)", (asker.uid, asker.gang))
        mine = [slot for slot in candidates if own(slot, asker)]
        for slot in mine:
            db.execute("DELETE FROM holds WHERE key = ? AND slot = ?", (slot.key, slot.slot))
        self._ended(db, mine, CONSUMED)
        elsewhere = (slot.node for slot in mine if slot.node != node)
        self._record_freed(db, elsewhere, f"consumed by {asking.who}", asking.now)
        self._after_release(db, mine, f"displaced: the victims of {asking.who}'s nomination count again")
        return mine

    def _enforce_h1(self, db: sqlite3.Connection, nodes: Iterable[str], detail: str) -> list[Hold]:
        """Release the holds that no longer fit on `nodes` (H1), lowest priority first; nothing without a
        judge or where a node has no live hold or is not in the inventory."""
        judge = self.judge
        if judge is None:
            return []
        now, released = judge.clock(), []
        for node in dict.fromkeys(nodes):
            holds = self._slots(db, "WHERE node = ?", (node,))  # expired ones too: their victims stay claimed
            devices = judge.devices(node) if any(h.live(now) for h in holds) else None
            if devices is None:
                continue
            keys = overflowing(devices, self._rows_by_uid(db, node), holds, now, judge.vendors)
            released += self._release(db, keys, DISPLACED, detail, now)
        return released

    def _after_release(self, db: sqlite3.Connection, released: Iterable[Hold], detail: str) -> None:
        """A deleted nomination's victims count again for the holds beside it: H1 on its nodes (the
        releases there are themselves consistent: `overflowing` keeps the victims of what it keeps)."""
        nodes = [slot.node for slot in released if slot.kind == NOMINATION and slot.victims]
        self._enforce_h1(db, nodes, detail)

    # -- the public operations --------------------------------------------------------------------------

    def create_holds(
        self,
        key: str,
        nodes: Collection[str],
        check: Callable[[Mapping[str, NodeState]], Sequence[Hold] | None],
        *,
        now: float,
        victims: Collection[str] = (),
    ) -> list[Hold] | None:
        """Create (or re-make) the hold `key` atomically (rule 5). `check` sees each node of `nodes` as it is
        committed now (`NodeState`: the rows minus `victims`, the other live slots) and returns the slots
        to store — all of key `key` — or None to create nothing. The key's previous slots are replaced
        (their nodes freed where no new slot is). Lower-priority holds the new slots leave no room for are
        displaced (rule 4); a hold that would itself not fit (H1) is refused: None, nothing written."""
        claimed = frozenset(victims)
        try:
            with self.transaction() as db:
                states = {
                    node: NodeState(
                        {u: uses for u, uses in self._rows_by_uid(db, node).items() if u not in claimed},
                        tuple(
                            h
                            for h in self._slots(db, "WHERE node = ?", (node,))
                            if h.key != key and h.live(now)
                        ),
                    )
                    for node in nodes
                }
                slots = check(states)
                if slots is None:
                    return None
                if any(slot.key != key for slot in slots):
                    raise ValueError(f"every slot of hold {key} must carry its key")
                old = [
                    hold_of(r)
                    for r in db.execute(f"DELETE FROM holds WHERE key = ? RETURNING {HOLD_COLUMNS}", (key,))
                ]
                for slot in slots:
                    self._insert(db, slot)
                kept = {slot.node for slot in slots}
                if old:
                    self._record_freed(db, (o.node for o in old if o.node not in kept), f"{key} re-made", now)
                    self._after_release(db, old, f"displaced: {key} re-made")
                db.execute("UPDATE meta SET value = value + 1 WHERE key = 'holds'")
                if any(h.key == key for h in self._enforce_h1(db, kept, f"displaced by {key}")):
                    raise _Refused
                return list(slots)
        except _Refused:
            return None

    def release_holds(self, keys: Iterable[str], cause: str, now: float, detail: str = "") -> list[Hold]:
        """End the holds `keys` (all their slots) by `cause`; their nodes are freed. Returns the slots."""
        with self.transaction() as db:
            released = self._release(db, keys, cause, detail or cause, now)
            self._after_release(db, released, "displaced: a released nomination's victims count again")
            return released

    def sweep_holds(self, now: float, gone: Callable[[Hold], str] = lambda _: "") -> list[Hold]:
        """The leader's sweep: expired holds end (`EXPIRED`), and those whose owner is gone (`gone` returns
        why, "" while the owner is there) end with that detail (`GONE`). Returns the slots ended."""
        with self.transaction() as db:
            slots = self._slots(db)
            expired = {h.key for h in slots if not h.live(now)}
            ended = self._release(db, expired, EXPIRED, EXPIRED, now)
            for key in dict.fromkeys(h.key for h in slots if h.key not in expired):
                why = gone(next(h for h in slots if h.key == key))
                if why:
                    ended += self._release(db, [key], GONE, why, now)
            self._after_release(db, ended, "displaced: an ended nomination's victims count again")
            return ended

    def all_holds(self) -> tuple[int, list[Hold]]:
        """Every stored slot (expired ones too: readers judge expiry) and the version they are at."""
        with self.transaction(write=False) as db:
            return self._holds_version(db), self._slots(db, "ORDER BY key, slot")

    def hold_endings(self) -> dict[tuple[str, str], int]:
        """(kind, cause) -> holds ended so, since the ledger file was made."""
        with self._lock:
            rows = self._db.execute("SELECT kind, cause, count FROM hold_endings").fetchall()
        return {(str(kind), str(cause)): int(count) for kind, cause, count in rows}

    def record_freed(self, nodes: Iterable[str], cause: str, now: float) -> None:
        """Capacity came back on `nodes` without an event kube-scheduler sees (a phantom swept, a pending
        pod's row removed): the leader tells kube-scheduler (workers/freedtouch.py)."""
        with self.transaction() as db:
            self._record_freed(db, nodes, cause, now)

    def drain_freed(self, limit: int = 10_000) -> list[Freed]:
        """Take (and delete) up to `limit` records of freed capacity, oldest first (the write lock only when
        there is one: the leader asks every second)."""
        with self._lock:
            if self._db.execute("SELECT 1 FROM freed LIMIT 1").fetchone() is None:
                return []
        with self.transaction() as db:
            rows = db.execute(
                "SELECT id, node, cause, at FROM freed ORDER BY id LIMIT ?", (limit,)
            ).fetchall()
            if rows:
                db.execute("DELETE FROM freed WHERE id <= ?", (rows[-1][0],))
        return [Freed(str(node), str(cause), float(at)) for _, node, cause, at in rows]
