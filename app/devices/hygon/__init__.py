"""Hygon DCUs (HAMi `pkg/device/hygon`, vendors §2.2)."""

from app.devices.hygon.device import Hygon, HygonConfig, parse_hygon_config

__all__ = ["Hygon", "HygonConfig", "parse_hygon_config"]
