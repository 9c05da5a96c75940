"""The DRA drivers that publish, as ResourceSlices, the same devices a vendor's HAMi device plugin registers.

`app.core.dra` refuses a node we register when one of these drivers publishes devices on it (the GPU would be
counted by kube-scheduler's DRA allocator and by us). Keyed by driver name, valued by our vendor key; the
names are the drivers' own (`ResourceSlice.spec.driver`):

- `gpu.nvidia.com`, `mig.nvidia.com`: NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu), full GPUs
  and MIG devices;
- `hami-core-gpu.project-hami.io`: HAMi's own DRA driver (Project-HAMi/k8s-dra-driver), whose chart's
  DeviceClass sets `extendedResourceName: nvidia.com/gpu`;
- `gpu.amd.com`: AMD's GPU Operator DRA driver.
"""

from __future__ import annotations

DRIVERS: dict[str, str] = {
    "gpu.nvidia.com": "NVIDIA",
    "mig.nvidia.com": "NVIDIA",
    "hami-core-gpu.project-hami.io": "NVIDIA",
    "gpu.amd.com": "AMD",
}


def drivers_for(vendor_keys: set[str] | frozenset[str]) -> dict[str, str]:
    """The drivers of the vendors enabled here."""
    return {driver: key for driver, key in DRIVERS.items() if key in vendor_keys}
