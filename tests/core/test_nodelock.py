"""The node lock value and the rules for taking it (reference §5.2, quirks #26–#29)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from core_strategies import NO_SURROGATES
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.nodelock import (
    Holder,
    LockParseError,
    LockValue,
    Verdict,
    abandoned,
    contention_message,
    decide,
    format_lock,
    format_rfc3339,
    go_duration,
    is_owned_by,
    parse_go_duration,
    parse_lock,
    parse_rfc3339,
)

T0 = datetime(2026, 8, 1, 6, 0, 0, tzinfo=UTC)
FIVE_MIN = timedelta(minutes=5)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-08-01T06:00:00Z,default,train-0", LockValue(T0, "default", "train-0")),
        ("2026-08-01T06:00:00Z", LockValue(T0)),
        ("2026-08-01T08:00:00+02:00,ns,p", LockValue(T0, "ns", "p")),
        ("2026-08-01T01:30:00-04:30,ns,p", LockValue(T0, "ns", "p")),
        ("2026-08-01T06:00:00.999999999Z,ns,p", LockValue(T0 + timedelta(microseconds=999999), "ns", "p")),
        ("2026-08-01T06:00:00Z,,", LockValue(T0)),
    ],
    ids=[
        "spec-example",
        "legacy-bare-time",
        "positive-offset",
        "negative-offset",
        "fraction-truncated",
        "empty-owner",
    ],
)
def test_parse_lock(value: str, expected: LockValue) -> None:
    parsed = parse_lock(value)
    assert parsed == expected
    assert parsed.legacy is (not expected.namespace and not expected.name)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "2026-08-01T06:00:00Z,default",
            "malformed lock annotation: expected 3 parts, got 2 from 2026-08-01T06:00:00Z,default",
        ),
        ("a,b,c,d", "malformed lock annotation: expected 3 parts, got 4 from a,b,c,d"),
        (",", "malformed lock annotation: expected 3 parts, got 2 from ,"),
        ("lock", 'parsing time "lock" as RFC3339: cannot parse'),
        ("", 'parsing time "" as RFC3339: cannot parse'),
        ("2026-08-01 06:00:00", 'parsing time "2026-08-01 06:00:00" as RFC3339: cannot parse'),
        ("2026-08-01T06:00:00", 'parsing time "2026-08-01T06:00:00" as RFC3339: cannot parse'),
        ("2026-08-01t06:00:00Z,ns,p", 'parsing time "2026-08-01t06:00:00Z" as RFC3339: cannot parse'),
        ("2026-08-01T06:00:00z,ns,p", 'parsing time "2026-08-01T06:00:00z" as RFC3339: cannot parse'),
        ("٢٠٢٦-08-01T06:00:00Z,ns,p", 'parsing time "٢٠٢٦-08-01T06:00:00Z" as RFC3339: cannot parse'),
        ("1755756039,ns,p", 'parsing time "1755756039" as RFC3339: cannot parse'),
    ],
    ids=[
        "two-parts",
        "four-parts",
        "only-comma",
        "word",
        "empty",
        "datetime-layout",
        "no-zone",
        "lower-case-t",
        "lower-case-z",
        "non-ascii-digits",
        "unix-seconds",
    ],
)
def test_parse_lock_errors(value: str, message: str) -> None:
    with pytest.raises(LockParseError) as info:
        parse_lock(value)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "text",
    ["2026-02-30T06:00:00Z", "2026-08-01T24:00:00Z", "2026-08-01T06:60:00Z", "2026-08-01T06:00:60Z"],
    ids=["day-out-of-range", "hour-24", "minute-60", "leap-second"],
)
def test_rfc3339_out_of_range_fields_do_not_parse(text: str) -> None:
    with pytest.raises(LockParseError, match="as RFC3339"):
        parse_rfc3339(text)


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (T0, "2026-08-01T06:00:00Z"),
        (T0.replace(microsecond=123456), "2026-08-01T06:00:00Z"),
        (datetime(2026, 8, 1, 6, 0, 0), "2026-08-01T06:00:00Z"),
        (T0.astimezone(timezone(timedelta(hours=2))), "2026-08-01T08:00:00+02:00"),
        (T0.astimezone(timezone(timedelta(hours=-4, minutes=-30))), "2026-08-01T01:30:00-04:30"),
    ],
    ids=["utc", "sub-second-dropped", "naive-is-utc", "local-zone", "negative-half-hour-zone"],
)
def test_format_rfc3339(moment: datetime, expected: str) -> None:
    assert format_rfc3339(moment) == expected


def test_format_lock_spec_example() -> None:
    assert format_lock(T0, "default", "train-0") == "2026-08-01T06:00:00Z,default,train-0"


_name = st.text(st.characters(exclude_characters=",", exclude_categories=NO_SURROGATES), max_size=12)


@settings(max_examples=80, deadline=None)
@given(
    st.datetimes(
        min_value=datetime(1970, 1, 1),
        max_value=datetime(9999, 1, 1),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
        ),
    ),
    _name,
    _name,
)
def test_lock_value_round_trip(moment: datetime, namespace: str, name: str) -> None:
    value = format_lock(moment, namespace, name)
    parsed = parse_lock(value)
    assert parsed == LockValue(moment.replace(microsecond=0), namespace, name)
    assert is_owned_by(value, namespace, name)


@settings(max_examples=40, deadline=None)
@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1), timezones=st.just(UTC)))
def test_legacy_lock_value_round_trip(moment: datetime) -> None:
    parsed = parse_lock(format_rfc3339(moment))
    assert parsed == LockValue(moment.replace(microsecond=0))
    assert parsed.legacy


@pytest.mark.parametrize(
    ("value", "owned"),
    [
        ("2026-08-01T06:00:00Z,default,train-0", True),
        ("2026-08-01T06:00:00Z,default,train-01", False),
        ("2026-08-01T06:00:00Z,other,train-0", False),
        ("2026-08-01T06:00:00Z", False),
        ("2026-08-01T06:00:00Z,x,default,train-0", True),
    ],
    ids=["ours", "name-prefix", "other-namespace", "legacy", "suffix-match-only"],
)
def test_is_owned_by_is_a_suffix_check(value: str, owned: bool) -> None:
    assert is_owned_by(value, "default", "train-0") is owned


def _lock(age: timedelta, namespace: str = "ns", name: str = "holder") -> str:
    return format_lock(T0 - age, namespace, name)


@pytest.mark.parametrize(
    ("value", "holder", "verdict"),
    [
        (None, None, Verdict.ACQUIRE),
        ("lock", None, Verdict.TAKE_OVER),
        ("2026-08-01T06:00:00Z,ns", None, Verdict.TAKE_OVER),
        ("a,b,c,d", None, Verdict.TAKE_OVER),
        (_lock(timedelta(seconds=10), "default", "me"), None, Verdict.REENTER),
        (_lock(FIVE_MIN, "default", "me"), None, Verdict.REENTER),
        (_lock(FIVE_MIN + timedelta(seconds=1), "default", "me"), None, Verdict.TAKE_OVER),
        (format_rfc3339(T0 - timedelta(minutes=1)), None, Verdict.CONTENDED),
        (format_rfc3339(T0 - FIVE_MIN), None, Verdict.CONTENDED),
        (format_rfc3339(T0 - FIVE_MIN - timedelta(seconds=1)), None, Verdict.TAKE_OVER),
        (_lock(timedelta(minutes=1)), None, Verdict.NEED_HOLDER),
        (_lock(timedelta(hours=1)), None, Verdict.NEED_HOLDER),
        (_lock(timedelta(minutes=1)), Holder.GONE, Verdict.TAKE_OVER),
        (_lock(timedelta(minutes=1)), Holder.TERMINAL, Verdict.TAKE_OVER),
        (_lock(timedelta(minutes=1)), Holder.ALLOCATED, Verdict.TAKE_OVER),
        (_lock(timedelta(minutes=1)), Holder.ACTIVE, Verdict.CONTENDED),
        (_lock(timedelta(minutes=1)), Holder.PENDING_ALLOCATION, Verdict.CONTENDED),
        (_lock(FIVE_MIN), Holder.ACTIVE, Verdict.CONTENDED),
        (_lock(FIVE_MIN + timedelta(seconds=1)), Holder.ACTIVE, Verdict.TAKE_OVER),
        (_lock(FIVE_MIN + timedelta(seconds=1)), Holder.PENDING_ALLOCATION, Verdict.CONTENDED),
        (_lock(2 * FIVE_MIN), Holder.PENDING_ALLOCATION, Verdict.CONTENDED),
        (_lock(2 * FIVE_MIN + timedelta(seconds=1)), Holder.PENDING_ALLOCATION, Verdict.TAKE_OVER),
        (_lock(-timedelta(minutes=4)), Holder.ACTIVE, Verdict.CONTENDED),
        (_lock(-FIVE_MIN - timedelta(seconds=1)), Holder.ACTIVE, Verdict.TAKE_OVER),
        ("9999-12-31T23:59:59Z", None, Verdict.TAKE_OVER),
        ("2026-08-01T06:00:00Z,ns,", None, Verdict.TAKE_OVER),
        ("2026-08-01T06:00:00Z,,holder", None, Verdict.TAKE_OVER),
        (_lock(timedelta(minutes=1), "default", "me-2"), Holder.ACTIVE, Verdict.CONTENDED),
        (_lock(timedelta(minutes=1), "other", "me"), Holder.ACTIVE, Verdict.CONTENDED),
    ],
    ids=[
        "no-lock-acquire",
        "unparsable-word-taken-over",
        "two-parts-taken-over",
        "four-parts-taken-over",
        "own-lock-reentered",
        "own-lock-at-timeout-reentered",
        "own-lock-expired-restamped",
        "legacy-fresh-contended",
        "legacy-at-timeout-contended",
        "legacy-expired-taken-over",
        "other-needs-holder",
        "other-expired-still-needs-holder",
        "holder-gone",
        "holder-terminal",
        "holder-allocated",
        "holder-active-fresh",
        "holder-pending-fresh",
        "holder-active-at-timeout",
        "holder-active-expired",
        "holder-pending-just-expired-waits",
        "holder-pending-at-twice-timeout-waits",
        "holder-pending-beyond-twice-timeout",
        "clock-skew-future-lock",
        "future-beyond-timeout-taken-over",
        "legacy-far-future-taken-over",
        "no-pod-name-taken-over",
        "no-namespace-taken-over",
        "same-namespace-other-pod",
        "same-name-other-namespace",
    ],
)
def test_decide(value: str | None, holder: Holder | None, verdict: Verdict) -> None:
    decision = decide(value, "default", "me", T0, FIVE_MIN, holder)
    assert decision.verdict is verdict
    if verdict in (Verdict.TAKE_OVER, Verdict.CONTENDED):
        assert decision.why


@pytest.mark.parametrize(
    ("value", "holder", "verdict"),
    [
        ("lock", None, Verdict.TAKE_OVER),
        (_lock(timedelta(seconds=1)), None, Verdict.NEED_HOLDER),
        (_lock(timedelta(seconds=1)), Holder.GONE, Verdict.TAKE_OVER),
        (_lock(timedelta(seconds=1)), Holder.ACTIVE, Verdict.CONTENDED),
        (_lock(FIVE_MIN + timedelta(seconds=1)), Holder.PENDING_ALLOCATION, Verdict.CONTENDED),
        (_lock(FIVE_MIN + timedelta(seconds=1)), Holder.ACTIVE, Verdict.TAKE_OVER),
        (format_rfc3339(T0 - timedelta(minutes=1)), None, Verdict.CONTENDED),
        ("2026-08-01T06:00:00Z,ns,", None, Verdict.TAKE_OVER),
    ],
    ids=[
        "unparsable",
        "needs-the-holder",
        "holder-gone",
        "holder-active",
        "expired-but-allocating",
        "expired-active",
        "legacy-fresh",
        "names-no-pod",
    ],
)
def test_abandoned_is_what_any_other_pod_would_take_over(
    value: str, holder: Holder | None, verdict: Verdict
) -> None:
    assert abandoned(value, T0, FIVE_MIN, holder).verdict is verdict


def test_decide_compares_instants_across_zones() -> None:
    # 07:58 at +02:00 is 05:58Z: two minutes old, not expired.
    value = "2026-08-01T07:58:00+02:00,ns,holder"
    assert decide(value, "default", "me", T0, FIVE_MIN, Holder.ACTIVE).verdict is Verdict.CONTENDED
    assert (
        decide(value, "default", "me", T0, timedelta(minutes=1), Holder.ACTIVE).verdict is Verdict.TAKE_OVER
    )


@pytest.mark.parametrize(
    ("timeout", "expected"),
    [
        (FIVE_MIN, "node gpu-1 has been locked within 5m0s: node lock contention"),
        (timedelta(seconds=28), "node gpu-1 has been locked within 28s: node lock contention"),
    ],
    ids=["default-timeout", "seconds"],
)
def test_contention_message(timeout: timedelta, expected: str) -> None:
    assert contention_message("gpu-1", timeout) == expected


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(seconds=30), "30s"),
        (timedelta(seconds=90), "1m30s"),
        (FIVE_MIN, "5m0s"),
        (timedelta(hours=1), "1h0m0s"),
        (timedelta(hours=1, minutes=1, seconds=1), "1h1m1s"),
        (timedelta(hours=25), "25h0m0s"),
        (timedelta(milliseconds=500), "500ms"),
        (timedelta(seconds=1.5), "1.5s"),
        (timedelta(minutes=1, seconds=30, milliseconds=250), "1m30.25s"),
        (timedelta(microseconds=1500), "1.5ms"),
        (timedelta(microseconds=7), "7µs"),
        (-timedelta(seconds=2), "-2s"),
    ],
    ids=[
        "zero",
        "seconds",
        "minutes-seconds",
        "five-minutes",
        "hour",
        "hms",
        "over-a-day",
        "milliseconds",
        "fractional-seconds",
        "minutes-fraction",
        "fractional-milliseconds",
        "microseconds",
        "negative",
    ],
)
def test_go_duration(delta: timedelta, text: str) -> None:
    assert go_duration(delta) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5m", FIVE_MIN),
        ("1h30m", timedelta(minutes=90)),
        ("90s", timedelta(seconds=90)),
        ("1.5h", timedelta(minutes=90)),
        ("300ms", timedelta(milliseconds=300)),
        (".5s", timedelta(milliseconds=500)),
        ("5.s", timedelta(seconds=5)),
        ("0", timedelta(0)),
        ("+5m", FIVE_MIN),
        ("1h1h", timedelta(hours=2)),
        ("2us", timedelta(microseconds=2)),
        ("2µs", timedelta(microseconds=2)),
        (" 5m ", FIVE_MIN),
    ],
    ids=[
        "minutes",
        "compound",
        "seconds",
        "fraction",
        "millis",
        "leading-dot",
        "trailing-dot",
        "zero",
        "plus",
        "repeated-unit",
        "us",
        "micro-sign",
        "padded",
    ],
)
def test_parse_go_duration(text: str, expected: timedelta) -> None:
    assert parse_go_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "5", "m", "5x", "5 m", "five minutes", "1h 30m"],
    ids=["empty", "no-unit", "no-number", "bad-unit", "inner-space", "words", "space-between"],
)
def test_parse_go_duration_errors(text: str) -> None:
    with pytest.raises(ValueError, match="time: invalid duration"):
        parse_go_duration(text)
