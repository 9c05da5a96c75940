"""A node's handshake and health, as HAMi's `CheckHealth` decides it (reference §2.3), pure.

Generic rule (`device.CheckHealth`), on the vendor's handshake annotation:
- the value contains `Requesting`: split at the first `_`; no `_` or a timestamp that does not parse
  (layout `2006-01-02 15:04:05`) -> healthy; stamped less than 60 s ago -> healthy; older, but the node's
  allocatable device count is > 0 -> healthy; older and allocatable 0/absent -> unhealthy;
- anything else (absent, the historical `Reported ...` / `Deleted_...`): healthy, and the leader stamps
  `Requesting_<now>` (the caller writes it; a follower only reads).

NVIDIA bookkeeping (`NvidiaGPUDevices.CheckHealth`) on top, per node: the last allocatable count and register
annotation seen. `current == 0`: unchanged from a 0 -> the generic verdict; dropped to 0 -> unhealthy (and
remember 0). Count changed -> healthy. Otherwise the generic verdict.

Times are UTC: HAMi formats and parses the stamp in the scheduler's local zone, and our containers run in
UTC, so the strings are the same; a HAMi scheduler in another zone reading our stamps (or we reading its
stamps) would see them shifted by the zone offset, which at worst lengthens or shortens the 60 s grace.

HAMi's `needUpdate` flag is not reproduced: the registration worker always publishes what the annotations
say now (HAMi keeps stale devices when the flag is false, quirks #23/#24), so the flag has no use here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

REQUESTING = "Requesting"
HANDSHAKE_TIMEOUT = timedelta(seconds=60)
_LAYOUT = "%Y-%m-%d %H:%M:%S"
# Go's time.Parse with layout "2006-01-02 15:04:05": fixed two-digit fields; a fractional second is
# accepted after the seconds even though the layout has none.
_STAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.\d+)?$", re.ASCII)


def handshake_value(now: datetime) -> str:
    """The value the leader writes: `Requesting_<YYYY-MM-DD HH:MM:SS>` in UTC."""
    return f"{REQUESTING}_{now.astimezone(UTC).strftime(_LAYOUT)}"


def parse_stamp(text: str) -> datetime | None:
    match = _STAMP.match(text)
    if match is None:
        return None
    try:
        year, month, day, hour, minute, second = (int(part) for part in match.groups())
        return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:  # month 13, February 30, ...
        return None


@dataclass(frozen=True, slots=True)
class Handshake:
    """The generic verdict: healthy or not (with why), and the stamp to write when one is due."""

    healthy: bool
    stamp: str | None = None
    reason: str = ""


def check_handshake(value: str | None, allocatable: int, now: datetime, resource: str) -> Handshake:
    """HAMi `device.CheckHealth` for one vendor; `allocatable` is `status.allocatable[resource]`."""
    if value is None or REQUESTING not in value:
        return Handshake(True, stamp=handshake_value(now))
    _, separator, text = value.partition("_")
    if not separator:
        return Handshake(True)
    stamped = parse_stamp(text)
    if stamped is None or now < stamped + HANDSHAKE_TIMEOUT:
        return Handshake(True)
    if allocatable > 0:
        return Handshake(True)
    return Handshake(
        False,
        reason=f"handshake {value!r} is older than {int(HANDSHAKE_TIMEOUT.total_seconds())}s "
        f"and allocatable {resource} is 0",
    )


@dataclass(frozen=True, slots=True)
class Reported:
    """What was last seen of one node (HAMi `ReportedGPUNum`, `ReportedRegisterAnnos`)."""

    count: int = 0
    register: str = ""


@dataclass(frozen=True, slots=True)
class Health:
    healthy: bool
    stamp: str | None
    reason: str
    reported: Reported  # the bookkeeping to keep for the next pass


def check(
    handshake: str | None,
    allocatable: int,
    register: str,
    reported: Reported,
    now: datetime,
    resource: str,
) -> Health:
    """The generic verdict refined by the NVIDIA bookkeeping; `reported` is the node's previous entry
    (`Reported()` when there is none: Go's zero values)."""
    generic = check_handshake(handshake, allocatable, now, resource)
    if allocatable == 0:
        if reported.count == 0:
            return Health(generic.healthy, generic.stamp, generic.reason, reported)
        return Health(False, generic.stamp, f"allocatable {resource} dropped to 0", Reported(0, register))
    if reported.count != allocatable:
        return Health(True, generic.stamp, "", Reported(allocatable, register))
    if register != reported.register:
        return Health(generic.healthy, generic.stamp, generic.reason, Reported(allocatable, register))
    return Health(generic.healthy, generic.stamp, generic.reason, reported)


def handshake_only(handshake: str | None, allocatable: int, now: datetime, resource: str) -> Health:
    """The generic rule alone (HAMi `device.CheckHealth`, vendors §1.10: Ascend, Hygon, Iluvatar, Kunlun
    vXPU, Vastai, Biren): no bookkeeping is kept between passes."""
    generic = check_handshake(handshake, allocatable, now, resource)
    return Health(generic.healthy, generic.stamp, generic.reason, Reported())


ALWAYS_HEALTHY = Health(True, None, "", Reported())  # Cambricon, Mthreads, Enflame DRS, Kunlun XPU, AWS


def capacity_health(count: int, resource: str) -> Health:
    """Healthy while the node reports some of `resource` (Metax GPU, Enflame GCU, AMD: vendors §1.10)."""
    if count > 0:
        return ALWAYS_HEALTHY
    return Health(False, None, f"{resource} is 0", Reported())
