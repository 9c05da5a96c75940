"""Values the fuzzer (`python -m sim fuzz`) found to break the pure core, kept as regressions.

CPython refuses to convert a string of more than 4300 digits to an int (a ValueError, not the module's own
error type), so a quantity like `"9" * 5000` made /filter and /webhook answer "internal error" (seed 1,
absurd-value), and a pod allocation annotation with such a number made the registration worker's pod
informer fail and re-list for ever (seed 1, planted pods): one pod stopped the ledger from syncing. Each
must now be the module's own error (or a plain "not a quantity"), with no int conversion of the digits.
The lock values are the ones the fuzzer planted that kept a node locked for good.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.core import codec, quantity
from app.core.admission import AdmissionSettings, admit
from app.core.nodelock import Verdict, decide
from app.core.pods import pod_requests
from app.core.review import AdmissionInput
from app.core.vendor import InvalidRequest
from app.devices import build_vendors

MANY = "9" * 5000
VENDORS = build_vendors(None)


@pytest.mark.parametrize(
    "value",
    [MANY, MANY + "Gi", "1e" + MANY, "0." + "0" * 5000 + "1", "1" + "0" * 4400 + "Gi", "-" + MANY + "m"],
    ids=["digits", "binary-suffix", "exponent", "fraction", "seed-1-review-26", "negative"],
)
def test_a_quantity_of_thousands_of_digits_is_not_a_quantity(value: str) -> None:
    assert quantity.as_int64(value) is None
    assert quantity.ceil_value(value) is None
    with pytest.raises(quantity.QuantityError, match="too many digits"):
        quantity.parse(value)


@pytest.mark.parametrize("resource", ["nvidia.com/gpumem", "nvidia.com/gpucores"])
def test_such_a_quantity_is_an_invalid_request(resource: str) -> None:
    limits = {"nvidia.com/gpu": "1", resource: MANY}
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}
    with pytest.raises(InvalidRequest, match="in container c"):
        pod_requests(pod, VENDORS)


def test_such_a_count_is_no_request_like_any_unparsable_count() -> None:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": MANY}}}]}}
    assert not pod_requests(pod, VENDORS).any


def test_the_webhook_answers_such_a_pod_with_a_400() -> None:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1" + "0" * 4400 + "Gi"}
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {
        "limits": limits}}]}}  # fmt: skip
    outcome = admit(AdmissionInput("u", "CREATE", pod), AdmissionSettings(), VENDORS, {})
    assert not outcome.allowed and outcome.code == 400 and "in container c" in outcome.message


@pytest.mark.parametrize(
    "annotation",
    [f"GPU-a,NVIDIA,{MANY},10:;", f"GPU-a,NVIDIA,10,-{MANY}:;", f"GPU-a,NVIDIA,{'0' * 5000}1{MANY},1:;"],
    ids=["memory", "negative-cores", "leading-zeros-then-many"],
)
def test_an_allocation_with_thousands_of_digits_is_a_codec_error(annotation: str) -> None:
    with pytest.raises(codec.CodecError, match="pod annotation format error"):
        codec.decode_pod_single_device(annotation)


def test_leading_zeros_still_parse_as_go_does() -> None:
    (container, _) = codec.decode_pod_single_device("GPU-a,NVIDIA," + "0" * 5000 + "7,10:;")
    assert container[0].usedmem == 7


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("GPU-l," + MANY + ",1,1,NVIDIA,0,true:", "value out of range"),
        ("GPU-l,1," + "-" + MANY + ",1,NVIDIA,0,true:", "value out of range"),
        ("GPU-l,1,1,1,NVIDIA,0,true," + MANY + ",hami-core:", "value out of range"),
    ],
    ids=["count", "negative-memory", "index"],
)
def test_a_legacy_register_with_thousands_of_digits_is_a_codec_error(value: str, message: str) -> None:
    with pytest.raises(codec.CodecError, match=message):
        codec.decode_register_legacy(value, "NVIDIA")


def test_scoring_weights_with_thousands_of_digits_are_a_codec_error() -> None:
    with pytest.raises(codec.CodecError, match="slot must be a non-negative integer"):
        codec.decode_scoring_weights(f"slot={MANY},core=1,memory=1")


NOW = datetime(2026, 8, 1, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [
        "9999-12-31T23:59:59Z",
        "9999-12-31T23:59:59Z,default,ghost",
        "9999-12-31T23:59:59-23:59,default,ghost",
        "2027-08-01T06:00:00Z,default,ghost",
        "2026-08-01T06:00:00Z,default,",
        "2026-08-01T06:00:00Z,,ghost",
    ],
    ids=["legacy-far-future", "far-future", "far-future-offset", "a-year-ahead", "no-name", "no-namespace"],
)
def test_a_lock_no_working_clock_or_pod_wrote_is_taken_over(value: str) -> None:
    """Planted by the fuzzer on a good node, these kept every later bind in contention (a year, for good)."""
    decision = decide(value, "default", "me", NOW, timedelta(minutes=5))
    assert decision.verdict is Verdict.TAKE_OVER and decision.why
