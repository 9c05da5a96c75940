"""Kubernetes quantities as HAMi reads them: `AsInt64` and `Value` (reference §3.1, §6.2)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from app.core.quantity import QuantityError, as_int64, ceil_value, parse


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", Fraction(1)),
        (3, Fraction(3)),
        (2.5, Fraction(5, 2)),
        ("1Gi", Fraction(2**30)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("16Gi", Fraction(16 * 2**30)),
        ("500m", Fraction(1, 2)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        ("1E", Fraction(10**18)),
        ("1e3", Fraction(1000)),
        ("1E-2", Fraction(1, 100)),
        ("+.5", Fraction(1, 2)),
        ("-2", Fraction(-2)),
        ("1.", Fraction(1)),
        ("7n", Fraction(7, 10**9)),
    ],
    ids=[
        "plain",
        "json-int",
        "json-float",
        "gibi",
        "fractional-gibi",
        "sixteen-gibi",
        "milli",
        "kilo",
        "mega",
        "exa",
        "exponent",
        "negative-exponent",
        "signed-leading-dot",
        "negative",
        "trailing-dot",
        "nano",
    ],
)
def test_parse(value: object, expected: Fraction) -> None:
    assert parse(value) == expected


@pytest.mark.parametrize(
    "value",
    ["", "abc", "1Kb", "1K", "1e", "--1", "1 Gi", True, None, [1], float("inf"), float("nan"), "1e1001"],
    ids=[
        "empty",
        "word",
        "bad-suffix",
        "upper-k",
        "bare-e",
        "double-sign",
        "inner-space",
        "bool",
        "none",
        "list",
        "inf",
        "nan",
        "huge-exponent",
    ],
)
def test_parse_rejects(value: object) -> None:
    with pytest.raises(QuantityError):
        parse(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", 1),
        ("0", 0),
        ("-3", -3),
        ("16Gi", 17179869184),
        ("1.5", None),
        ("500m", None),
        ("1e3", 1000),
        (str(2**63 - 1), 2**63 - 1),
        (str(2**63), None),
        (str(-(2**63)), -(2**63)),
        ("x", None),
        (True, None),
    ],
    ids=[
        "one",
        "zero",
        "negative",
        "gibi-as-raw-integer",
        "fraction",
        "milli",
        "exponent",
        "int64-max",
        "over-int64",
        "int64-min",
        "garbage",
        "bool",
    ],
)
def test_as_int64(value: object, expected: int | None) -> None:
    assert as_int64(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("100", 100),
        ("99.5", 100),
        ("100m", 1),
        ("0", 0),
        ("-0.5", -1),
        ("-1.5", -2),
        ("-2", -2),
        ("1E", 10**18),
        ("100E", 2**63 - 1),
        ("-100E", -(2**63)),
        ("junk", None),
    ],
    ids=[
        "integer",
        "rounds-up",
        "milli-rounds-up",
        "zero",
        "negative-away-from-zero",
        "negative-fraction",
        "negative-integer",
        "exa",
        "clamped-high",
        "clamped-low",
        "garbage",
    ],
)
def test_ceil_value_rounds_away_from_zero(value: object, expected: int | None) -> None:
    assert ceil_value(value) == expected
