"""Annotation codecs, byte for byte (reference §2.2, §3.3, §4.10)."""

from __future__ import annotations

import json

import pytest
from core_strategies import NO_SURROGATES
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.codec import (
    DEFAULT_WEIGHTS,
    CodecError,
    ScoringWeights,
    decode_container_devices,
    decode_cordon,
    decode_pair_scores,
    decode_pod_single_device,
    decode_register_json,
    decode_register_legacy,
    decode_scoring_weights,
    encode_container_devices,
    encode_cordon,
    encode_pod_single_device,
    encode_register_json,
    encode_register_legacy,
    encode_scoring_weights,
)
from app.core.model import ContainerDevice, DeviceInfo, MigPlacement, MigProfile

INT32_MAX = 2**31 - 1

# --------------------------------------------------------------------------------------------------------
# §2.2 register annotation, JSON form

SPEC_EXAMPLE = (
    '[{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,"devcore":100,'
    '"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true},'
    '{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,'
    '"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}]'
)
SPEC_DEVICES = (
    DeviceInfo(
        "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec",
        0,
        10,
        32768,
        100,
        "NVIDIA-Tesla V100-PCIE-32GB",
        0,
        "hami-core",
        True,
        "NVIDIA",
    ),
    DeviceInfo(
        "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448",
        1,
        10,
        32768,
        100,
        "NVIDIA-Tesla V100-PCIE-32GB",
        1,
        "hami-core",
        True,
        "NVIDIA",
    ),
)


def test_register_json_spec_example_decodes() -> None:
    assert decode_register_json(SPEC_EXAMPLE, "NVIDIA") == SPEC_DEVICES


def test_register_json_spec_example_encodes_byte_for_byte() -> None:
    assert encode_register_json(SPEC_DEVICES) == SPEC_EXAMPLE


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        (DeviceInfo("GPU-a", 0, 0, 0, 0, "", 0, "", False), '[{"id":"GPU-a"}]'),
        (
            DeviceInfo("GPU-a", 3, 0, 0, 0, "", -1, "", False),
            '[{"id":"GPU-a","index":3,"numa":-1}]',
        ),
        (
            DeviceInfo("GPU-a", 0, 4, 0, 0, "T4", 0, "mig", True),
            '[{"id":"GPU-a","count":4,"type":"T4","mode":"mig","health":true}]',
        ),
        (
            DeviceInfo(
                "GPU-a",
                0,
                7,
                40960,
                100,
                "NVIDIA A100",
                0,
                "mig",
                True,
                mig_profiles=(MigProfile("1g.5gb", 4864, 15, 1, (MigPlacement(6, 1),)),),
            ),
            '[{"id":"GPU-a","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA A100","mode":"mig",'
            '"migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,'
            '"placements":[{"start":6,"size":1}]}],"health":true}]',
        ),
        (
            DeviceInfo("GPU-a", 0, 1, 1, 1, "A<B>&C\u2028", 0, "hami-core", True),
            '[{"id":"GPU-a","count":1,"devmem":1,"devcore":1,"type":"A\\u003cB\\u003e\\u0026C\\u2028",'
            '"mode":"hami-core","health":true}]',
        ),
        (
            DeviceInfo("GPU-ü", 0, 1, 1, 1, "Tesla ü", 0, "hami-core", True, vendor="NVIDIA"),
            '[{"id":"GPU-ü","count":1,"devmem":1,"devcore":1,"type":"Tesla ü","mode":"hami-core",'
            '"health":true}]',
        ),
    ],
    ids=[
        "all-zero-omitted",
        "index-and-negative-numa",
        "mode-and-health",
        "mig-profiles-order",
        "html-escaped",
        "utf8-raw",
    ],
)
def test_register_json_encoding_omitempty_and_key_order(device: DeviceInfo, expected: str) -> None:
    assert encode_register_json([device]) == expected


