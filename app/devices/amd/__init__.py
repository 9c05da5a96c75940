"""AMD GPUs shared by memory and compute units (HAMi `pkg/device/amd`, vendors §2.11)."""

from app.devices.amd.device import Amd, AmdConfig, parse_amd_config

__all__ = ["Amd", "AmdConfig", "parse_amd_config"]
