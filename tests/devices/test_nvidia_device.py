"""The NVIDIA vendor object: node registration, usage accounting, pod annotations (reference §2.2, §4.10)."""

from __future__ import annotations

import pytest

from app.core.codec import CodecError
from app.core.model import ContainerDevice, DeviceUsage
from app.devices.nvidia import Nvidia, NvidiaConfig, keys

NV = Nvidia()
ONE = (
    '[{"id":"GPU-a","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-T4",'
    '"mode":"hami-core","health":true}]'
)
TWO = (
    ONE[:-1]
    + ',{"id":"GPU-b","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-T4","health":true}]'
)


def test_keys_are_hamis() -> None:
    assert keys.VENDOR == "NVIDIA"
    assert keys.REGISTER == "hami.io/node-nvidia-register"
    assert keys.PAIR_SCORE == "hami.io/node-nvidia-score"
    assert keys.HANDSHAKE == "hami.io/node-handshake"
    assert keys.CORDON == "hami.io/device-cordon"
    assert keys.TO_ALLOCATE == "hami.io/vgpu-devices-to-allocate"
    assert keys.ALLOCATED == "hami.io/vgpu-devices-allocated"
    assert keys.MIG_ALLOCATIONS == "hami.io/vgpu-mig-allocations"
    assert (keys.USE_TYPE, keys.NOUSE_TYPE) == ("nvidia.com/use-gputype", "nvidia.com/nouse-gputype")
    assert (keys.USE_UUID, keys.NOUSE_UUID) == ("nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid")
    assert keys.VGPU_MODE == "nvidia.com/vgpu-mode"


def test_node_devices_with_pair_scores() -> None:
    devices = NV.node_devices(
        {keys.REGISTER: TWO, keys.PAIR_SCORE: '[{"uuid":"GPU-a","score":{"GPU-b":100}}]'}
    )
    assert [d.id for d in devices] == ["GPU-a", "GPU-b"]
    assert devices[0].pair_scores == {"GPU-b": 100}
    assert devices[1].pair_scores == {}
    assert all(d.vendor == "NVIDIA" for d in devices)


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({}, "annos not found hami.io/node-nvidia-register"),
        ({keys.REGISTER: "[]"}, "no gpu found on node"),
        ({keys.REGISTER: "null"}, "no gpu found on node"),
        ({keys.REGISTER: "["}, "invalid register annotation"),
        ({keys.REGISTER: ONE, keys.PAIR_SCORE: "{"}, "invalid pair-score annotation"),
    ],
    ids=["missing", "empty-array", "null", "bad-json", "bad-pair-scores"],
)
def test_node_devices_errors(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(CodecError, match=message):
        NV.node_devices(annotations)


def test_add_usage() -> None:
    device = DeviceUsage("GPU-a", 0, 1, 10, 100, 32768, 100, 10, "hami-core", 0, "T4", True)
    chosen = ContainerDevice("GPU-a", "NVIDIA", 3000, 30)
    assert NV.add_usage(device, chosen) == chosen
    assert (device.used, device.usedmem, device.usedcores) == (2, 3100, 40)


def test_pod_annotations() -> None:
    groups = ((ContainerDevice("GPU-B", "NVIDIA", 3000, 30),), ())
    encoded = "GPU-B,NVIDIA,3000,30:;;"
    assert NV.pod_annotations(groups) == {keys.TO_ALLOCATE: encoded, keys.ALLOCATED: encoded}
    assert NV.pod_annotations(()) == {}


def test_resources_follow_the_config() -> None:
    vendor = Nvidia(NvidiaConfig(resource_count_name="a", resource_memory_name="b", memory_factor=3))
    assert (vendor.resources.count, vendor.resources.memory, vendor.memory_factor) == ("a", "b", 3)


def test_vendor_is_frozen_and_comparable() -> None:
    assert Nvidia() == Nvidia(NvidiaConfig())