def test_register_json_never_writes_vendor_or_pair_scores() -> None:
    device = DeviceInfo("GPU-a", 0, 1, 1, 1, "T", 0, "m", True, vendor="NVIDIA", pair_scores={"GPU-b": 9})
    assert encode_register_json([device]) == (
        '[{"id":"GPU-a","count":1,"devmem":1,"devcore":1,"type":"T","mode":"m","health":true}]'
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[{"id":"g","health":true}]', DeviceInfo("g", 0, 0, 0, 0, "", 0, "", True, "NVIDIA")),
        ('[{"id":"g"}]', DeviceInfo("g", 0, 0, 0, 0, "", 0, "", False, "NVIDIA")),
        ('[{"id":"g","health":null,"type":null}]', DeviceInfo("g", 0, 0, 0, 0, "", 0, "", False, "NVIDIA")),
        (
            '[{"ID":"g","Index":2,"COUNT":3,"DevMem":4,"devCore":5,"Type":"T","NUMA":1,"Mode":"m","Health":true}]',
            DeviceInfo("g", 2, 3, 4, 5, "T", 1, "m", True, "NVIDIA"),
        ),
        (
            '[{"id":"a","ID":"b","count":1,"Count":2}]',
            DeviceInfo("b", 0, 2, 0, 0, "", 0, "", False, "NVIDIA"),
        ),
        (
            '[{"ID":"b","id":"a","Count":2,"count":1}]',
            DeviceInfo("a", 0, 1, 0, 0, "", 0, "", False, "NVIDIA"),
        ),
        (
            '[{"id":"a","ID":"b","id":"c"}]',
            DeviceInfo("c", 0, 0, 0, 0, "", 0, "", False, "NVIDIA"),
        ),
        (
            '[{"id":"g","devicevendor":"X","custominfo":{"a":1},"unknown":[1]}]',
            DeviceInfo("g", 0, 0, 0, 0, "", 0, "", False, "NVIDIA"),
        ),
        (
            '[{"id":"g","count":-0,"numa":-2147483648}]',
            DeviceInfo("g", 0, 0, 0, 0, "", -(2**31), "", False, "NVIDIA"),
        ),
        ('[{"id":"g","index":4294967295}]', DeviceInfo("g", 2**32 - 1, 0, 0, 0, "", 0, "", False, "NVIDIA")),
    ],
    ids=[
        "health-true",
        "missing-health-is-unhealthy",
        "nulls-are-zero-values",
        "go-case-insensitive-keys",
        "last-folded-key-wins",
        "last-folded-key-wins-reversed",
        "exact-duplicate-last-wins",
        "unknown-and-unread-keys-ignored",
        "minus-zero-and-int32-min-numa",
        "uint32-index",
    ],
)
def test_register_json_decoding(text: str, expected: DeviceInfo) -> None:
    assert decode_register_json(text, "NVIDIA") == (expected,)


@pytest.mark.parametrize("text", ["[]", "null", " null "], ids=["empty-array", "null", "null-padded"])
def test_register_json_empty_values_decode_to_nothing(text: str) -> None:
    # Go decodes both into an empty list; the vendor then reports "no gpu found on node".
    assert decode_register_json(text, "NVIDIA") == ()


