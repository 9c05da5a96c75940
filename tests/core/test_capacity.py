"""app/core/capacity.py: per-vendor totals and free capacity of a node, its canonical encoding, and the
writes that bring the nodes' annotations to what they should say."""

from __future__ import annotations

import dataclasses
import json

import pytest
from core_builders import gpu
from hypothesis import given
from hypothesis import strategies as st

from app.core.capacity import VendorCapacity, as_json, changes, encode, node_capacity, published_state
from app.core.model import DeviceInfo, DeviceUse


def amd(uuid: str) -> DeviceInfo:
    return dataclasses.replace(gpu(uuid, mem=65536), vendor="AMD", type="AMDGPU-MI300")


@pytest.mark.parametrize(
    ("devices", "uses", "cordoned", "expected"),
    [
        pytest.param((), {}, (), {}, id="no-devices"),
        pytest.param(
            (gpu("a"), gpu("b", 1)),
            {},
            (),
            {"NVIDIA": VendorCapacity(2, 2, 65536, 65536, 200, 200)},
            id="two-idle-gpus",
        ),
        pytest.param(
            (gpu("a"), gpu("b", 1)),
            {"a": DeviceUse(slots=2, mem=10000, cores=30)},
            (),
            {"NVIDIA": VendorCapacity(2, 2, 65536, 55536, 200, 170)},
            id="shared-gpu-keeps-its-rest",
        ),
        pytest.param(
            (gpu("a", count=2), gpu("b", 1)),
            {"a": DeviceUse(slots=2, mem=1000, cores=10)},
            (),
            {"NVIDIA": VendorCapacity(2, 1, 65536, 32768, 200, 100)},
            id="no-slot-left-means-nothing-free",
        ),
        pytest.param(
            (gpu("a", health=False), gpu("b", 1)),
            {},
            (),
            {"NVIDIA": VendorCapacity(2, 1, 65536, 32768, 200, 100)},
            id="unhealthy-counts-in-total-only",
        ),
        pytest.param(
            (gpu("a"), gpu("b", 1)),
            {},
            ("b",),
            {"NVIDIA": VendorCapacity(2, 1, 65536, 32768, 200, 100)},
            id="cordoned-counts-in-total-only",
        ),
        pytest.param(
            (gpu("a"),),
            {"a": DeviceUse(slots=1, mem=40000, cores=150)},
            (),
            {"NVIDIA": VendorCapacity(1, 1, 32768, 0, 100, 0)},
            id="overcommitted-never-negative",
        ),
        pytest.param(
            (gpu("a"),),
            {"gone": DeviceUse(slots=1, mem=1000)},
            (),
            {"NVIDIA": VendorCapacity(1, 1, 32768, 32768, 100, 100)},
            id="use-of-an-unregistered-device-ignored",
        ),
        pytest.param(
            (gpu("a"), amd("m")),
            {"m": DeviceUse(slots=1, mem=65536, cores=100)},
            (),
            {
                "NVIDIA": VendorCapacity(1, 1, 32768, 32768, 100, 100),
                "AMD": VendorCapacity(1, 1, 65536, 0, 100, 0),
            },
            id="per-vendor",
        ),
    ],
)
def test_node_capacity(
    devices: tuple[DeviceInfo, ...],
    uses: dict[str, DeviceUse],
    cordoned: tuple[str, ...],
    expected: dict[str, VendorCapacity],
) -> None:
    assert node_capacity(devices, uses, frozenset(cordoned)) == expected


def test_encoding_is_the_documented_json_and_canonical() -> None:
    capacity = {"NVIDIA": VendorCapacity(2, 1, 65536, 22768, 200, 70), "AMD": VendorCapacity()}
    value = encode(capacity)
    assert json.loads(value) == {
        "version": 1,
        "vendors": {
            "AMD": {
                "devices": 0,
                "devicesFree": 0,
                "memory": 0,
                "memoryFree": 0,
                "cores": 0,
                "coresFree": 0,
            },
            "NVIDIA": {
                "devices": 2,
                "devicesFree": 1,
                "memory": 65536,
                "memoryFree": 22768,
                "cores": 200,
                "coresFree": 70,
            },
        },
    }
    assert " " not in value
    assert encode(dict(reversed(list(capacity.items())))) == value
    assert as_json({})["vendors"] == {}


