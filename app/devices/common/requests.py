"""Reading a container's device resources for `container_request` (HAMi `GenerateResourceRequests`).

Every lookup is HAMi's: `limits[name]`, then `requests[name]` (a few vendors read limits only). Where HAMi
turns a bad value into a silent zero request (the container then asks for nothing and the pod may land on
a node without the device) or a silent 0 (a non-integer memory meaning the whole card), we refuse the value
with `InvalidRequest`, for every vendor as for NVIDIA (docs/compatibility.md): the filter answers an Error
and the webhook denies the pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core import quantity
from app.core.pods import limit, resource
from app.core.vendor import InvalidRequest

INT32_MAX = 2**31 - 1


def show(value: Any) -> str:
    return str(value) if isinstance(value, str | int | float) else type(value).__name__


def lookup(container: Mapping[str, Any], name: str, *, limits_only: bool = False) -> Any | None:
    """The raw value of `name` (limits, then requests unless `limits_only`); None when absent or unnamed."""
    if not name:
        return None
    return limit(container, name) if limits_only else resource(container, name)


def count(container: Mapping[str, Any], name: str, *, limits_only: bool = False) -> int | None:
    """The device count: None when absent, not an integer (HAMi: no request) or 0; 1..MaxInt32 otherwise.

    Raises InvalidRequest for a negative or too large count (HAMi wraps or drops it)."""
    raw = lookup(container, name, limits_only=limits_only)
    if raw is None:
        return None
    number = quantity.as_int64(raw)
    if number is None or number == 0:
        return None
    if not 0 < number <= INT32_MAX:
        raise InvalidRequest(f"invalid {name} value {show(raw)}: must be between 1 and {INT32_MAX}")
    return number


def integer(
    container: Mapping[str, Any],
    name: str,
    high: int,
    unit: str,
    *,
    limits_only: bool = False,
    rounded: bool = False,
    low: int = 0,
) -> int | None:
    """A whole number in low..high (None when absent); raises InvalidRequest, naming that range, otherwise.

    `rounded`: HAMi reads the value with `Quantity.Value()` (rounded up) instead of `AsInt64`."""
    raw = lookup(container, name, limits_only=limits_only)
    if raw is None:
        return None
    number = quantity.ceil_value(raw) if rounded else quantity.as_int64(raw)
    if number is None or not low <= number <= high:
        raise InvalidRequest(
            f"invalid {name} value {show(raw)}: must be a whole number of {unit} between {low} and {high}"
        )
    return number