def test_register_json_mig_profiles_decode() -> None:
    text = (
        '[{"id":"g","mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,'
        '"sliceCount":1,"placements":[{"start":6,"size":1},{"start":4,"size":1}]}],"health":true}]'
    )
    (device,) = decode_register_json(text, "NVIDIA")
    assert device.mig_profiles == (
        MigProfile("1g.5gb", 4864, 15, 1, (MigPlacement(6, 1), MigPlacement(4, 1))),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "invalid register annotation"),
        ("", "invalid register annotation"),
        ('{"id":"g"}', "expected a JSON array"),
        ('"x"', "expected a JSON array"),
        ("[1]", "device 0 is not an object"),
        ("[null]", "device 0 is not an object"),
        ('[{"id":"g","count":"1"}]', "invalid count field"),
        ('[{"id":"g","count":1.0}]', "invalid count field"),
        ('[{"id":"g","devmem":1e3}]', "invalid devmem field"),
        ('[{"id":"g","count":true}]', "invalid count field"),
        ('[{"id":"g","count":2147483648}]', "invalid count field"),
        ('[{"id":"g","count":-1}]', "invalid count field"),
        ('[{"id":"g","devmem":-1}]', "invalid devmem field"),
        ('[{"id":"g","devcore":-1}]', "invalid devcore field"),
        ('[{"id":"g","index":-1}]', "invalid index field"),
        ('[{"id":"g","numa":2147483648}]', "invalid numa field"),
        ('[{"id":"g","health":"true"}]', "invalid health field"),
        ('[{"id":"g","health":1}]', "invalid health field"),
        ('[{"id":1}]', "invalid id field"),
        ('[{"id":"g","type":5}]', "invalid type field"),
        ('[{"id":"g","migProfiles":{}}]', "invalid migProfiles field"),
        ('[{"id":"g","migProfiles":[1]}]', "invalid migProfiles entry"),
        ('[{"id":"g","migProfiles":[{"placements":[1]}]}]', "invalid migProfiles placements"),
        ('[{"count":1}]', "device 0 has no id"),
        ('[{"id":"g"},{"id":"g"}]', "duplicate device id g"),
    ],
    ids=[
        "truncated-json",
        "empty-string",
        "object-not-array",
        "string-not-array",
        "number-entry",
        "null-entry",
        "string-count",
        "float-literal-count",
        "exponent-literal-devmem",
        "bool-count",
        "count-over-int32",
        "negative-count",
        "negative-devmem",
        "negative-devcore",
        "negative-index",
        "numa-over-int32",
        "string-health",
        "number-health",
        "number-id",
        "number-type",
        "mig-profiles-object",
        "mig-profile-not-object",
        "mig-placement-not-object",
        "missing-id",
        "duplicate-id",
    ],
)
def test_register_json_rejects(text: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        decode_register_json(text, "NVIDIA")


_json_text = st.text(st.characters(codec="utf-8", exclude_categories=NO_SURROGATES), max_size=12)


@st.composite
def _register_devices(draw: st.DrawFn) -> list[DeviceInfo]:
    ids = draw(st.lists(_json_text.filter(bool), min_size=0, max_size=4, unique=True))
    return [
        DeviceInfo(
            id=uuid,
            index=draw(st.integers(0, 2**32 - 1)),
            count=draw(st.integers(0, INT32_MAX)),
            devmem=draw(st.integers(0, INT32_MAX)),
            devcore=draw(st.integers(0, INT32_MAX)),
            type=draw(_json_text),
            numa=draw(st.integers(-(2**31), INT32_MAX)),
            mode=draw(_json_text),
            health=draw(st.booleans()),
            vendor="NVIDIA",
        )
        for uuid in ids
    ]


@settings(max_examples=60, deadline=None)
@given(_register_devices())
def test_register_json_round_trip(devices: list[DeviceInfo]) -> None:
    encoded = encode_register_json(devices)
    assert decode_register_json(encoded, "NVIDIA") == tuple(devices)
    # and Go's decoder would read the same thing: plain JSON with Go's tags
    assert [item["id"] for item in json.loads(encoded)] == [d.id for d in devices]


# --------------------------------------------------------------------------------------------------------
# §2.2 legacy colon format


def test_legacy_spec_example_encodes() -> None:
    device = DeviceInfo(
        "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4", 1, 10, 7680, 100, "NVIDIA-Tesla P4", 0, "hami-core", True
    )
    assert encode_register_legacy([device]) == (
        "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "GPU-a,10,7680,100,NVIDIA-Tesla P4,0,true:",
            (DeviceInfo("GPU-a", 0, 10, 7680, 100, "NVIDIA-Tesla P4", 0, "hami-core", True, "NVIDIA"),),
        ),
        (
            "GPU-a,10,7680,100,T4,1,false,3,mig:GPU-b,+2,-5,0,T4,-1,T,0,:",
            (
                DeviceInfo("GPU-a", 3, 10, 7680, 100, "T4", 1, "mig", False, "NVIDIA"),
                DeviceInfo("GPU-b", 0, 2, -5, 0, "T4", -1, "", True, "NVIDIA"),
            ),
        ),
        ("GPU-a,1,1,1,T,0,1:", (DeviceInfo("GPU-a", 0, 1, 1, 1, "T", 0, "hami-core", True, "NVIDIA"),)),
        ("::GPU-a,1,1,1,T,0,0::", (DeviceInfo("GPU-a", 0, 1, 1, 1, "T", 0, "hami-core", False, "NVIDIA"),)),
        (":", ()),
        ("::", ()),
    ],
    ids=[
        "seven-fields",
        "nine-fields-and-signs",
        "health-as-1",
        "empty-segments-skipped",
        "colon",
        "two-colons",
    ],
)
def test_legacy_decoding(text: str, expected: tuple[DeviceInfo, ...]) -> None:
    assert decode_register_legacy(text, "NVIDIA") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "node annotation missing device separator"),
        ("GPU-a,1,1,1,T,0,true", "node annotation missing device separator"),
        ("abc:", 'malformed node annotation segment: "abc"'),
        ("a,b:", "unexpected field count 2 in node annotation"),
        ("a,1,1,1,T,0,true,0:", "unexpected field count 8 in node annotation"),
        ("a,1,1,1,T,0,true,0,m,x:", "unexpected field count 10 in node annotation"),
        ("a,x,1,1,T,0,true:", 'invalid count field: strconv.ParseInt: parsing "x": invalid syntax'),
        ("a,,1,1,T,0,true:", 'invalid count field: strconv.ParseInt: parsing "": invalid syntax'),
        (
            "a,2147483648,1,1,T,0,true:",
            'invalid count field: strconv.ParseInt: parsing "2147483648": value out of range',
        ),
        ("a,1,1.5,1,T,0,true:", 'invalid memory field: strconv.ParseInt: parsing "1.5": invalid syntax'),
        ("a,1,1,1_0,T,0,true:", 'invalid core field: strconv.ParseInt: parsing "1_0": invalid syntax'),
        ("a,1,1,1,T,x,true:", 'invalid numa field: strconv.Atoi: parsing "x": invalid syntax'),
        ("a,1,1,1,T,0,yes:", 'invalid health field: strconv.ParseBool: parsing "yes": invalid syntax'),
        ("a,1,1,1,T,0,true,x,m:", 'invalid index field: strconv.Atoi: parsing "x": invalid syntax'),
        ("a,1,1,1,T,0,true,-1,m:", "index field must not be negative: -1"),
    ],
    ids=[
        "empty",
        "single-device-without-colon",
        "segment-without-comma",
        "two-fields",
        "eight-fields",
        "ten-fields",
        "count-syntax",
        "count-empty",
        "count-range",
        "memory-syntax",
        "core-underscore",
        "numa-syntax",
        "health-syntax",
        "index-syntax",
        "index-negative",
    ],
)
def test_legacy_errors(text: str, message: str) -> None:
    with pytest.raises(CodecError) as info:
        decode_register_legacy(text, "NVIDIA")
    assert str(info.value) == message


