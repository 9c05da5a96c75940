"""Moore Threads GPUs shared as sGPUs (HAMi `pkg/device/mthreads`, vendors §2.7)."""

from app.devices.mthreads.device import Mthreads, MthreadsConfig, parse_mthreads_config

__all__ = ["Mthreads", "MthreadsConfig", "parse_mthreads_config"]
