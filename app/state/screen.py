"""Screening every node for one pod at once, on the node as it is before the pod (`app.core.prefilter`).

For each request step of the pod, the vendor's batch classification (`BatchFit`) says which devices of
every node pass its Fit checks; a node whose devices cannot serve some step cannot fit (`may_fit`). When
the steps up to a node's first failing one are all exact (pre-pod steps, no NUMA binding, a quota that
cannot bite), the node's failure reason is known without evaluating it, in HAMi's text (`reasons`).
Nodes with devices the array checks cannot judge (`DeviceColumns.mig`) are never rejected and their
reasons never stated here: they are always evaluated fully. A vendor without a batch form is screened on
the number of devices it may use alone (HAMi's `NodeInsufficientDevice`, judged before its Fit).

A vendor's classification is given only the pod annotations it declares (`BatchFit.annotation_keys`), so
`may_fit` on a node depends on the pod through its `shape` alone: the fast path remembers verdicts per
shape (`app.state.mayfit`), and pods that differ only in annotations nothing here reads share them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import numpy as np

from app.core import reasons
from app.core.fit import PodContext
from app.core.prefilter import Step, failure_reason, quota_is_slack, steps
from app.core.vendor import Vendor
from app.devices.batch import BatchFit, Bools, Codes, DeviceColumns, Ints, Objects
from app.devices.common.base import VendorDefaults


@lru_cache(maxsize=16)
def _batch_fit(vendor: Hashable) -> BatchFit | None:
    """The vendor as a BatchFit, if it is one (a runtime Protocol check is slow; vendors are few)."""
    return vendor if isinstance(vendor, BatchFit) else None


@dataclass(frozen=True, slots=True)
class _Classified:
    """One step over every node: which cells are candidates, their codes, and the per-node outcome."""

    step: Step
    reasons: Sequence[str]
    candidates: Bools
    codes: Codes
    total: Ints
    passing: Ints
    fits: Bools
    min_memreq: int
    max_memreq: int
    complete: bool = True  # False: only the number of visible devices was judged (`_count_only`)


@lru_cache(maxsize=64)
def _sees(vendor: Hashable, types: Sequence[str], owners: Sequence[str]) -> Bools:
    """`Vendor.sees` per (type, registering vendor) code pair (the tables are short and rarely change)."""
    sees = cast(Vendor, vendor).sees
    table: Bools = np.array([[sees(t, v) for v in owners] for t in types], bool).reshape(
        len(types), len(owners)
    )
    table.flags.writeable = False  # shared by every caller
    return table


def _visible(columns: DeviceColumns, vendor: Vendor) -> Bools:
    """The cells a request of `vendor` may use (`Vendor.sees`), from the type and vendor tables."""
    table = _sees(cast(Hashable, vendor), tuple(columns.types), tuple(columns.vendors or ("",)))
    codes = columns.vendor_code if columns.vendor_code is not None else np.zeros_like(columns.type_code)
    visible: Bools = columns.present & table[columns.type_code, codes]
    return visible


def _read(batch: BatchFit, annotations: Mapping[str, str]) -> dict[str, str]:
    """The annotations `batch` reads (all it is given: `shape` relies on it)."""
    return {key: annotations[key] for key in batch.annotation_keys if key in annotations}


def shape(ctx: PodContext, vendors: Mapping[str, Vendor]) -> Hashable:
    """Everything `Screen(...).may_fit` reads from the pod: equal shapes, equal verdicts on a node (pods
    of a batch share one, whatever else their annotations say)."""
    read, every = {}, steps(ctx.requests)
    for step in every:
        batch = _batch_fit(cast(Hashable, vendors.get(step.request.type)))
        if batch is not None:
            read.update(_read(batch, ctx.annotations))
    return (
        tuple((s.key, s.request, s.pristine) for s in every),
        ctx.gpu_policy,
        tuple(sorted(read.items())),
    )


def _classify(
    columns: DeviceColumns, step: Step, vendor: Vendor, batch: BatchFit, ctx: PodContext
) -> _Classified:
    candidates = _visible(columns, vendor)
    result = batch.classify(columns, step.request, _read(batch, ctx.annotations), ctx.gpu_policy)
    total = candidates.sum(axis=1)
    passing = (candidates & (result.codes == 0)).sum(axis=1)
    fits = (total >= step.request.nums) & (passing >= step.request.nums)
    memreq = result.memreq[candidates]
    return _Classified(
        step,
        batch.reasons,
        candidates,
        result.codes,
        total,
        passing,
        fits,
        int(memreq.min(initial=0)),
        int(memreq.max(initial=0)),
    )


def _counts_alone(vendor: Vendor) -> bool:
    """A vendor without a batch form whose Fit needs at least `nums` visible devices (it does not reuse a
    device for several of them, `VendorDefaults.may_reuse_devices`): HAMi's `NodeInsufficientDevice` check,
    made before Fit, can be judged from the columns alone."""
    return getattr(type(vendor), "may_reuse_devices", None) is VendorDefaults.may_reuse_devices


def _count_only(columns: DeviceColumns, step: Step, vendor: Vendor) -> _Classified:
    """A step of a vendor without a batch form: only whether the node has `nums` devices it may use."""
    candidates = _visible(columns, vendor)
    total = candidates.sum(axis=1)
    codes: Codes = np.zeros(candidates.shape, np.int8)
    return _Classified(step, ("",), candidates, codes, total, total, total >= step.request.nums, 0, 0, False)


def _distinct_rows(table: Ints) -> tuple[Ints, Ints]:
    """np.unique(table, axis=0, return_inverse=True), fast: rows of small counts are packed into one
    integer each when they fit in 63 bits (np.unique over rows is ten times slower than over integers)."""
    radix = int(table.max(initial=0)) + 1
    if radix ** table.shape[1] >= 2**63:
        unique, inverse = np.unique(table, axis=0, return_inverse=True)
        return unique, inverse.reshape(-1)
    packed = table @ (radix ** np.arange(table.shape[1], dtype=np.int64))
    _, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
    return table[first], inverse.reshape(-1)


def _reason_texts(c: _Classified, rows: Ints) -> Objects:
    """HAMi's reason text for each of `rows` (nodes where step `c` fails), from per-check counts."""
    kinds = len(c.reasons)
    local = np.repeat(np.arange(len(rows)), c.codes.shape[1]).reshape(len(rows), -1)
    cells = c.candidates[rows]
    counts = np.bincount(
        (local[cells] * kinds + c.codes[rows][cells]).astype(np.int64), minlength=len(rows) * kinds
    ).reshape(len(rows), kinds)
    short = c.total[rows] < c.step.request.nums
    table = np.column_stack([short, c.total[rows], c.passing[rows], counts[:, 1:]])
    unique, inverse = _distinct_rows(table)
    texts = np.empty(len(unique), object)
    for i, (short_, total, passing, *per_code) in enumerate(unique.tolist()):
        if short_:
            texts[i] = reasons.NODE_INSUFFICIENT_DEVICE
        else:
            counted = {c.reasons[code]: n for code, n in enumerate(per_code, start=1) if n}
            texts[i] = failure_reason(counted, passing, total)
    return cast(Objects, texts[inverse])


