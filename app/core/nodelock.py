"""HAMi's node lock value and the pure rules for taking it (reference §5.2, quirks #26–#29).

The device plugin finds the pod it is allocating for by reading `hami.io/mutex.lock`, so the value
`<RFC3339>,<namespace>,<pod>` is a wire contract. This module formats and parses it and decides, from the
current value, the clock (an argument) and what is known about the holder, whether a binding pod may take
the lock. The API calls (GET, CAS patch with resourceVersion, retries) live in `app.k8s.nodelock`.

Rules (HAMi's, with the fixes recorded in docs/compatibility.md):
- no lock: acquire; our own lock (same namespace/name): re-enter;
- holder deleted, or in a terminal phase (HAMi #3047): take over at once;
- holder bound to this node with its allocation finished — bind-phase `success` or `failed`, or admitted
  by the kubelet (Running, or a `hostIP` in its status: every Allocate of the pod is done by then): take
  over at once. HAMi's plugins release the lock right then, so such a lock is a release that got lost, or
  a lock no plugin releases (our `hami.io/bind.lock`); nobody will ever need it again;
- expired (older than the timeout): take over — unless the holder is still waiting for its device
  allocation (HAMi #3096: handing over then makes the device plugin serve the wrong pod). Then we wait until
  the holder resolves, but never longer than a second timeout period (a bounded stall, never a stuck node);
- a value that does not parse (HAMi: the node is unusable until a human removes it, #26), or that names
  no pod (an empty namespace or name next to a time): treated as expired, since nobody can own it;
- a time further in the future than the timeout (no working clock wrote it; HAMi would honour it until
  then, locking the node for good): treated as expired too;
- otherwise: contention, a retryable error.

The same rules tell the leader's lock sweeper (workers/locksweep.py) which locks nobody needs any more:
exactly those any other pod would take over now (`abandoned`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

LOCK_ANNOTATION = "hami.io/mutex.lock"
CONTENTION = "node lock contention"

# Go's time.Parse(time.RFC3339, ...): ASCII digits, an upper-case `T` and `Z` (lower case does not parse).
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$",
    re.ASCII,
)


class LockParseError(ValueError):
    """A lock annotation value that is not HAMi's format."""


@dataclass(frozen=True, slots=True)
class LockValue:
    time: datetime
    namespace: str = ""
    name: str = ""

    @property
    def legacy(self) -> bool:
        """A bare timestamp: written by old schedulers, owned by nobody (quirk #27)."""
        return not self.namespace and not self.name


def parse_rfc3339(text: str) -> datetime:
    match = _RFC3339.match(text)
    if match is None:
        raise LockParseError(f'parsing time "{text}" as RFC3339: cannot parse')
    try:
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise LockParseError(f'parsing time "{text}" as RFC3339: {exc}') from None


def format_rfc3339(moment: datetime) -> str:
    """Go's time.RFC3339 layout: seconds precision, `Z` for UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    text = moment.replace(microsecond=0).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def format_lock(now: datetime, namespace: str, name: str) -> str:
    return f"{format_rfc3339(now)},{namespace},{name}"


def parse_lock(value: str) -> LockValue:
    if "," not in value:
        return LockValue(parse_rfc3339(value))
    parts = value.split(",")
    if len(parts) != 3:
        raise LockParseError(f"malformed lock annotation: expected 3 parts, got {len(parts)} from {value}")
    return LockValue(parse_rfc3339(parts[0]), parts[1], parts[2])


def is_owned_by(value: str, namespace: str, name: str) -> bool:
    """HAMi's owner check: a new-format value ending with `,<ns>,<name>`."""
    return value.endswith(f",{namespace},{name}")


class Holder(enum.Enum):
    """What the API says about the pod named in a lock."""

    GONE = "gone"
    TERMINAL = "terminal"
    PENDING_ALLOCATION = "pending-allocation"
    ALLOCATED = "allocated"
    ACTIVE = "active"


