"""The replica's status, written by the registration worker and read by every Gunicorn worker.

The worker writes these rows into the ledger's status table; the HTTP side derives from them whether this
replica may decide (leader and synced) and whether it is Ready. Time is an argument so the rules are
testable without a clock.

Rows (all written by `workers`):
- `leader` (bool): this replica currently holds (acquire) or follows (follow) the Lease;
- `identity` (str): our identity; `leader_identity` (str): the Lease holder as last seen;
- `lease_expires_at` (float, unix seconds): when our leadership lapses unless renewed (0 without election);
- `synced` (bool): the ledger was rebuilt from the API and a registration pass completed as leader;
- `heartbeat` (float, unix seconds): the worker's loop is alive (written at least every retry period);
- `generation` (int): the inventory snapshot generation last published.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

HEARTBEAT_MAX_AGE = 10.0  # seconds: older means the registration worker is stuck or gone


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    leader: bool = False
    identity: str = ""
    leader_identity: str = ""
    lease_expires_at: float = 0.0
    synced: bool = False
    heartbeat: float = 0.0
    generation: int = 0
    draining: str = ""  # why this replica hands over (its node is cordoned); "" when it does not

    @classmethod
    def from_rows(cls, rows: Mapping[str, object]) -> ReplicaStatus:
        def number(key: str) -> float:
            value = rows.get(key, 0)
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0

        return cls(
            leader=rows.get("leader") is True,
            identity=str(rows.get("identity") or ""),
            leader_identity=str(rows.get("leader_identity") or ""),
            lease_expires_at=number("lease_expires_at"),
            synced=rows.get("synced") is True,
            heartbeat=number("heartbeat"),
            generation=int(number("generation")),
            draining=str(rows.get("draining") or ""),
        )

    def is_leader(self, now: float) -> bool:
        """Leader with an unexpired lease (0 = no election: leadership does not lapse)."""
        return self.leader and (self.lease_expires_at == 0 or now < self.lease_expires_at)

    def heartbeat_fresh(self, now: float) -> bool:
        return now - self.heartbeat <= HEARTBEAT_MAX_AGE

    def may_decide(self, now: float) -> bool:
        return self.is_leader(now) and self.synced and self.heartbeat_fresh(now)

    def why_not(self, now: float) -> str:
        """A short, user-facing reason why this replica does not decide (empty when it does)."""
        if not self.heartbeat_fresh(now):
            return "the registration worker is not running"
        if not self.is_leader(now):
            if self.lease_expires_at and now >= self.lease_expires_at:
                # Nobody leads by this Lease: naming its holder as "leader" would point at a replica
                # (often this one) that does not decide either.
                holder = f" held by {self.leader_identity}" if self.leader_identity else ""
                return f"no leader: the Lease{holder} expired, as last seen by the registration worker"
            holder = f" (leader: {self.leader_identity})" if self.leader_identity else ""
            return f"this replica is not the leader{holder}"
        if not self.synced:
            return "this replica is still syncing its cache"
        return ""
