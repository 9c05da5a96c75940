"""Cambricon MLUs shared through dsmlu (HAMi `pkg/device/cambricon`, vendors §2.3)."""

from app.devices.cambricon.device import Cambricon, CambriconConfig, parse_cambricon_config

__all__ = ["Cambricon", "CambriconConfig", "parse_cambricon_config"]
