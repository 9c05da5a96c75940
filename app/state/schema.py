"""The ledger's SQLite schema (app/state/ledger.py): the reservation rows, the change log (sequence numbers,
tombstones, epoch), the worker's status rows, the deferred writes' answers, the held reservations with the
capacity their endings freed and their endings' counts (app/state/holdstore.py; meta `holds` counts every
change of them), the PodGroups and their members the worker keeps for /filter, the gang members' allocation
writes held until their quorum is reserved and the gangs' attempts (app/state/podgroups.py), and the
per-namespace quota usage kept by triggers, so that an assume reads a namespace's total in one indexed lookup
instead of decoding every reservation of the namespace (thousands of rows at 20,000 running pods).
"""

from __future__ import annotations

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS reservations (
    uid TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    node TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('assumed', 'confirmed', 'bound')),
    uses BLOB NOT NULL,
    quota BLOB NOT NULL,
    allocation TEXT NOT NULL,
    updated_at REAL NOT NULL,
    seq INTEGER NOT NULL,
    bind TEXT NOT NULL DEFAULT '',
    priority INTEGER NOT NULL DEFAULT 0,
    started TEXT NOT NULL DEFAULT '',
    terminating INTEGER NOT NULL DEFAULT 0,
    gang TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS reservations_node ON reservations (node);
CREATE INDEX IF NOT EXISTS reservations_namespace ON reservations (namespace);
CREATE INDEX IF NOT EXISTS reservations_seq ON reservations (seq);
CREATE TABLE IF NOT EXISTS tombstones (seq INTEGER PRIMARY KEY, uid TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS status (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS written (uid TEXT PRIMARY KEY, allocation TEXT NOT NULL, pod BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS holds (
    key TEXT NOT NULL,
    slot TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('nomination', 'gang')),
    owner TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    priority INTEGER NOT NULL,
    node TEXT NOT NULL,
    uses BLOB NOT NULL,
    victims BLOB NOT NULL,
    reason TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (key, slot)
);
CREATE INDEX IF NOT EXISTS holds_node ON holds (node);
CREATE INDEX IF NOT EXISTS holds_owner ON holds (owner);
CREATE TABLE IF NOT EXISTS freed (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    node TEXT NOT NULL,
    cause TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS hold_endings (
    kind TEXT NOT NULL,
    cause TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (kind, cause)
);
INSERT OR IGNORE INTO meta (key, value) VALUES ('seq', 0), ('epoch', 1), ('pruned', 0), ('holds', 0);
CREATE TABLE IF NOT EXISTS podgroups (
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    uid TEXT NOT NULL,
    policy TEXT NOT NULL,
    min_count INTEGER NOT NULL,
    priority INTEGER,
    disruption TEXT NOT NULL,
    topology TEXT NOT NULL,
    PRIMARY KEY (namespace, name)
);
CREATE TABLE IF NOT EXISTS podgroup_members (
    uid TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    podgroup TEXT NOT NULL,
    name TEXT NOT NULL,
    node TEXT NOT NULL,
    pod BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS podgroup_members_group ON podgroup_members (namespace, podgroup);
CREATE TABLE IF NOT EXISTS gang_attempts (
    namespace TEXT NOT NULL,
    podgroup TEXT NOT NULL,
    uid TEXT NOT NULL,
    started REAL NOT NULL,
    abandoned INTEGER NOT NULL,
    resume REAL NOT NULL,
    PRIMARY KEY (namespace, podgroup)
);
CREATE TABLE IF NOT EXISTS gang_refusals (
    namespace TEXT NOT NULL,
    podgroup TEXT NOT NULL,
    reason TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (namespace, podgroup)
);
CREATE TABLE IF NOT EXISTS gang_writes (
    uid TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    podgroup TEXT NOT NULL,
    allocation TEXT NOT NULL,
    write BLOB NOT NULL
);
"""
# Columns added to a table after its first release: a file written before gets them (app/state/ledgerdb.py).
ADDED_COLUMNS = (
    ("reservations", "bind", "TEXT NOT NULL DEFAULT ''"),
    ("reservations", "priority", "INTEGER NOT NULL DEFAULT 0"),
    ("reservations", "started", "TEXT NOT NULL DEFAULT ''"),
    ("reservations", "terminating", "INTEGER NOT NULL DEFAULT 0"),
    ("reservations", "gang", "TEXT NOT NULL DEFAULT ''"),
)
# Quota usage per namespace, kept by triggers so that assume reads a namespace's total in one indexed lookup
# instead of decoding every reservation of the namespace (thousands of rows at 20,000 running pods). The
# implicit delete of INSERT OR REPLACE fires the delete trigger only with recursive_triggers on.
QUOTA_TABLE = """CREATE TABLE quota_used (
    namespace TEXT NOT NULL,
    resource TEXT NOT NULL,
    amount INTEGER NOT NULL,
    PRIMARY KEY (namespace, resource)
)"""
_QUOTA_ITEMS = "json_each(CAST({row}.quota AS TEXT))"
_QUOTA_ADD = f"""INSERT INTO quota_used (namespace, resource, amount)
    SELECT NEW.namespace, q.key, q.value FROM {_QUOTA_ITEMS.format(row="NEW")} q WHERE true
    ON CONFLICT (namespace, resource) DO UPDATE SET amount = amount + excluded.amount;"""
_QUOTA_SUBTRACT = f"""UPDATE quota_used
    SET amount = amount - (SELECT q.value FROM {_QUOTA_ITEMS.format(row="OLD")} q WHERE q.key = resource)
    WHERE namespace = OLD.namespace AND resource IN (SELECT q.key FROM {_QUOTA_ITEMS.format(row="OLD")} q);"""
QUOTA_TRIGGERS = (
    f"CREATE TRIGGER quota_insert AFTER INSERT ON reservations BEGIN {_QUOTA_ADD} END",
    f"CREATE TRIGGER quota_delete AFTER DELETE ON reservations BEGIN {_QUOTA_SUBTRACT} END",
    "CREATE TRIGGER quota_update AFTER UPDATE OF namespace, quota ON reservations"
    f" BEGIN {_QUOTA_SUBTRACT} {_QUOTA_ADD} END",
)
QUOTA_FILL = f"""INSERT INTO quota_used (namespace, resource, amount)
    SELECT r.namespace, q.key, SUM(q.value) FROM reservations r, {_QUOTA_ITEMS.format(row="r")} q
    GROUP BY r.namespace, q.key"""
