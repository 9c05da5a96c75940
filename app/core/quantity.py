"""Kubernetes resource quantities, exactly enough to reproduce `resource.Quantity.AsInt64` and `Value`.

HAMi reads every GPU resource through those two Go methods, and the outcome (a request dropped, a percentage
clamped) depends on their edge cases, so this module parses the quantity grammar exactly with `Fraction`.
`kubernetes.utils.parse_quantity` exists but the core may not import the client (layer rule), and it
returns a Decimal rounded in ways that differ from Go for very small and very large values.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_MAX_INT64 = 2**63 - 1
_MIN_INT64 = -(2**63)

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse(value: object) -> Fraction:
    """Parse a quantity (a JSON string or number) into an exact fraction."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantities must be finite, got {value!r}")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantities must be strings or numbers, got {type(value).__name__}")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(f"quantities must match the regular expression, got {value!r}")
    try:
        number = Fraction(match["num"])
        exponent = int(match["exp"]) if match["exp"] is not None else None
    except ValueError:  # CPython converts at most 4300 digits (sys.get_int_max_str_digits)
        raise QuantityError(f"quantity has too many digits: {value[:40]!r}...") from None
    if match["bin"]:
        return number * _BINARY[match["bin"]]
    if exponent is not None:
        if abs(exponent) > 1000:
            raise QuantityError(f"quantity exponent out of range in {value!r}")
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[match["dec"] or ""]


def as_int64(value: object) -> int | None:
    """Go's `Quantity.AsInt64`: the integer value when exact and within int64, else None."""
    try:
        number = parse(value)
    except QuantityError:
        return None
    if number.denominator != 1 or not _MIN_INT64 <= number.numerator <= _MAX_INT64:
        return None
    return number.numerator


def ceil_value(value: object) -> int | None:
    """Go's `Quantity.Value`: rounded to an integer away from zero (clamped to int64); None when unparsable.

    "Away from zero": `-0.5` is -1 and `0.5` is 1, as Kubernetes rounds (`inf.RoundUp`).
    """
    try:
        number = parse(value)
    except QuantityError:
        return None
    rounded = math.ceil(number) if number >= 0 else math.floor(number)
    return max(_MIN_INT64, min(_MAX_INT64, rounded))
