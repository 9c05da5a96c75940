"""Iluvatar GPUs, one vendor per chip type (HAMi `pkg/device/iluvatar`, vendors §2.6)."""

from app.devices.iluvatar.config import CHART_CHIPS, IluvatarChip, parse_iluvatar_config
from app.devices.iluvatar.device import Iluvatar, iluvatar_vendors

__all__ = ["CHART_CHIPS", "Iluvatar", "IluvatarChip", "iluvatar_vendors", "parse_iluvatar_config"]