@pytest.mark.parametrize(
    ("current", "wanted", "expected"),
    [
        pytest.param({}, {}, {}, id="nothing"),
        pytest.param({"n1": "x"}, {"n1": "x"}, {}, id="unchanged-no-write"),
        pytest.param({}, {"n1": "x"}, {"n1": "x"}, id="new-node"),
        pytest.param({"n1": "x"}, {"n1": "y"}, {"n1": "y"}, id="changed"),
        pytest.param({"n1": "x", "n2": "x"}, {"n1": "x"}, {"n2": None}, id="no-longer-registered-removed"),
        pytest.param({"n1": "x"}, {}, {"n1": None}, id="publishing-off-removes"),
    ],
)
def test_changes(current: dict[str, str], wanted: dict[str, str], expected: dict[str, str | None]) -> None:
    assert changes(current, wanted) == expected


_devices = st.lists(
    st.builds(
        gpu,
        st.sampled_from(["a", "b", "c"]),
        count=st.integers(1, 10),
        mem=st.integers(0, 81920),
        core=st.integers(0, 100),
        health=st.booleans(),
    ),
    max_size=4,
    unique_by=lambda d: d.id,
)
_uses = st.dictionaries(
    st.sampled_from(["a", "b", "c", "x"]),
    st.builds(DeviceUse, slots=st.integers(0, 12), mem=st.integers(0, 90000), cores=st.integers(0, 150)),
)


@given(_devices, _uses, st.frozensets(st.sampled_from(["a", "b", "c"])))
def test_free_is_never_negative_nor_above_the_total(
    devices: list[DeviceInfo], uses: dict[str, DeviceUse], cordoned: frozenset[str]
) -> None:
    for c in node_capacity(devices, uses, cordoned).values():
        assert 0 <= c.devices_free <= c.devices == len(devices)
        assert 0 <= c.memory_free <= c.memory
        assert 0 <= c.cores_free <= c.cores


@given(
    st.dictionaries(st.sampled_from("abc"), st.sampled_from("xy")),
    st.dictionaries(st.sampled_from("abc"), st.sampled_from("xy")),
)
def test_applying_the_changes_gives_the_wanted_annotations(
    current: dict[str, str], wanted: dict[str, str]
) -> None:
    result = dict(current)
    for node, value in changes(current, wanted).items():
        if value is None:
            del result[node]
        else:
            result[node] = value
    assert result == wanted
    assert changes(wanted, wanted) == {}


_NVIDIA = VendorCapacity(2, 1, 65536, 22768, 200, 70)


@pytest.mark.parametrize(
    ("published", "expected"),
    [
        pytest.param(None, "absent", id="no-annotation"),
        pytest.param(encode({"NVIDIA": _NVIDIA}), "same", id="same"),
        pytest.param(
            encode({"NVIDIA": _NVIDIA, "AMD": VendorCapacity(1)}), "same", id="other-vendor-ignored"
        ),
        pytest.param(
            encode({"NVIDIA": dataclasses.replace(_NVIDIA, memory_free=0)}), "differs", id="differs"
        ),
        pytest.param(encode({"AMD": _NVIDIA}), "absent", id="vendor-not-published"),
        pytest.param("not json", "unreadable", id="not-json"),
        pytest.param("[1]", "unreadable", id="not-an-object"),
        pytest.param('{"version":2,"vendors":{}}', "unreadable", id="other-version"),
        pytest.param('{"version":1,"vendors":[]}', "unreadable", id="vendors-not-an-object"),
    ],
)
def test_published_state(published: str | None, expected: str) -> None:
    assert published_state(published, "NVIDIA", _NVIDIA) == expected