class Screen:
    """The screening of all nodes for one pod; `may_fit` is always computed, `reasons` on demand."""

    def __init__(
        self, columns: DeviceColumns, ctx: PodContext, vendors: Mapping[str, Vendor], devices_per_node: int
    ) -> None:
        rows = columns.present.shape[0]
        self._classified: list[_Classified | None] = []
        for step in steps(ctx.requests):
            vendor = vendors.get(step.request.type)
            batch = _batch_fit(cast(Hashable, vendor))
            classified = None
            if vendor is not None and batch is not None:
                classified = _classify(columns, step, vendor, batch, ctx)
            elif vendor is not None and _counts_alone(vendor):
                classified = _count_only(columns, step, vendor)
            self._classified.append(classified)
        # Later steps see the pod's earlier allocations; pre-pod outcomes bound them only while no
        # allocation can take negative memory (an int32 wrap of a percentage of a huge card).
        monotone = all(c is not None and c.min_memreq >= 0 for c in self._classified)
        self._ctx, self._vendors, self._devices_per_node = ctx, vendors, devices_per_node
        self.may_fit = np.ones(rows, bool)
        for c in self._classified:
            if c is not None and (c.step.pristine or monotone):
                self.may_fit &= c.fits
        self._unjudged = (columns.mig & columns.present).any(axis=1)
        self.may_fit |= self._unjudged

    def _exact(self) -> list[bool]:
        """Per step: is its classification its exact outcome (pre-pod, and nothing order-dependent)?"""
        ctx, vendors, devices_per_node = self._ctx, self._vendors, self._devices_per_node
        exact = not ctx.numa_bind and all(
            self._quota_is_slack(ctx, vendors, key, devices_per_node) for key in self._vendor_keys()
        )
        return [exact and c is not None and c.step.pristine for c in self._classified]

    def _vendor_keys(self) -> set[str]:
        return {c.step.request.type for c in self._classified if c is not None}

    def _quota_is_slack(
        self, ctx: PodContext, vendors: Mapping[str, Vendor], key: str, devices_per_node: int
    ) -> bool:
        demands = [
            (c.step.request, c.max_memreq) for c in self._classified if c and c.step.request.type == key
        ]
        vendor = vendors[key]
        return quota_is_slack(ctx.quota, ctx.namespace, vendor, ctx.gpu_policy, demands, devices_per_node)

    def reasons(self) -> tuple[Objects, Bools]:
        """Per node: its exact failure reason, and whether screening alone could tell it (else None).

        A node's reason is its first failing step's, provided every step up to that one is exact: only
        then is it certain that `evaluate_node` gets there and fails there for the same reason.
        """
        texts = np.full(len(self.may_fit), None, object)
        known = np.zeros(len(self.may_fit), bool)
        undecided = ~self._unjudged  # screening can judge the node and no earlier step fails on it
        for c, exact in zip(self._classified, self._exact(), strict=True):
            if c is None or not exact:
                break
            failing = np.flatnonzero(undecided & ~c.fits)
            if len(failing):
                texts[failing] = _reason_texts(c, failing)
                known[failing] = True
            if not c.complete:
                break  # the nodes with enough devices may still fail this step's Fit
            undecided &= c.fits
        return texts, known
