"""Biren GPUs (HAMi `pkg/device/biren`, vendors §2.13)."""

from app.devices.biren.device import Biren, BirenConfig, parse_biren_config

__all__ = ["Biren", "BirenConfig", "parse_biren_config"]
