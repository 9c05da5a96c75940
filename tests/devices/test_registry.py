"""The vendor registry: which families a device-config.yaml enables, with HAMi's semantics
(app/devices/__init__.py; reference vendors §1.2, §1.3)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.podkeys import consumed, declared
from app.core.vendor import ALLOCATION, CoreMasks, Vendor, core_masks
from app.devices import REGISTRY, DeviceConfigError, build_vendors, disabled_resources
from app.devices.ascend import CHART_CHIPS
from app.devices.hygon import Hygon, HygonConfig
from app.devices.nvidia import Nvidia


def keys(vendors: tuple[Vendor, ...]) -> list[str]:
    return [v.key for v in vendors]


def test_registry_follows_hamis_registration_order() -> None:
    """V§1.2: NVIDIA, Cambricon, Hygon, Enflame, Mthreads, Metax, Kunlun, AWS, AMD, Vastai, Biren, then the
    flag-gated Ascend and Iluvatar."""
    assert [f.section for f in REGISTRY] == [
        "nvidia",
        "cambricon",
        "hygon",
        "enflame",
        "mthreads",
        "metax",
        "kunlun",
        "awsneuron",
        "amd",
        "vastai",
        "biren",
        "vnpus",
        "iluvatars",
    ]
    assert {f.flag for f in REGISTRY if f.flag} == {"ascend", "iluvatar"}


@pytest.mark.parametrize(
    ("config", "flags", "expected"),
    [
        pytest.param(
            None, None, ["NVIDIA", "Enflame"], id="no config: NVIDIA, and Enflame DRS (built-in names, V§1.2)"
        ),
        pytest.param({}, frozenset(), ["NVIDIA", "Enflame"], id="empty config"),
        pytest.param(
            {"hygon": {"resourceCountName": "hygon.com/dcunum"}},
            frozenset(),
            ["NVIDIA", "DCU", "Enflame"],
            id="V§1.2 a section naming the count resource enables Hygon",
        ),
        pytest.param({"hygon": {}}, frozenset(), ["Enflame"], id="V§1.2 no count name: matches nothing"),
        pytest.param({"hygon": None}, frozenset(), ["Enflame"], id="an empty section is no section"),
        pytest.param(
            {"vnpus": {}},
            None,
            ["Enflame", *(c.common_word for c in CHART_CHIPS)],
            id="CLI: the Ascend section",
        ),
        pytest.param({"vnpus": {}}, frozenset(), ["Enflame"], id="service: HAMI_ENABLE_ASCEND off"),
        pytest.param(
            None,
            frozenset({"ascend"}),
            ["Enflame", *(c.common_word for c in CHART_CHIPS)],
            id="switch: chart chips",
        ),
        pytest.param({"nvidia": {"resourceCountName": "x/gpu"}}, None, ["Enflame"], id="NVIDIA section"),
        pytest.param({"metax": {}}, None, ["Enflame"], id="V§1.2 a Metax section without count names"),
        pytest.param({"unknown": {"a": 1}}, None, ["Enflame"], id="unknown sections are ignored (yaml.v2)"),
    ],
)
def test_enabled_families(config: Any, flags: frozenset[str] | None, expected: list[str]) -> None:
    found = keys(build_vendors(config, flags))
    assert found[0] == "NVIDIA" and found[1:] == [k for k in expected if k != "NVIDIA"]


def test_sections_configure_their_vendor() -> None:
    vendors = build_vendors(
        {"hygon": {"resourceCountName": "example.com/dcu", "memoryFactor": 2}}, frozenset()
    )
    hygon = vendors[1]
    assert isinstance(hygon, Hygon)
    assert hygon.config == HygonConfig(resource_count_name="example.com/dcu", memory_factor=2)
    assert isinstance(vendors[0], Nvidia)


@pytest.mark.parametrize(
    ("config", "flags", "message"),
    [
        pytest.param("x", None, "expected a mapping of vendor sections", id="not a mapping"),
        pytest.param({"hygon": []}, None, "hygon: expected a mapping", id="section not a mapping"),
        pytest.param(
            {"hygon": {"resourceCountName": "x", "memoryFactor": "2"}},
            None,
            "hygon.memoryFactor: expected an integer",
            id="type",
        ),
        pytest.param(
            {"vnpus": {"configs": [{"commonWord": "Ascend910A"}, {"commonWord": "Ascend910A"}]}},
            None,
            "vendor key 'Ascend910A' is configured twice",
            id="two chips with one common word",
        ),
        pytest.param({}, frozenset({"gpu"}), "unknown vendor switch 'gpu'", id="unknown switch"),
    ],
)
def test_invalid_configurations(config: Any, flags: frozenset[str] | None, message: str) -> None:
    with pytest.raises(DeviceConfigError, match=message):
        build_vendors(config, flags)


def test_disabled_resources_name_the_family_and_the_switch() -> None:
    """A pod asking for a family that is not enabled gets an answer naming it, not a silent pass-through."""
    disabled = disabled_resources({}, frozenset())
    assert disabled["hygon.com/dcunum"] == "Hygon DCU is not enabled (device config: the 'hygon' section)"
    assert disabled["hygon.com/dcumem"] == disabled["hygon.com/dcucores"] == disabled["hygon.com/dcunum"]
    assert disabled["metax-tech.com/sgpu"] == "Metax is not enabled (device config: the 'metax' section)"
    assert "nvidia.com/gpu" not in disabled
    assert "hygon.com/dcunum" not in disabled_resources({"hygon": {"resourceCountName": "hygon.com/dcunum"}})
    assert (
        disabled["huawei.com/Ascend910B3-memory"]
        == "Huawei Ascend is not enabled (device config: HAMI_ENABLE_ASCEND)"
    )


def test_core_masks_are_exactly_the_vendors_the_protocol_matches() -> None:
    """`core_masks` reads the attribute instead of the protocol's slow isinstance (issue 20): the same set."""
    vendors = tuple(v for family in REGISTRY for v in family.build(None))
    masks = core_masks(vendors)
    assert sorted(masks) == sorted(v.key for v in vendors if isinstance(v, CoreMasks))
    assert masks and all(masks[v.key] == v.core_mask for v in vendors if isinstance(v, CoreMasks))


def test_nvidias_to_allocate_list_may_be_emptied_whole() -> None:
    """The webhook's matchCondition lets a trusted user empty every group of a bound pod's
    `hami.io/vgpu-devices-to-allocate` without a call (issue 20): whatever vendors are enabled, that key's
    declaration (the first one wins) must allow it. (Not every `*-devices-to-allocate` key does: Moore
    Threads' is registered but never written, so it may not change at all.)"""
    vendors = tuple(v for family in REGISTRY for v in family.build(None))
    for enabled in (vendors, vendors[::-1]):
        key = declared(enabled)["hami.io/vgpu-devices-to-allocate"]
        assert key.role == ALLOCATION and key.amend is consumed
    assert all(consumed(old, ";" * n) for old in ("GPU-0,NVIDIA,1,0:;", "a:;b:;", None) for n in (0, 1, 3))