class Verdict(enum.Enum):
    ACQUIRE = "acquire"
    REENTER = "reenter"
    TAKE_OVER = "take-over"
    CONTENDED = "contended"
    NEED_HOLDER = "need-holder"


@dataclass(frozen=True, slots=True)
class LockDecision:
    verdict: Verdict
    why: str = ""


def decide(
    value: str | None,
    namespace: str,
    name: str,
    now: datetime,
    timeout: timedelta,
    holder: Holder | None = None,
) -> LockDecision:
    """Decide whether pod `namespace/name` may take the lock whose current value is `value`.

    Returns NEED_HOLDER when the answer depends on the holder pod and `holder` was not given; the caller
    looks the holder up (one GET) and calls again.
    """
    if value is None:
        return LockDecision(Verdict.ACQUIRE)
    try:
        lock = parse_lock(value)
    except LockParseError as exc:
        return LockDecision(Verdict.TAKE_OVER, f"unparsable lock value: {exc}")
    age = now - lock.time
    if not lock.legacy and lock.namespace == namespace and lock.name == name:
        if age > timeout:
            return LockDecision(Verdict.TAKE_OVER, "our own lock expired; stamping it again")
        return LockDecision(Verdict.REENTER)
    if -age > timeout:
        moment = value.split(",", 1)[0]
        return LockDecision(Verdict.TAKE_OVER, f"lock time {moment} is {-age} in the future")
    if lock.legacy:
        if age > timeout:
            return LockDecision(Verdict.TAKE_OVER, f"legacy lock expired {age - timeout} ago")
        return LockDecision(Verdict.CONTENDED, f"legacy lock held for {age}")
    if not lock.namespace or not lock.name:
        return LockDecision(Verdict.TAKE_OVER, f"lock names no pod: {value!r}")
    if holder is None:
        return LockDecision(Verdict.NEED_HOLDER)
    if holder in (Holder.GONE, Holder.TERMINAL, Holder.ALLOCATED):
        return LockDecision(Verdict.TAKE_OVER, f"holder {lock.namespace}/{lock.name} is {holder.value}")
    if age > timeout:
        if holder is Holder.PENDING_ALLOCATION and age <= 2 * timeout:
            return LockDecision(
                Verdict.CONTENDED,
                f"lock expired but holder {lock.namespace}/{lock.name} still waits for allocation",
            )
        return LockDecision(Verdict.TAKE_OVER, f"lock of {lock.namespace}/{lock.name} expired")
    return LockDecision(Verdict.CONTENDED, f"held by {lock.namespace}/{lock.name}")


# No pod can have this name (not a DNS-1123 label), so the sweeper never "re-enters" a lock.
_SWEEPER = "(lock-sweeper)"


def abandoned(value: str, now: datetime, timeout: timedelta, holder: Holder | None = None) -> LockDecision:
    """Whether a lock is left over: TAKE_OVER (with why) when any other pod would take it over now,
    NEED_HOLDER when that depends on the holder pod, otherwise CONTENDED (still needed)."""
    return decide(value, _SWEEPER, _SWEEPER, now, timeout, holder)


def contention_message(node: str, timeout: timedelta) -> str:
    """HAMi's error text: `node <n> has been locked within <timeout>: node lock contention`."""
    return f"node {node} has been locked within {go_duration(timeout)}: {CONTENTION}"


