"""How one vendor's recorded memory and cores read, for what people see (`explain`, the demo's table).

Why it exists: the allocation annotations hold numbers whose unit is the vendor's — NVIDIA's `usedcores` is a
percentage of one GPU, AMD's is compute units, AWS Neuron's a bitmask of NeuronCores, Moore Threads' one of
the 16 cores of a GPU, an Enflame GCU's memory 100 tokens per card. Printing `%` for every vendor misreads
three of them. A vendor whose units are not MiB and percent declares the optional `Units` hook; everyone
else gets the defaults.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Units(Protocol):
    """Optional for a vendor whose recorded memory or cores are not MiB and percent of one device."""

    def memory_text(self, amount: int) -> str:
        """`amount` of recorded memory, with its unit (`16384 MiB`)."""

    def cores_text(self, amount: int) -> str:
        """`amount` of recorded cores, with its unit (`30%`)."""

    def request_cores_text(self, amount: int) -> str:
        """`amount` of cores as a request asks them (AMD asks percent, records compute units)."""


def memory_text(vendor: object, amount: int) -> str:
    """Recorded memory of `vendor`'s device, readable; MiB unless the vendor says otherwise."""
    return vendor.memory_text(amount) if isinstance(vendor, Units) else f"{amount} MiB"


def cores_text(vendor: object, amount: int) -> str:
    """Recorded cores of `vendor`'s device, readable; percent of one device unless the vendor says."""
    return vendor.cores_text(amount) if isinstance(vendor, Units) else f"{amount}%"


def request_cores_text(vendor: object, amount: int) -> str:
    """Cores a request of `vendor` asks, readable; percent of one device unless the vendor says."""
    return vendor.request_cores_text(amount) if isinstance(vendor, Units) else f"{amount}%"


def mask_text(mask: int, what: str) -> str:
    """A bitmask of core units as the cores it names: `NeuronCore 0+1` (`what` is the unit's name)."""
    bits = [str(bit) for bit in range(mask.bit_length()) if mask >> bit & 1]
    return f"{what} {'+'.join(bits)}" if bits else f"no {what}"
