"""The vendor seam: the NVIDIA vendor satisfies the protocol the core calls (app.core.vendor)."""

from __future__ import annotations

from app.core.model import ContainerDevice, NodeDevices
from app.core.vendor import AdmissionError, FitContext, InvalidRequest, Vendor
from app.devices.nvidia import Nvidia


def test_fit_context_default_quota_check_admits_everything() -> None:
    ctx = FitContext({}, "default", "spread", NodeDevices("n", ()))
    assert ctx.quota_fits([ContainerDevice("g", "NVIDIA", 10**9, 100)])


def test_nvidia_is_a_vendor() -> None:
    vendor: Vendor = Nvidia()
    assert vendor.key == "NVIDIA"
    assert vendor.memory_factor == 1
    assert vendor.resources.count == "nvidia.com/gpu"
    assert vendor.register_annotation == "hami.io/node-nvidia-register"
    assert vendor.allocated_annotation == "hami.io/vgpu-devices-allocated"
    assert vendor.to_allocate_annotation == "hami.io/vgpu-devices-to-allocate"
    assert vendor.handshake_annotation == "hami.io/node-handshake"


def test_errors_are_value_errors() -> None:
    assert issubclass(InvalidRequest, ValueError)
    assert issubclass(AdmissionError, ValueError)