def _fraction(value: int, unit: int) -> str:
    whole, rest = divmod(value, unit)
    if rest == 0:
        return str(whole)
    digits = str(rest).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def go_duration(delta: timedelta) -> str:
    """Go's time.Duration.String: `5m0s`, `1h0m0s`, `1.5s`, `500ms`, `30s`."""
    nanoseconds = (delta // timedelta(microseconds=1)) * 1000
    if nanoseconds == 0:
        return "0s"
    sign, nanoseconds = ("-" if nanoseconds < 0 else ""), abs(nanoseconds)
    if nanoseconds < 1_000_000_000:
        if nanoseconds < 1_000_000:
            return f"{sign}{_fraction(nanoseconds, 1000)}µs"
        return f"{sign}{_fraction(nanoseconds, 1_000_000)}ms"
    hours, rest = divmod(nanoseconds, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = f"{hours}h{minutes}m" if hours else f"{minutes}m" if minutes else ""
    return f"{sign}{text}{_fraction(rest, 10**9)}s"


def parse_go_duration(text: str) -> timedelta:
    """Parse Go duration syntax (`5m`, `1h30m`, `90s`, `1.5h`, `300ms`) as HAMI_NODELOCK_EXPIRE uses."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    stripped = text.strip()
    if stripped in ("0", "+0", "-0"):
        return timedelta(0)
    parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", stripped)
    if not parts or "".join(n + u for n, u in parts) != stripped.lstrip("+"):
        raise ValueError(f'time: invalid duration "{text}"')
    return timedelta(seconds=sum(float(n) * units[u] for n, u in parts))


BIND_PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
PHASE_ALLOCATING = "allocating"
PHASE_SUCCESS = "success"
TO_ALLOCATE_SUFFIX = "-devices-to-allocate"  # HAMi's per-vendor to-allocate annotation keys
PHASE_FAILED = "failed"


def _devices_left(annotations: Mapping[str, Any]) -> bool:
    """Whether a device plugin still has a device group to allocate (`hami.io/<vendor>-devices-to-allocate`
    with a group left): `success` is then one vendor's plugin finishing first on a pod that asks for
    several vendors (HAMi's multi-vendor quirk, vendors §1.5), not the end of the pod's allocation."""
    return any(
        key.endswith(TO_ALLOCATE_SUFFIX) and isinstance(value, str) and value.strip(";:, ")
        for key, value in annotations.items()
    )


def classify_holder(
    pod: Mapping[str, Any] | None,
    node: str,
    assigned_node_annotation: str,
    now: float,
    stale_after: float = 60.0,
    locked_at: float | None = None,
) -> Holder:
    """What the pod named in `node`'s lock still needs it for (`now`, `locked_at` in unix seconds).

    GONE: deleted, now assigned to another node, or never bound and its bind attempt older than
    `stale_after` — both its bind-time and the lock's own time, whichever is later (its bind failed and
    nobody is coming back for this lock); TERMINAL: Succeeded or Failed;
    PENDING_ALLOCATION: bound here and waiting for a device plugin's Allocate (bind-phase still
    `allocating`, or `success` while a to-allocate annotation still names devices: another vendor's plugin
    finished first); ALLOCATED: bound here and its allocation finished (bind-phase `failed`, `success` with
    nothing left to allocate, or admitted by the kubelet: Running, or a `hostIP` in its status); ACTIVE:
    anything else (e.g. its bind is in flight).
    """
    if pod is None:
        return Holder.GONE
    metadata = pod.get("metadata")
    raw = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    annotations: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    if phase in ("Succeeded", "Failed"):
        return Holder.TERMINAL
    assigned = annotations.get(assigned_node_annotation)
    if assigned is not None and assigned != node:
        return Holder.GONE
    spec = pod.get("spec")
    bound_to = spec.get("nodeName") if isinstance(spec, Mapping) else None
    bind_phase = annotations.get(BIND_PHASE)
    if bound_to == node and (
        bind_phase == PHASE_FAILED
        or (bind_phase == PHASE_SUCCESS and not _devices_left(annotations))
        or phase == "Running"
        or (isinstance(status, Mapping) and status.get("hostIP"))
    ):
        return Holder.ALLOCATED
    if bound_to == node and bind_phase in (PHASE_ALLOCATING, PHASE_SUCCESS):
        return Holder.PENDING_ALLOCATION
    if not bound_to:
        # The latest sign of life counts: a pod whose earlier bind failed still carries that attempt's
        # bind-time while a new attempt, which just took this lock, has not written its own yet.
        stamps = [t for t in (_unix_seconds(annotations.get(BIND_TIME)), locked_at) if t is not None]
        if stamps and now - max(stamps) > stale_after:
            return Holder.GONE
    return Holder.ACTIVE


def _unix_seconds(value: object) -> float | None:
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None
