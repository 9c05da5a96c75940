"""Huawei Ascend NPUs, one vendor per chip type (HAMi `pkg/device/ascend`, vendors §2.1)."""

from app.devices.ascend.config import CHART_CHIPS, AscendConfig, Chip, Template, parse_ascend_config
from app.devices.ascend.device import Ascend, ascend_vendors

__all__ = [
    "CHART_CHIPS",
    "Ascend",
    "AscendConfig",
    "Chip",
    "Template",
    "ascend_vendors",
    "parse_ascend_config",
]