_legacy_text = st.text(st.characters(exclude_characters=",:", exclude_categories=NO_SURROGATES), max_size=10)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.builds(
            DeviceInfo,
            id=_legacy_text,
            index=st.integers(0, 2**40),
            count=st.integers(-(2**31), INT32_MAX),
            devmem=st.integers(-(2**31), INT32_MAX),
            devcore=st.integers(-(2**31), INT32_MAX),
            type=_legacy_text,
            numa=st.integers(-(2**40), 2**40),
            mode=_legacy_text,
            health=st.booleans(),
            vendor=st.just("NVIDIA"),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_legacy_round_trip(devices: list[DeviceInfo]) -> None:
    assert decode_register_legacy(encode_register_legacy(devices), "NVIDIA") == tuple(devices)


# --------------------------------------------------------------------------------------------------------
# §2.2 pair scores


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[{"uuid":"GPU-0","score":{"GPU-1":100,"GPU-2":20}},{"uuid":"GPU-1","score":{"GPU-0":100}}]',
            {"GPU-0": {"GPU-1": 100, "GPU-2": 20}, "GPU-1": {"GPU-0": 100}},
        ),
        ('[{"UUID":"GPU-0","Score":{"GPU-1":1800}}]', {"GPU-0": {"GPU-1": 1800}}),
        ('[{"uuid":"GPU-0"}]', {"GPU-0": {}}),
        ("null", {}),
        ("[]", {}),
    ],
    ids=["spec-example", "case-insensitive", "no-scores", "null", "empty"],
)
def test_pair_scores_decode(text: str, expected: dict[str, dict[str, int]]) -> None:
    assert decode_pair_scores(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "[",
        '{"uuid":"GPU-0"}',
        "[1]",
        '[{"uuid":"g","score":[1]}]',
        '[{"uuid":"g","score":{"h":1.5}}]',
        '[{"uuid":"g","score":{"h":"1"}}]',
    ],
    ids=["bad-json", "object", "number-entry", "score-list", "float-score", "string-score"],
)
def test_pair_scores_reject(text: str) -> None:
    with pytest.raises(CodecError, match="invalid pair-score annotation"):
        decode_pair_scores(text)


