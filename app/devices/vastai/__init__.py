"""Vastai accelerators, whole cards or dies (HAMi `pkg/device/vastai`, vendors §2.12)."""

from app.devices.vastai.device import Vastai, VastaiConfig, parse_vastai_config

__all__ = ["Vastai", "VastaiConfig", "parse_vastai_config"]
