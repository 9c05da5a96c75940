"""The state of every device in the cluster as arrays, and the vendor capability that reads it.

The service's fast path asks, per pod, "which devices would pass this vendor's Fit checks?" for all
40,000 GPUs of a large cluster at once. Answering it one `DeviceUsage` at a time costs about 60 µs per node
(a third of a second per pod at 5,000 nodes), so the device state is kept as numpy arrays, one row per node
and one column per device slot, and a vendor that can classify a whole array implements `BatchFit`.

A vendor's batch classification must agree with its `fit` device by device; it is an optimisation of the
same rules, never a second opinion (tests compare the two on random devices).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from app.core.model import DeviceRequest

Bools = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]
Codes = npt.NDArray[np.int8]
Objects = npt.NDArray[np.object_]


@dataclass(frozen=True, slots=True)
class DeviceColumns:
    """Devices as (nodes, slots) arrays; slot j of row i is device j of node i in registration order.

    Rows of nodes with fewer devices are padded with `present == False`. `types`/`modes` are the distinct
    strings that `type_code`/`mode_code` index.
    Usage columns (`used`, `usedmem`, `usedcores`) hold the existing reservations, as `working_devices`
    applies them. `mig` marks the devices whose fit the array checks cannot judge: `mig`-mode devices (one
    may serve several slices, within the placements free) and devices with MIG slices in use (whose health
    depends on them, `app.core.mig`); a node with any is always evaluated fully.
    """

    present: Bools
    health: Bools
    cordoned: Bools
    type_code: Ints
    mode_code: Ints
    count: Ints
    totalmem: Ints
    totalcore: Ints
    used: Ints
    usedmem: Ints
    usedcores: Ints
    mig: Bools
    types: Sequence[str]
    modes: Sequence[str]
    ids: Objects
    rows: Ints | None = None  # which rows of `ids` these columns are (None: all of them)
    vendor_code: Ints | None = None  # the registering vendor per cell, indexing `vendors` (None: all "")
    vendors: Sequence[str] = ()

    def device_ids(self) -> Objects:
        """The UUID of every cell ("" for padding); copied only when asked (rarely needed)."""
        return self.ids if self.rows is None else self.ids[self.rows]

    def take(self, rows: Ints) -> DeviceColumns:
        """The same columns for `rows` only (in that order)."""
        return DeviceColumns(
            self.present[rows],
            self.health[rows],
            self.cordoned[rows],
            self.type_code[rows],
            self.mode_code[rows],
            self.count[rows],
            self.totalmem[rows],
            self.totalcore[rows],
            self.used[rows],
            self.usedmem[rows],
            self.usedcores[rows],
            self.mig[rows],
            self.types,
            self.modes,
            self.ids,
            rows if self.rows is None else self.rows[rows],
            None if self.vendor_code is None else self.vendor_code[rows],
            self.vendors,
        )


@dataclass(frozen=True, slots=True)
class Classified:
    """Per device: 0 when it passes every check, else the code of the first check it fails (see
    `BatchFit.reasons`); and the memory the request would take on it (HAMi's `memreq`)."""

    codes: Codes
    memreq: Ints


@runtime_checkable
class BatchFit(Protocol):
    """A vendor whose per-device Fit checks can run over `DeviceColumns` at once."""

    @property
    def reasons(self) -> Sequence[str]:
        """Reason key per code (index 0, "passes", is unused)."""

    @property
    def annotation_keys(self) -> Sequence[str]:
        """The pod annotations `classify` reads; it is only ever given these (the fast path remembers a
        classification per pod shape, and other annotations must not split shapes)."""

    def classify(
        self, columns: DeviceColumns, request: DeviceRequest, annotations: Mapping[str, str], policy: str
    ) -> Classified:
        """The first failing check of every device for one request, in the order `fit` checks them.

        Checks that depend on the devices already chosen for the container (NUMA binding runs, the
        namespace quota) are not applied; the caller knows when they could matter.
        """
