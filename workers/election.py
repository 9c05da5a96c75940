"""Who leads: no election, following kube-scheduler's Lease, or holding our own (HAMI_LEADER_ELECT_MODE).

- `HAMI_LEADER_ELECT=false`: always the leader (HAMi's DummyLeaderManager).
- `follow` (HAMi's way, reference §7): observe the Lease the co-located kube-scheduler holds. We lead iff
  `spec.holderIdentity` is our identity or starts with `<identity>_` (kube-scheduler identities are
  `<hostname>_<uuid>`; HAMi's bare prefix test also matched `sched-1` against `sched-10_<uuid>`) and
  `renewTime + leaseDurationSeconds > now`. Validity comes from the Lease's own renewTime, not from when we
  saw the event (HAMi quirk #42), and it is re-evaluated every retry period, so a Lease that stops being
  renewed makes us a follower within one retry period of its expiry. kube-scheduler runs in the same pod,
  on the same clock, so comparing its renewTime with our clock is safe.
- `acquire`: hold the Lease ourselves (`app.k8s.election`, kubernetes.leaderelection).

Every mode answers `leadership(now)`; the status loop asks it every retry period and acts on changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from app.k8s.client import Kube
from app.k8s.election import LeaseConfig, LeaseElector
from config.settings import LeaderSettings


@dataclass(frozen=True, slots=True)
class Leadership:
    leading: bool
    holder: str = ""  # the Lease holder as last seen
    expires_at: float = 0.0  # unix seconds the lease lapses unless renewed; 0: no election


def holds(holder: str, identity: str) -> bool:
    return bool(identity) and (holder == identity or holder.startswith(identity + "_"))


def parse_micro_time(value: Any) -> float | None:
    """A Lease's MicroTime (`2006-01-02T15:04:05.000000Z`) as unix seconds; None when absent or invalid."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def follow_verdict(lease: Mapping[str, Any] | None, identity: str, now: float) -> Leadership:
    """Follow mode: do we lead according to this Lease (None: no Lease)? Nil holder/duration/renew: no."""
    spec = lease.get("spec") if lease is not None else None
    if not isinstance(spec, Mapping):
        return Leadership(False)
    holder = spec.get("holderIdentity")
    holder = holder if isinstance(holder, str) else ""
    duration = spec.get("leaseDurationSeconds")
    renewed = parse_micro_time(spec.get("renewTime"))
    if not holder or not isinstance(duration, int) or isinstance(duration, bool) or renewed is None:
        return Leadership(False, holder)
    expires = renewed + duration
    return Leadership(holds(holder, identity) and now < expires, holder, expires)


class Elector(Protocol):
    def start(self) -> None: ...

    def stop(self, timeout: float) -> None: ...

    def leadership(self, now: float) -> Leadership: ...

    def step_down(self, hold_off: float) -> bool:
        """Hand leadership over on purpose; False when this mode cannot (it follows someone else's Lease)."""
        ...


class AlwaysLeader:
    def __init__(self, identity: str) -> None:
        self._identity = identity

    def step_down(self, hold_off: float) -> bool:
        return False  # the only replica: nobody to hand over to

    def start(self) -> None:
        """Nothing to run."""

    def stop(self, timeout: float) -> None:
        """Nothing to stop."""

    def leadership(self, now: float) -> Leadership:
        return Leadership(True, self._identity, 0.0)


class FollowLease:
    """Reads the Lease from the lease informer (started and stopped with the other informers)."""

    def __init__(self, lease: Callable[[], Mapping[str, Any] | None], identity: str) -> None:
        self._lease = lease
        self._identity = identity

    def start(self) -> None:
        """The informer runs on its own."""

    def stop(self, timeout: float) -> None:
        """The informer is stopped with the others."""

    def leadership(self, now: float) -> Leadership:
        return follow_verdict(self._lease(), self._identity, now)

    def step_down(self, hold_off: float) -> bool:
        return False  # kube-scheduler holds the Lease; it releases it when this pod stops


class AcquireLease:
    def __init__(self, kube: Kube, settings: LeaderSettings, on_change: Callable[[], None]) -> None:
        config = LeaseConfig(
            name=settings.resource_name,
            namespace=settings.resource_namespace,
            identity=settings.identity,
            lease_duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period,
        )
        self._elector = LeaseElector(kube, config, on_change)

    def start(self) -> None:
        self._elector.start()

    def stop(self, timeout: float) -> None:
        self._elector.stop(timeout)

    def step_down(self, hold_off: float) -> bool:
        self._elector.step_down(hold_off)
        return True

    def leadership(self, now: float) -> Leadership:
        state = self._elector.state()
        leading = state.leading and now < state.expires_at
        return Leadership(leading, state.holder, state.expires_at if state.leading else 0.0)
