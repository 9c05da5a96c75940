"""PodGroups and their member pods, kept in the ledger file by the registration worker for /filter.

Why: a gang member's /filter decides for the whole quorum (app/filter/gang.py), so it needs the PodGroup's
quorum and settings and every member's requests and bound state — without an API call on kube-scheduler's
serial path. The worker's informers see both (workers/podgroups.py) and write them here; every Gunicorn
worker reads the few rows of one gang when one of its members is filtered (two indexed lookups).

Tables (app/state/schema.py): `podgroups` (one row per PodGroup: quorum, priority, disruption mode,
topology key) and `podgroup_members` (one row per pod naming a PodGroup: its node when bound, and the pod
as the worker's informer keeps it — containers' resources and the annotations a decision reads — so that
the planner fits each member with its own requests). The status row `workload_api` says whether the API
server serves PodGroups at all (absent: not yet known).

Also here, table `gang_writes`: a gang member's allocation write (app/filter/write.py), held by /filter
until its quorum holds reservations (app/filter/gang.py says why), then sent by whichever Gunicorn worker
completes the quorum.

Invariant: the PodGroup tables are written only by the registration worker (one writer); a worker start
clears them before its informers fill them again, so no row outlives its object across a restart. A held
write is only ever sent for the very row it was made for (`release_if_reserved`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from app.core.gang import Attempts, PodGroupFacts
from app.state.ledger import Ledger

WORKLOAD_API = "workload_api"  # status row: the API server serves scheduling.k8s.io/v1beta1 podgroups

_GROUP_COLUMNS = "namespace, name, uid, policy, min_count, priority, disruption, topology"
_MEMBER_COLUMNS = "uid, namespace, podgroup, name, node, pod"


@dataclass(frozen=True, slots=True)
class MemberFacts:
    """One pod naming a PodGroup: its node when bound ("" otherwise) and the pod as the informer keeps it."""

    uid: str
    namespace: str
    podgroup: str
    name: str
    node: str
    pod: dict[str, Any]

    @property
    def bound(self) -> bool:
        return bool(self.node)


@dataclass(frozen=True, slots=True)
class Gang:
    """A PodGroup and the members the worker has seen (in UID order)."""

    group: PodGroupFacts
    members: tuple[MemberFacts, ...]

    @property
    def bound(self) -> int:
        return sum(m.bound for m in self.members)


@dataclass(frozen=True, slots=True)
class Quorum:
    """A gang as a member's /filter found it, for that member's allocation write (app/filter/gang.py): the
    write is held until `min_count` members hold reservations (`members`: the UIDs of the members with
    devices, the asker included; `free`: how many members need no device at all)."""

    namespace: str
    podgroup: str
    min_count: int
    members: tuple[str, ...]
    free: int = 0


def _group(row: tuple[Any, ...]) -> PodGroupFacts:
    namespace, name, uid, policy, min_count, priority, disruption, topology = row
    return PodGroupFacts(
        str(namespace),
        str(name),
        str(uid),
        str(policy),
        int(min_count),
        None if priority is None else int(priority),
        str(disruption),
        str(topology),
    )


def _member(row: tuple[Any, ...]) -> MemberFacts:
    uid, namespace, podgroup, name, node, pod = row
    decoded = orjson.loads(pod)
    return MemberFacts(
        str(uid),
        str(namespace),
        str(podgroup),
        str(name),
        str(node),
        decoded if isinstance(decoded, dict) else {},
    )


class PodGroups:
    """The tables on one process's ledger connection."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    # -- the worker (one writer) --------------------------------------------------------------------------

    def clear(self) -> None:
        with self.ledger.transaction() as db:
            for table in ("podgroups", "podgroup_members", "gang_attempts", "gang_refusals"):
                db.execute(f"DELETE FROM {table}")

    def set_served(self, served: bool) -> None:
        self.ledger.set_status({WORKLOAD_API: served})

    def put_groups(self, groups: Iterable[PodGroupFacts]) -> None:
        with self.ledger.transaction() as db:
            db.executemany(
                f"INSERT OR REPLACE INTO podgroups ({_GROUP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (g.namespace, g.name, g.uid, g.policy, g.min_count, g.priority, g.disruption, g.topology)
                    for g in groups
                ],
            )

    def drop_groups(self, keys: Iterable[tuple[str, str]]) -> None:
        """PodGroups deleted: their rows, their attempts and their last refusal go."""
        found = list(keys)
        with self.ledger.transaction() as db:
            db.executemany("DELETE FROM podgroups WHERE namespace = ? AND name = ?", found)
            db.executemany("DELETE FROM gang_attempts WHERE namespace = ? AND podgroup = ?", found)
            db.executemany("DELETE FROM gang_refusals WHERE namespace = ? AND podgroup = ?", found)

    def put_members(self, members: Iterable[MemberFacts]) -> None:
        with self.ledger.transaction() as db:
            db.executemany(
                f"INSERT OR REPLACE INTO podgroup_members ({_MEMBER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                [(m.uid, m.namespace, m.podgroup, m.name, m.node, orjson.dumps(m.pod)) for m in members],
            )

    def drop_members(self, uids: Iterable[str]) -> None:
        with self.ledger.transaction() as db:
            db.executemany("DELETE FROM podgroup_members WHERE uid = ?", [(uid,) for uid in uids])

    # -- allocation writes held until the quorum is reserved (any Gunicorn worker) -------------------------

    def hold_write(self, uid: str, quorum: Quorum, allocation: str, write: bytes) -> None:
        """Keep a member's allocation write (replacing an earlier one of the pod) until its quorum is
        reserved; `allocation` is its ledger row's, which the write may only be sent for."""
        with self.ledger.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO gang_writes (uid, namespace, podgroup, allocation, write)"
                " VALUES (?, ?, ?, ?, ?)",
                (uid, quorum.namespace, quorum.podgroup, allocation, write),
            )

    def drop_write(self, uid: str) -> None:
        with self.ledger.transaction() as db:
            db.execute("DELETE FROM gang_writes WHERE uid = ?", (uid,))

    def holds_write(self, uid: str) -> bool:
        with self.ledger.transaction(write=False) as db:
            return db.execute("SELECT 1 FROM gang_writes WHERE uid = ?", (uid,)).fetchone() is not None

    def release_if_reserved(self, quorum: Quorum) -> list[bytes]:
        """When at least `min_count` members hold reservations (rows in any state, counted in the same
        transaction), every held write of the gang, taken out: only those whose row is still the one they
        were made for (`assumed`, same allocation); the others are dropped. Else nothing (and nothing
        changes)."""
        uids = list(quorum.members)
        marks = ", ".join("?" * len(uids))
        with self.ledger.transaction() as db:
            (count,) = db.execute(
                f"SELECT count(*) FROM reservations WHERE uid IN ({marks})", uids
            ).fetchone()
            if int(count) + quorum.free < quorum.min_count:
                return []
            found = db.execute(
                "SELECT g.write FROM gang_writes g JOIN reservations r ON r.uid = g.uid"
                " WHERE g.namespace = ? AND g.podgroup = ? AND r.state = 'assumed'"
                " AND r.allocation = g.allocation",
                (quorum.namespace, quorum.podgroup),
            ).fetchall()
            db.execute(
                "DELETE FROM gang_writes WHERE namespace = ? AND podgroup = ?",
                (quorum.namespace, quorum.podgroup),
            )
        return [bytes(row[0]) for row in found]

    def attempts(self, group: PodGroupFacts) -> Attempts:
        """The gang's attempts (app/core/gang.py), for this incarnation of the PodGroup (its UID)."""
        with self.ledger.transaction(write=False) as db:
            row = db.execute(
                "SELECT started, abandoned, resume FROM gang_attempts WHERE namespace = ? AND podgroup = ?"
                " AND uid = ?",
                (group.namespace, group.name, group.uid),
            ).fetchone()
        return Attempts(float(row[0]), int(row[1]), float(row[2])) if row else Attempts()

    def set_attempts(self, group: PodGroupFacts, attempts: Attempts) -> None:
        """Store the gang's attempts."""
        with self.ledger.transaction() as db:
            key = (group.namespace, group.name)
            db.execute(
                "INSERT OR REPLACE INTO gang_attempts (namespace, podgroup, uid, started, abandoned, resume)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (*key, group.uid, attempts.started, attempts.abandoned, attempts.resume),
            )

    def forget_attempts(self, keys: Iterable[tuple[str, str]]) -> None:
        """The gangs (namespace, name) made progress (a member bound): their attempts start afresh."""
        with self.ledger.transaction() as db:
            db.executemany("DELETE FROM gang_attempts WHERE namespace = ? AND podgroup = ?", list(keys))

    def refused(self, namespace: str, podgroup: str, reason: str, at: float) -> None:
        """Remember why the gang's quorum was last refused (for inspect)."""
        with self.ledger.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO gang_refusals (namespace, podgroup, reason, at) VALUES (?, ?, ?, ?)",
                (namespace, podgroup, reason, at),
            )

    def refusals(self) -> dict[tuple[str, str], tuple[str, float]]:
        """(namespace, podgroup) -> the last refusal's reason and time."""
        with self.ledger.transaction(write=False) as db:
            rows = db.execute("SELECT namespace, podgroup, reason, at FROM gang_refusals").fetchall()
        return {(str(ns), str(group)): (str(reason), float(at)) for ns, group, reason, at in rows}

    # -- readers (/filter, inspect, the sweep) ------------------------------------------------------------

    def served(self) -> bool | None:
        """Does the API server serve PodGroups (None: the worker has not found out yet)?"""
        value = self.ledger.status().get(WORKLOAD_API)
        return value if isinstance(value, bool) else None

    def gang(self, namespace: str, name: str) -> Gang | None:
        """The PodGroup `namespace/name` and its members, read in one transaction; None when unknown."""
        with self.ledger.transaction(write=False) as db:
            row = db.execute(
                f"SELECT {_GROUP_COLUMNS} FROM podgroups WHERE namespace = ? AND name = ?", (namespace, name)
            ).fetchone()
            if row is None:
                return None
            members = db.execute(
                f"SELECT {_MEMBER_COLUMNS} FROM podgroup_members WHERE namespace = ? AND podgroup = ?"
                " ORDER BY uid",
                (namespace, name),
            ).fetchall()
        return Gang(_group(row), tuple(_member(m) for m in members))

    def gangs(self) -> list[Gang]:
        """Every PodGroup the worker knows with its members (inspect, the sweep), by namespace and name."""
        with self.ledger.transaction(write=False) as db:
            groups = db.execute(f"SELECT {_GROUP_COLUMNS} FROM podgroups ORDER BY namespace, name").fetchall()
            members = db.execute(f"SELECT {_MEMBER_COLUMNS} FROM podgroup_members ORDER BY uid").fetchall()
        by_group: dict[tuple[str, str], list[MemberFacts]] = {}
        for row in members:
            member = _member(row)
            by_group.setdefault((member.namespace, member.podgroup), []).append(member)
        return [
            Gang(group, tuple(by_group.get((group.namespace, group.name), ())))
            for group in map(_group, groups)
        ]
