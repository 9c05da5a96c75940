"""How a reservation row is stored and read inside the ledger's transactions (app/state/ledger.py holds its
writers, the table of docs/ledger-writers.md).

`_put` writes a whole row (INSERT OR REPLACE by UID, a new sequence number); `_delete` removes one (a
tombstone for the readers, the deferred write's copy with it, and — when asked — the node recorded as freed
for a row still in flight). The reads are what the writers' re-checks need: the node's other rows (their
count and newest sequence number, or their uses), the namespace's quota usage without the pod's own, the
pod's own row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

import orjson

from app.core.model import DeviceUse
from app.state.holdstore import Freeing, HoldStore
from app.state.rows import COLUMNS, IN_FLIGHT, Entry, RowState, entry_of, row_state
from app.state.usecodec import decode_uses, decoded_uses, encode_uses

_COLUMNS = COLUMNS
_PLACES = ", ".join(["?"] * (len(COLUMNS.split(",")) + 1))  # the columns and seq
ROW_STATE = "SELECT uid, state, updated_at, namespace, name, bind, node FROM reservations"
_ASSUME_READ = (
    "SELECT (SELECT value FROM meta WHERE key = 'holds'), r.uid, r.state, r.updated_at, r.namespace, r.name,"
    " r.bind, r.node FROM (SELECT 1) LEFT JOIN reservations r ON r.uid = ?"
)


class RowStore(HoldStore):
    """The rows' storage on this process's connection; the holds' (app/state/holdstore.py) below it."""

    def _put(self, db: sqlite3.Connection, entry: Entry) -> None:
        db.execute(
            f"INSERT OR REPLACE INTO reservations ({_COLUMNS}, seq) VALUES ({_PLACES})",
            (
                entry.uid,
                entry.namespace,
                entry.name,
                entry.node,
                entry.state,
                encode_uses(entry.uses),
                orjson.dumps(dict(entry.quota)),
                entry.allocation,
                entry.updated_at,
                entry.bind,
                entry.priority,
                entry.started,
                int(entry.terminating),
                entry.gang,
                self._next_seq(db),
            ),
        )

    def _delete(self, db: sqlite3.Connection, uid: str, free: Freeing | None = None) -> bool:
        """Remove the row; with `free` (why, when), a row in flight records its node as freed (capacity back
        without an event kube-scheduler sees: app/state/holdstore.py)."""
        db.execute("DELETE FROM written WHERE uid = ?", (uid,))
        gone = db.execute("DELETE FROM reservations WHERE uid = ? RETURNING node, state", (uid,)).fetchone()
        if gone is None:
            return False
        db.execute("INSERT INTO tombstones (seq, uid) VALUES (?, ?)", (self._next_seq(db), uid))
        if free is not None and gone[1] in IN_FLIGHT:
            self._record_freed(db, (str(gone[0]),), *free)
        return True

    def node_stamp(self, db: sqlite3.Connection, node: str, exclude_uid: str) -> tuple[int, int]:
        """How many reservations other than `exclude_uid`'s are on `node`, and the newest sequence number
        among them (0 for none): equal to a reader's count and newest number of the rows it took from
        `changes_since` for the node, the rows are the very same (`UsageView.rows_stamp`)."""
        count, newest = db.execute(
            "SELECT count(*), coalesce(max(seq), 0) FROM reservations WHERE node = ? AND uid != ?",
            (node, exclude_uid),
        ).fetchone()
        return int(count), int(newest)

    def node_uses(self, db: sqlite3.Connection, node: str, exclude_uid: str) -> list[Mapping[str, DeviceUse]]:
        rows = db.execute("SELECT uses FROM reservations WHERE node = ? AND uid != ?", (node, exclude_uid))
        return [decoded_uses(uses) for (uses,) in rows]

    def node_uses_by_uid(
        self, db: sqlite3.Connection, node: str, exclude_uid: str
    ) -> dict[str, dict[str, DeviceUse]]:
        query = "SELECT uid, uses FROM reservations WHERE node = ? AND uid != ?"
        return {str(uid): decode_uses(uses) for uid, uses in db.execute(query, (node, exclude_uid))}

    def quota_used(self, db: sqlite3.Connection, namespace: str, exclude_uid: str) -> dict[str, int]:
        """resource -> amount held by the namespace's reservations other than `exclude_uid`'s."""
        used = {
            str(resource): int(amount)
            for resource, amount in db.execute(
                "SELECT resource, amount FROM quota_used WHERE namespace = ?", (namespace,)
            )
        }
        own = db.execute(
            "SELECT quota FROM reservations WHERE uid = ? AND namespace = ?", (exclude_uid, namespace)
        ).fetchone()
        for resource, amount in (orjson.loads(own[0]) if own else {}).items():
            used[resource] = used.get(resource, 0) - amount
        return used

    def _current(self, db: sqlite3.Connection, uid: str) -> RowState | None:
        row = db.execute(f"{ROW_STATE} WHERE uid = ?", (uid,)).fetchone()
        return row_state(row) if row else None

    def _current_and_holds(self, db: sqlite3.Connection, uid: str) -> tuple[RowState | None, int]:
        """The pod's row and the holds' version, in one statement (the assume's first read)."""
        version, *row = db.execute(_ASSUME_READ, (uid,)).fetchone()
        return (row_state(row) if row[0] is not None else None), int(version)

    def get(self, uid: str) -> Entry | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM reservations WHERE uid = ?", (uid,)).fetchone()
        return entry_of(row) if row else None

    def row(self, uid: str) -> RowState | None:
        """The pod's row without its uses (one indexed read, nothing decoded)."""
        with self._lock:
            return self._current(self._db, uid)
