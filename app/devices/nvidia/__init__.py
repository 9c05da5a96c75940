"""NVIDIA GPUs shared through HAMi-core: the only vendor this scheduler implements so far."""

from app.devices.nvidia.config import NvidiaConfig, parse_nvidia_config
from app.devices.nvidia.device import Nvidia

__all__ = ["Nvidia", "NvidiaConfig", "parse_nvidia_config"]
