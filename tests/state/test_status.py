"""app.state.status: who may decide, and the reason a replica gives when it may not (invariant 5)."""

from __future__ import annotations

import pytest

from app.state.status import HEARTBEAT_MAX_AGE, ReplicaStatus

NOW = 1000.0


def status(**rows: object) -> ReplicaStatus:
    base: dict[str, object] = {"leader": True, "synced": True, "heartbeat": NOW, "lease_expires_at": 0}
    return ReplicaStatus.from_rows({**base, **rows})


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        ({}, ""),
        ({"lease_expires_at": NOW + 1}, ""),
        ({"heartbeat": NOW - HEARTBEAT_MAX_AGE - 1}, "the registration worker is not running"),
        ({"leader": False, "leader_identity": "b"}, "this replica is not the leader (leader: b)"),
        (
            {"leader": False, "lease_expires_at": NOW + 3, "leader_identity": "b_1"},
            "this replica is not the leader (leader: b_1)",
        ),
        ({"leader": False}, "this replica is not the leader"),
        # the Lease as last seen has run out: nobody leads, whoever the holder was (often this replica)
        (
            {"lease_expires_at": NOW, "leader_identity": "a_1"},
            "no leader: the Lease held by a_1 expired, as last seen by the registration worker",
        ),
        (
            {"leader": False, "lease_expires_at": NOW - 5, "leader_identity": "a_1"},
            "no leader: the Lease held by a_1 expired, as last seen by the registration worker",
        ),
        (
            {"lease_expires_at": NOW - 5},
            "no leader: the Lease expired, as last seen by the registration worker",
        ),
        ({"synced": False}, "this replica is still syncing its cache"),
    ],
)
def test_why_not(rows: dict[str, object], why: str) -> None:
    replica = status(**rows)
    assert replica.why_not(NOW) == why
    assert replica.may_decide(NOW) is (why == "")
