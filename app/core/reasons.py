"""Failure reason keys and HAMi's `GenReason` format (reference §4.7, §4.8).

The strings reach users through `FailedNodes` and events, and tools grep them, so they are HAMi's exactly
(note `CardUuidMismatch`, HAMi's spelling).
"""

from __future__ import annotations

from collections.abc import Mapping

CARD_NOT_HEALTH = "CardNotHealth"
CARD_CORDONED = "CardCordoned"
CARD_TYPE_MISMATCH = "CardTypeMismatch"
NUMA_NOT_FIT = "NumaNotFit"
CARD_UUID_MISMATCH = "CardUuidMismatch"
CARD_TIME_SLICING_EXHAUSTED = "CardTimeSlicingExhausted"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT = "ExclusiveDeviceAllocateConflict"
RESOURCE_QUOTA_NOT_FIT = "ResourceQuotaNotFit"
CARD_INSUFFICIENT_MEMORY = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE = "CardInsufficientCore"
CARD_COMPUTE_UNITS_EXHAUSTED = "CardComputeUnitsExhausted"
CARD_MIG_TOPOLOGY_INFEASIBLE = "CardMigTopologyInfeasible"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST = "AllocatedCardsInsufficientRequest"
CARD_NOT_FOUND_CUSTOM_FILTER_RULE = "CardNotFoundCustomFilterRule"
MODE_NOT_FIT = "ModeNotFit"
# Metax sGPU's own keys (vendors §1.7)
CARD_UNHEALTHY = "CardUnhealthy"
CARD_QOS_POLICY_MISMATCH = "CardQosPolicyMismatch"
CARD_APP_CLASS_MISMATCH = "CardAppClassMismatch"

NODE_UNREGISTERED = "node unregistered"
NODE_USAGE_UNAVAILABLE = "node usage unavailable"
NODE_INSUFFICIENT_DEVICE = "NodeInsufficientDevice"
DEVICE_TYPE_NOT_FOUND = "Device type not found"


def gen_reason(counts: Mapping[str, int], total: int) -> str:
    """`<count>/<total> <Key>` per reason, sorted as strings, joined with ", " (HAMi common.GenReason)."""
    return ", ".join(sorted(f"{count}/{total} {key}" for key, count in counts.items()))


def device_not_found(uuid: str, node: str) -> str:
    return f'Device with UUID "{uuid}" not found on node {node} after Fit'


def add_usage_failed(uuid: str, error: str) -> str:
    return f"AddResourceUsage failed for device {uuid}: {error}"
