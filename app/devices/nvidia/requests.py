"""NVIDIA `GenerateResourceRequests`: one container's resources -> a device request (reference §3.1).

HAMi silently drops a container's whole request when the memory value is out of range (e.g. `16Gi`, read
as 17179869184 MiB) or wraps a huge GPU count to a negative int32; the pod is then treated as asking for
nothing and may land on a node without GPUs (quirk #5). We refuse such values with `InvalidRequest`, which
the filter reports as an Error and the webhook as a denial (docs/compatibility.md). Every other rule is
HAMi's, including the percentage sentinel and the defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core import quantity
from app.core.model import PERCENT_UNSET, DeviceRequest
from app.core.pods import resource
from app.core.vendor import InvalidRequest
from app.devices.nvidia.config import NvidiaConfig
from app.devices.nvidia.keys import VENDOR

INT32_MAX = 2**31 - 1


def _show(value: Any) -> str:
    return str(value) if isinstance(value, str | int | float) else type(value).__name__


def container_request(config: NvidiaConfig, container: Mapping[str, Any]) -> DeviceRequest | None:
    raw_count = resource(container, config.resource_count_name) if config.resource_count_name else None
    if raw_count is None:
        return None
    count = quantity.as_int64(raw_count)
    if count is None:
        return None
    if count == 0:
        return None
    if not 0 < count <= INT32_MAX:
        raise InvalidRequest(
            f"invalid {config.resource_count_name} value {_show(raw_count)}: "
            f"must be between 1 and {INT32_MAX}"
        )

    factor = max(config.memory_factor, 1)
    memnum = 0
    raw_mem = resource(container, config.resource_memory_name) if config.resource_memory_name else None
    if raw_mem is not None:
        mem = quantity.as_int64(raw_mem)
        limit = INT32_MAX // factor
        if mem is None or not 0 <= mem <= limit:
            raise InvalidRequest(
                f"invalid {config.resource_memory_name} value {_show(raw_mem)}: "
                f"must be a whole number of MiB between 0 and {limit}"
            )
        memnum = mem * factor

    mempnum = PERCENT_UNSET
    pct_name = config.resource_memory_percentage_name
    raw_pct = resource(container, pct_name) if pct_name else None
    if raw_pct is not None:
        pct = quantity.as_int64(raw_pct)
        if pct is not None:
            if pct > 100:
                mempnum = 100
            elif pct > 0:
                mempnum = pct

    if mempnum == PERCENT_UNSET and memnum == 0:
        if config.default_memory != 0:
            memnum = config.default_memory
        else:
            mempnum = 100

    cores = config.default_cores
    raw_cores = resource(container, config.resource_core_name) if config.resource_core_name else None
    if raw_cores is not None:
        parsed = quantity.as_int64(raw_cores)
        if parsed is None or not 0 <= parsed <= INT32_MAX:
            raise InvalidRequest(
                f"invalid {config.resource_core_name} value {_show(raw_cores)}: "
                f"must be a whole number between 0 and {INT32_MAX} "
                "(percent of one GPU; above 100 counts as 100)"
            )
        cores = parsed

    return DeviceRequest(nums=count, type=VENDOR, memreq=memnum, mem_percentage=mempnum, coresreq=cores)