# --------------------------------------------------------------------------------------------------------
# §4.10 pod device lists


def _dev(uuid: str, mem: int, cores: int) -> ContainerDevice:
    return ContainerDevice(uuid, "NVIDIA", mem, cores)


WORKED = (
    (_dev("GPU-B", 3000, 30),),
    (),
    (_dev("GPU-B", 16384, 0), _dev("GPU-A", 16384, 0)),
)


def test_pod_devices_worked_example_encodes() -> None:
    assert (
        encode_pod_single_device(WORKED)
        == "GPU-B,NVIDIA,3000,30:;;GPU-B,NVIDIA,16384,0:GPU-A,NVIDIA,16384,0:;"
    )


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ((), ""),
        (((),), ";"),
        (((), ()), ";;"),
        (((_dev("u", 0, 0),),), "u,NVIDIA,0,0:;"),
        (((_dev("u", -1, 2147483647),),), "u,NVIDIA,-1,2147483647:;"),
    ],
    ids=["no-containers", "one-empty", "two-empty", "zeros", "int32-bounds"],
)
def test_pod_devices_encoding(groups: tuple[tuple[ContainerDevice, ...], ...], expected: str) -> None:
    assert encode_pod_single_device(groups) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GPU-B,NVIDIA,3000,30:;;GPU-B,NVIDIA,16384,0:GPU-A,NVIDIA,16384,0:;", (*WORKED, ())),
        ("", ()),
        (";", ((), ())),
        ("u,NVIDIA,1,2:", ((_dev("u", 1, 2),),)),
        ("u,NVIDIA,1,2", ((_dev("u", 1, 2),),)),
        ("u,NVIDIA,1,2,extra,fields:;", ((_dev("u", 1, 2),), ())),
        ("junk:u,NVIDIA,1,2::;", ((_dev("u", 1, 2),), ())),
        ("u,X,-3,+4:;", ((ContainerDevice("u", "X", -3, 4),), ())),
    ],
    ids=[
        "worked-example-trailing-group",
        "empty",
        "one-separator",
        "no-group-separator",
        "no-separators",
        "extra-fields",
        "pieces-without-comma-skipped",
        "signs-and-other-type",
    ],
)
def test_pod_devices_decoding(text: str, expected: tuple[tuple[ContainerDevice, ...], ...]) -> None:
    assert decode_pod_single_device(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("u,NVIDIA,1:;", "pod annotation format error, missing fields, do not use nodeName in task spec"),
        ("u,NVIDIA:;", "pod annotation format error, missing fields, do not use nodeName in task spec"),
        ("u,NVIDIA,x,1:;", "pod annotation format error, invalid memory 'x'"),
        ("u,NVIDIA,1,2147483648:;", "pod annotation format error, invalid cores '2147483648'"),
        ("u,NVIDIA,1,:;", "pod annotation format error, invalid cores ''"),
    ],
    ids=["three-fields", "two-fields", "memory-not-int", "cores-over-int32", "cores-empty"],
)
def test_pod_devices_decoding_errors(text: str, message: str) -> None:
    with pytest.raises(CodecError) as info:
        decode_pod_single_device(text)
    assert str(info.value) == message


def test_container_devices_decode_single_group() -> None:
    assert decode_container_devices("a,NVIDIA,1,2:b,NVIDIA,3,4:") == (_dev("a", 1, 2), _dev("b", 3, 4))
    assert encode_container_devices([_dev("a", 1, 2)]) == "a,NVIDIA,1,2:"


_uuid = st.text(st.characters(exclude_characters=",:;", exclude_categories=NO_SURROGATES), max_size=8)
_container_device = st.builds(
    ContainerDevice,
    uuid=_uuid,
    type=_uuid,
    usedmem=st.integers(-(2**31), INT32_MAX),
    usedcores=st.integers(-(2**31), INT32_MAX),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_container_device, max_size=3).map(tuple), max_size=5).map(tuple))
