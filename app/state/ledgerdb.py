"""One process's SQLite connection to the ledger file (app/state/ledger.py): how it is opened and how every
statement on it is ordered, apart from what the rows mean.

Invariants owned here:

- One connection per process, opened after fork; the threads of a process take turns on it (one RLock
  around every statement and transaction), processes coordinate through SQLite's locks.
- `isolation_level=None` and explicit transactions: Python's default sqlite3 transactions would let a
  read-then-insert race (research/ecosystem.md §3.1). A write transaction is `BEGIN IMMEDIATE`, which takes
  SQLite's single write lock first, so nothing read inside it can go stale before COMMIT — what invariant 1
  (`Ledger.assume`) rests on; a read transaction (`BEGIN`) sees one consistent snapshot of the WAL.
- Opening never fails because other processes open a NEW file at the same moment (Gunicorn workers
  booting): the switch to WAL is retried; the schema (app/state/schema.py) is created or completed in one
  transaction, so a file written before the quota table or a later column existed gets it (filled).
- `data_version` moves on every commit, ours included.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.state.schema import ADDED_COLUMNS, QUOTA_FILL, QUOTA_TABLE, QUOTA_TRIGGERS, SCHEMA


def _enable_wal(db: sqlite3.Connection, timeout: float) -> None:
    """Switch the file to WAL (persistent: a no-op once done). Processes opening a NEW ledger at the same
    moment (Gunicorn workers booting) can get SQLITE_BUSY here without SQLite's busy handler being
    consulted, so the switch is retried for up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class LedgerConnection:
    """The ledger file at `path`, opened (and its schema made current) by this process."""

    def __init__(self, path: Path, *, timeout: float = 10.0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._writes = 0
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        _enable_wal(self._db, timeout)
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA recursive_triggers=ON")
        with self.transaction():
            for statement in SCHEMA.strip().split(";"):
                if statement.strip():
                    self._db.execute(statement)
            for table, column, kind in ADDED_COLUMNS:  # a file written before the column existed
                names = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
                if column not in names:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            if not self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'quota_used'").fetchone():
                self._db.execute(QUOTA_TABLE)
                for trigger in QUOTA_TRIGGERS:
                    self._db.execute(trigger)
                self._db.execute(QUOTA_FILL)  # a ledger written before the table existed

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE takes the write lock first, so nothing read inside can go stale before COMMIT;
        a read transaction (BEGIN) sees one consistent snapshot of the WAL."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            if write:
                self._writes += 1

    def data_version(self) -> tuple[int, int]:
        """Changes whenever anyone commits: SQLite's data_version covers other connections, and our own
        commits are counted here (data_version does not change for the connection's own writes)."""
        with self._lock:
            (version,) = self._db.execute("PRAGMA data_version").fetchone()
            return (int(version), self._writes)
