"""The ledger's change log and status rows (app/state/ledger.py builds the reservations on it).

Every change of a reservation gets a sequence number (`_next_seq`; a deletion leaves a tombstone), so each
process refreshes its in-memory view incrementally (`changes_since`, app/state/usage.py); a rebuild bumps
the epoch, which forces readers to reload; old tombstones are pruned (a reader further behind reloads).
The status rows (leader, lease, synced, heartbeat) are the registration worker's word to the HTTP side.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

import orjson

from app.state.ledgerdb import LedgerConnection
from app.state.rows import COLUMNS, Changes, entry_of

_COLUMNS = COLUMNS
_ROW, _TOMBSTONE, _META = 0, 1, 2
_NULLS = ", ".join(["NULL"] * (len(COLUMNS.split(",")) - 1))
# changes_since's one statement: (kind, the row's columns or uid/key and NULLs, seq or the meta value); the
# rows only where the reader's epoch ?2 is current and its seq ?1 not behind the pruned tombstones (else it
# reloads everything: no rows are read twice)
_CURRENT = (
    "(SELECT value FROM meta WHERE key = 'epoch') = ?2"
    " AND (SELECT value FROM meta WHERE key = 'pruned') <= ?1"
)
_META_ROWS = f"SELECT {_META}, key, {_NULLS}, value FROM meta"
_CHANGES = (
    f"SELECT {_ROW}, {_COLUMNS}, seq FROM reservations WHERE seq > ?1 AND {_CURRENT}"
    f" UNION ALL SELECT {_TOMBSTONE}, uid, {_NULLS}, seq FROM tombstones WHERE seq > ?1 AND {_CURRENT}"
    f" UNION ALL {_META_ROWS}"
)
_EVERYTHING = f"SELECT {_ROW}, {_COLUMNS}, seq FROM reservations UNION ALL {_META_ROWS}"


class ChangeLog(LedgerConnection):
    """Sequence numbers, tombstones, epoch and meta values; the incremental readers; the status rows."""

    def _next_seq(self, db: sqlite3.Connection) -> int:
        (seq,) = db.execute("UPDATE meta SET value = value + 1 WHERE key = 'seq' RETURNING value").fetchone()
        return int(seq)

    # -- incremental readers ----------------------------------------------------------------------------

    def changes_since(self, seq: int, epoch: int) -> Changes:
        """The rows changed and removed after `seq`; everything when `epoch` is not the ledger's or the
        tombstones after `seq` were pruned. Each read is one statement: one consistent snapshot of the WAL."""
        found, meta = self._select(_CHANGES, (seq, epoch))
        full = meta["epoch"] != epoch or seq < meta["pruned"]
        if full:
            found, meta = self._select(_EVERYTHING, ())
        rows = [row for row in found if row[0] == _ROW]
        removed = tuple(str(row[1]) for row in found if row[0] == _TOMBSTONE)
        seqs = tuple(int(row[-1]) for row in rows)
        entries = tuple(entry_of(r[1:-1]) for r in rows)
        return Changes(entries, removed, meta["seq"], meta["epoch"], full, seqs, meta["holds"])

    def _select(self, query: str, args: tuple[int, ...]) -> tuple[list[Any], dict[str, int]]:
        with self._lock:
            found = self._db.execute(query, args).fetchall()
        return found, {str(row[1]): int(row[-1]) for row in found if row[0] == _META}

    def prune_tombstones(self, keep: int = 100_000) -> None:
        """Forget old deletions; readers further behind than the prune point reload fully."""
        with self.transaction() as db:
            (current,) = db.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()
            cutoff = int(current) - keep
            if cutoff > 0:
                db.execute("DELETE FROM tombstones WHERE seq <= ?", (cutoff,))
                db.execute("UPDATE meta SET value = MAX(value, ?) WHERE key = 'pruned'", (cutoff,))

    # -- status rows (leader, lease, synced, heartbeat) -------------------------------------------------

    def set_status(self, values: Mapping[str, object]) -> None:
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO status (key, value) VALUES (?, ?)",
                [(key, orjson.dumps(value)) for key, value in values.items()],
            )

    def status(self) -> dict[str, object]:
        with self._lock:
            rows = self._db.execute("SELECT key, value FROM status").fetchall()
        return {key: orjson.loads(value) for key, value in rows}
