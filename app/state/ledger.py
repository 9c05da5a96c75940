"""The reservation ledger: one SQLite WAL file shared by every Gunicorn worker and the registration worker.

It caches what pod annotations say (the API server is the truth) plus the in-flight decisions that are not
on the API yet. One row per pod UID: node, per-device use and quota use, and a state:
`assumed` (filter chose it, annotations being written) -> `confirmed` (annotations on the pod) -> `bound`.
A row's `updated_at` is the time of the last decision about it — the filter's assume, the bind's re-check
(`record_checked`), a live event or a rebuild — never kept across a rewrite by a decision: the leader's
sweep reads it as the in-flight age and, with the state, as the row's version (workers/reconcile.py
rule 3). `set_state` (confirm, bound) changes the state and keeps the age.

Invariant 1 (never hand out the same capacity twice, across processes) lives in `assume`: the check of the
chosen node against every other reservation and the insert happen in one `BEGIN IMMEDIATE` transaction,
which holds SQLite's single write lock (app/state/ledgerdb.py: explicit transactions, never Python's
default ones, which would let a read-then-insert race).

The held reservations (app/state/holdstore.py) share the file and its transactions: an assume counts the
slots that block its asker, consumes the asker's own and displaces those it leaves no room for; every row
writer keeps invariant H1.

Beside a row this replica's deferred write confirmed, the pod as that write's answer showed it (table
`written`) is kept for one bind (`take_written`), which then needs no GET of the pod (app/bind/usecase.py).

Every change gets a sequence number (app/state/changelog.py) so each process refreshes its in-memory view
incrementally. One connection per process, opened after fork (app/state/ledgerdb.py). The schema:
app/state/schema.py; a row as data, its states and bind marks: app/state/rows.py; how it is stored and
read: app/state/rowstore.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from app.core.holds import blocks
from app.core.model import DeviceUse
from app.state.holdstore import Asking, Freeing
from app.state.rows import (
    ASSUMED,
    BIND_RUNNING,
    BIND_UNKNOWN,
    BOUND,
    COLUMNS,
    CONFIRMED,
    NO_BIND,
    Changes,
    Entry,
    Protected,
    RowState,
    entry_of,
    replaceable,
    row_state,
)
from app.state.rowstore import ROW_STATE, RowStore

__all__ = [
    "ASSUMED",
    "BOUND",
    "CONFIRMED",
    "LEDGER_FILE",
    "Changes",
    "Entry",
    "Ledger",
    "Protected",
    "RowState",
]

LEDGER_FILE = "ledger.db"


class Ledger(RowStore):
    """The reservations' writers (docs/ledger-writers.md), on this process's connection to the shared file,
    over the rows' storage (app/state/rowstore.py), the holds (app/state/holdstore.py), the change log and
    status rows (app/state/changelog.py) and the connection itself (app/state/ledgerdb.py)."""

    def __init__(self, state_dir: Path, *, timeout: float = 10.0) -> None:
        super().__init__(state_dir / LEDGER_FILE, timeout=timeout)

    def assume(
        self,
        uid: str,
        node: str,
        check: Callable[[list[Mapping[str, DeviceUse]] | None, dict[str, int]], Entry | None],
        quota_namespace: str | None = None,
        seen: tuple[int, int] | None = None,
        verified: RowState | None = None,
        asking: Asking | None = None,
    ) -> Entry | None:
        """Atomically re-check and reserve: `check(node_uses, quota_used)` sees the device uses of every
        OTHER reservation on `node` as committed now, and the quota used by the others in
        `quota_namespace` (empty when None: a namespace without limits needs no sum). It returns the entry to
        store (replacing this pod's previous one) or None when the pod no longer fits there.

        `seen`: the count and newest sequence number of those rows in the caller's view (`node_stamp`);
        when the committed ones still match, `check` gets None instead of their uses: the rows committed on
        the node are exactly the ones the view holds (none is newer than the view, and none is missing).

        Raises Protected, writing nothing, when the pod's own row may be bound (`rows.replaceable`):
        `verified` is the version of it read before a read of the pod found it unbound
        (app/filter/rowguard.py).

        `asking` (the asker, docs/held-reservations.md): the live slots on `node` that block it count as
        usage too (rule 2; `check` gets None only when the holds are also the version the decision saw);
        once the entry is stored its own slots are consumed (rule 3) and the holds on `node` it leaves no
        room for are displaced (rule 4), in the same transaction.
        """
        with self.transaction() as db:
            current, version = self._current_and_holds(db, uid)
            if not replaceable(current, verified):
                assert current is not None
                raise Protected(current)
            used = self.quota_used(db, quota_namespace, uid) if quota_namespace is not None else {}
            same = seen is not None and self.node_stamp(db, node, uid) == seen
            held: list[Mapping[str, DeviceUse]] = []
            # the holds the decision saw, when it saw none: there are none (the usual case reads nothing)
            holds = asking is not None and not (asking.none and version == asking.seen)
            if asking is not None and holds:
                slots = self._slots(db, "WHERE node = ?", (node,))
                held = [h.uses for h in slots if blocks(h, asking.asker, asking.now)]
                same = same and version == asking.seen
            entry = check(None if same else [*self.node_uses(db, node, uid), *held], used)
            if entry is not None:
                self._put(db, entry)
                if asking is not None and holds:
                    self._consume(db, asking, node)
                    self._enforce_h1(db, (node,), f"displaced by {asking.who}")
            return entry

    def record_checked(
        self,
        uid: str,
        node: str,
        check: Callable[[dict[str, dict[str, DeviceUse]]], Entry | None],
        token: str,
    ) -> Entry | None:
        """/bind's re-check: like `assume`, but `check` sees the other reservations on `node` by UID, so
        that it can merge them with the node's pods as the API shows them (each pod counted once). The
        row stored is `confirmed`, marked with the bind's `token` (a bind may now act on it), or with the
        mark of another bind of the pod still running (a duplicate bind's failure must not forget the row
        the first may be binding: docs/ledger-writers.md); a `bound` row is left as it is (what its pod
        was bound with is the live rules' to keep, workers/reconcile.py rule 6)."""
        with self.transaction() as db:
            entry = check(self.node_uses_by_uid(db, node, uid))
            if entry is not None:
                current = self._current(db, uid)
                if current is None or current.state != BOUND:
                    running = current is not None and current.bind.startswith(BIND_RUNNING)
                    entry = replace(
                        entry, state=CONFIRMED, bind=current.bind if current and running else token
                    )
                    self._put(db, entry)
                    self._enforce_h1(db, (node,), f"displaced by {entry.namespace}/{entry.name} (bind)")
            return entry

    def set_state(self, uid: str, state: str, *, only_from: Iterable[str] = ()) -> bool:
        """Move a reservation to `state` (optionally only from the given states); False if absent. A row
        made `bound` loses its bind mark (the bind's outcome is known)."""
        with self.transaction() as db:
            row = db.execute("SELECT state, bind FROM reservations WHERE uid = ?", (uid,)).fetchone()
            allowed = tuple(only_from)
            if row is None or (allowed and row[0] not in allowed):
                return False
            bind = NO_BIND if state == BOUND else row[1]
            if (row[0], row[1]) != (state, bind):
                db.execute(
                    "UPDATE reservations SET state = ?, bind = ?, seq = ? WHERE uid = ?",
                    (state, bind, self._next_seq(db), uid),
                )
            return True

    def bind_unknown(self, uid: str, token: str) -> bool:
        """A bind whose outcome it could not tell (the binding's answer lost, no re-read answered) ends:
        its row, still the one it marked, is marked `unknown` — a filter reads the pod before replacing it,
        the sweep or the pod's next event settles it (docs/ledger-writers.md)."""
        with self.transaction() as db:
            return bool(
                db.execute(
                    "UPDATE reservations SET bind = ?, seq = ? WHERE uid = ? AND bind = ? AND state != ?",
                    (BIND_UNKNOWN, self._next_seq(db), uid, token, BOUND),
                ).rowcount
            )

    def resolve_write(
        self, uid: str, allocation: str, *, written: bool, pod: Mapping[str, Any] | None = None
    ) -> bool:
        """A deferred allocation write's outcome (app/filter/write.py), on the row it was written for only —
        still `assumed`, same allocation: written -> `confirmed`, failed -> forgotten. False when the row
        was replaced, forgotten or moved on meanwhile (then nothing changes).

        `pod`: the pod as the write's answer showed it, kept for one bind of this row (`take_written`)."""
        with self.transaction() as db:
            row = db.execute(
                "SELECT 1 FROM reservations WHERE uid = ? AND state = ? AND allocation = ? AND bind = ?",
                (uid, ASSUMED, allocation, NO_BIND),
            ).fetchone()
            if row is None:
                return False
            if not written:
                return self._delete(db, uid)
            db.execute(
                "UPDATE reservations SET state = ?, seq = ? WHERE uid = ?",
                (CONFIRMED, self._next_seq(db), uid),
            )
            if pod is not None:
                db.execute(
                    "INSERT OR REPLACE INTO written (uid, allocation, pod) VALUES (?, ?, ?)",
                    (uid, allocation, orjson.dumps(pod)),
                )
            return True

    def take_written(self, uid: str) -> dict[str, Any] | None:
        """The pod as this replica's confirmed write of `uid` left it (`resolve_write`), handed out once:
        only while the row is still the `confirmed` one that write made (same allocation); gone after this
        call either way, and with the row, and on a rebuild (app/bind/usecase.py reads the pod then). Where
        there is none (the usual case outside the deferred write) nothing waits for the write lock."""
        with self._lock:
            if self._db.execute("SELECT 1 FROM written WHERE uid = ?", (uid,)).fetchone() is None:
                return None
        with self.transaction() as db:
            row = db.execute(
                "SELECT w.pod FROM written w JOIN reservations r ON r.uid = w.uid"
                " WHERE w.uid = ? AND r.state = ? AND r.allocation = w.allocation",
                (uid, CONFIRMED),
            ).fetchone()
            db.execute("DELETE FROM written WHERE uid = ?", (uid,))
        decoded = orjson.loads(row[0]) if row else None
        return decoded if isinstance(decoded, dict) else None

    def forget_unbound(self, uid: str, verified: RowState | None = None) -> bool:
        """A filter that placed the pod nowhere releases its previous reservation — only one no bind may
        have acted on, or the very version the caller verified unbound (`rows.replaceable`); True if
        removed."""
        with self.transaction() as db:
            current = self._current(db, uid)
            return current is not None and replaceable(current, verified) and self._delete(db, uid)

    def forget_in_flight(self, uid: str, namespace: str, name: str, token: str = NO_BIND) -> bool:
        """The failure path of bind: remove the pod's reservation only while it is in flight (`assumed` or
        `confirmed`), only if it is this pod's (namespace/name) and only if no other bind marked it (its
        mark is none or this bind's `token`): never a bound pod's, never another's, never one whose
        binding another bind may have sent."""
        with self.transaction() as db:
            row = db.execute(
                "SELECT 1 FROM reservations WHERE uid = ? AND namespace = ? AND name = ? AND state IN (?, ?)"
                " AND bind IN (?, ?)",
                (uid, namespace, name, ASSUMED, CONFIRMED, NO_BIND, token),
            ).fetchone()
            return self._delete(db, uid) if row else False

    # -- reconciliation (registration worker) -----------------------------------------------------------

    def upsert(self, entries: Iterable[Entry]) -> None:
        """Write rows as the API shows their pods (the worker's live rules); the holds they leave no room
        for are displaced (H1)."""
        with self.transaction() as db:
            for entry in entries:
                self._put(db, entry)
                self._enforce_h1(db, (entry.node,), f"displaced by {entry.namespace}/{entry.name} (bound)")

    def remove(self, uids: Iterable[str], free: Freeing | None = None) -> int:
        """Remove rows; with `free`, the nodes of those in flight are recorded as freed (`_delete`)."""
        with self.transaction() as db:
            return sum(self._delete(db, uid, free) for uid in uids)

    def remove_unchanged(self, rows: Iterable[RowState], free: Freeing | None = None) -> list[str]:
        """The sweep's removal: each row only if it is still exactly the one read (same state, same write
        time), checked in the same transaction — a /filter of another process that replaced it meanwhile
        (the pod filtered again) keeps its new reservation. Returns the uids removed; `free` as `remove`."""
        removed = []
        with self.transaction() as db:
            for row in rows:
                found = db.execute(
                    "SELECT 1 FROM reservations WHERE uid = ? AND state = ? AND updated_at = ?",
                    (row.uid, row.state, row.updated_at),
                ).fetchone()
                if found and self._delete(db, row.uid, free):
                    removed.append(row.uid)
        return removed

    def replace_all(self, entries: Iterable[Entry], keep: Callable[[Entry], bool] | None = None) -> None:
        """A rebuild: the ledger's rows become exactly `entries`; readers see a new epoch and reload. The
        holds are kept (those the new rows leave no room for are displaced: H1).

        Current rows for which `keep` returns True survive (and win over an entry with the same uid); they
        are read in the same transaction, so an assume committed meanwhile is never lost."""
        with self.transaction() as db:
            final = {entry.uid: entry for entry in entries}
            if keep is not None:
                current = (entry_of(row) for row in db.execute(f"SELECT {COLUMNS} FROM reservations"))
                final.update({row.uid: row for row in current if keep(row)})
            db.execute("DELETE FROM reservations")
            db.execute("DELETE FROM tombstones")
            db.execute("DELETE FROM written")
            for entry in final.values():
                self._put(db, entry)
            db.execute("UPDATE meta SET value = value + 1 WHERE key = 'epoch'")
            db.execute(
                "UPDATE meta SET value = (SELECT value FROM meta WHERE key = 'seq') WHERE key = 'pruned'"
            )
            held = [str(node) for (node,) in db.execute("SELECT DISTINCT node FROM holds")]
            self._enforce_h1(db, held, "displaced by a rebuild")  # the holds are kept, within H1

    def all_entries(self) -> list[Entry]:
        with self._lock:
            rows = self._db.execute(f"SELECT {COLUMNS} FROM reservations ORDER BY uid").fetchall()
        return [entry_of(row) for row in rows]

    def row_states(self) -> list[RowState]:
        """uid, state and write time of every row, nothing decoded: what the worker's sweep reads (decoding
        20,000 rows' device uses with `all_entries` costs ~0.4 s of CPU every sweep)."""
        with self._lock:
            rows = self._db.execute(ROW_STATE).fetchall()
        return [row_state(row) for row in rows]