def test_pod_devices_round_trip_keeps_a_trailing_group(
    groups: tuple[tuple[ContainerDevice, ...], ...],
) -> None:
    decoded = decode_pod_single_device(encode_pod_single_device(groups))
    if groups:
        # every container in order, plus the decoder's extra empty group (quirk #43)
        assert decoded == (*groups, ())
    else:
        assert decoded == ()
    # re-encoding what was decoded adds exactly one more ';'
    if groups:
        assert encode_pod_single_device(decoded) == encode_pod_single_device(groups) + ";"


# --------------------------------------------------------------------------------------------------------
# §3.3 device-scoring weights


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, DEFAULT_WEIGHTS),
        ("slot=1,core=1,memory=3", ScoringWeights(1, 1, 3)),
        ("memory=2,slot=0,core=5", ScoringWeights(0, 5, 2)),
        ("  slot = 2 , core=0 ,memory= 0 ", ScoringWeights(2, 0, 0)),
        ("slot=+1,core=-0,memory=0", ScoringWeights(1, 0, 0)),
        ("slot=007,core=0,memory=0", ScoringWeights(7, 0, 0)),
        (f"slot={2**63 - 1},core=0,memory=0", ScoringWeights(2**63 - 1, 0, 0)),
    ],
    ids=[
        "absent",
        "doc-example",
        "any-order",
        "whitespace-trimmed",
        "go-signs",
        "leading-zeros",
        "int64-max",
    ],
)
def test_scoring_weights_valid(text: str | None, expected: ScoringWeights) -> None:
    assert decode_scoring_weights(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "slot=1,core=1",
        "slot=1,core=1,memory=1,slot=1",
        "slot=1,core=1,memory",
        "slot=1,core=1,mem=1",
        "slot=1,slot=1,memory=1",
        "slot=-1,core=1,memory=1",
        "slot=1.5,core=1,memory=1",
        "slot=x,core=1,memory=1",
        "slot=,core=1,memory=1",
        "slot=0,core=0,memory=0",
        "=1,core=1,memory=1",
        "Slot=1,core=1,memory=1",
        f"slot={2**63},core=0,memory=1",
        "slot=1=2,core=1,memory=1",
        "slot=1;core=1;memory=1",
    ],
    ids=[
        "empty",
        "two-parts",
        "four-parts",
        "missing-equals",
        "unknown-key",
        "duplicate-key",
        "negative",
        "fraction",
        "not-a-number",
        "empty-value",
        "all-zero",
        "empty-key",
        "key-case-sensitive",
        "over-int64",
        "two-equals",
        "wrong-separator",
    ],
)
def test_scoring_weights_invalid(text: str) -> None:
    with pytest.raises(CodecError, match="invalid device scoring weights"):
        decode_scoring_weights(text)


@settings(max_examples=60, deadline=None)
@given(
    st.builds(
        ScoringWeights,
        st.integers(0, 2**63 - 1),
        st.integers(0, 2**63 - 1),
        st.integers(0, 2**63 - 1),
    ).filter(lambda w: w.slot or w.core or w.memory)
)
def test_scoring_weights_round_trip(weights: ScoringWeights) -> None:
    assert decode_scoring_weights(encode_scoring_weights(weights)) == weights


# --------------------------------------------------------------------------------------------------------
# §3.3 device cordon


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, frozenset()),
        ("", frozenset()),
        ("   ", frozenset()),
        ("GPU-a", frozenset({"GPU-a"})),
        (" GPU-a , ,GPU-b,", frozenset({"GPU-a", "GPU-b"})),
    ],
    ids=["absent", "empty", "whitespace", "one", "trimmed-and-empties-ignored"],
)
def test_cordon_decode(text: str | None, expected: frozenset[str]) -> None:
    assert decode_cordon(text) == expected


def test_cordon_encode_sorted_round_trip() -> None:
    assert encode_cordon({"GPU-b", "GPU-a"}) == "GPU-a,GPU-b"
    assert decode_cordon(encode_cordon({"GPU-b", "GPU-a"})) == {"GPU-a", "GPU-b"}
