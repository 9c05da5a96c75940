"""Who may write which pod annotation: every rule derived from the vendors' `pod_keys` declarations.

Why it exists (issue 19, finding 1): a device plugin hands out whatever the pod's keys name — HAMi's
allocation lists, but also `AWS_NEURON_IDS`, `BAIDU_COM_DEVICE_IDX`, `mthreads.com/gpu-index`,
`CAMBRICON_DSMLU_PROFILE`, Enflame's `gcu-assigned-*`, `huawei.com/<chip>` — while the ledger counts what
the scheduler chose. A hand-kept list of "scheduler-owned" keys in the core protected only HAMi's own, so
anyone with `pods/patch` could rewrite the others on UPDATE. Now each vendor declares every key it writes
by role (`app.core.vendor.PodKey`), the core declares its own (`CORE_KEYS`), and the webhook's CREATE
stripping, its UPDATE rule, the stale-key cleanup of a re-filtered pod, the informers' pod shape and
`inspect`'s consistency check all come from here.

The rules (invariant 7 of the architecture):
- CREATE: a declared key (or any `hami.io/vgpu-*` / `hami.io/bind-*` key) on a new pod was forged: removed.
- UPDATE by an untrusted user: no declared key may be added, changed or removed.
- UPDATE of a bound pod, whoever asks: an `ALLOCATION` key changes only as its `amend` relation allows (by
  default not at all); flags and informational keys stay the trusted users' (the device plugins flip them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from app.core.decision import ASSIGNED_NODE, ASSIGNED_TIME
from app.core.nodelock import BIND_PHASE, BIND_TIME
from app.core.vendor import ALLOCATION, FLAG, INFO, PodKey, Vendor

# Keys under these prefixes belong to the scheduler and HAMi's device plugins whether declared or not.
SCHEDULER_OWNED_PREFIXES = ("hami.io/vgpu-", "hami.io/bind-")
HAMI_PLUGIN = "every device plugin on HAMi's protocol"
# The labels the chart's opt-outs read (`hami.io/webhook: ignore` on a namespace; on a pod with
# `webhook.podOptOut`): a Binding, which the API server copies labels from too, may not set them.
OPT_OUT_LABELS = ("hami.io/webhook",)

# The keys every vendor's pods carry, written by the core (`hami.io/vgpu-node` first, the bind phase at bind).
CORE_KEYS = (
    PodKey(ASSIGNED_NODE, ALLOCATION),
    PodKey(ASSIGNED_TIME, INFO),
    PodKey(BIND_PHASE, FLAG, plugin=HAMI_PLUGIN),
    PodKey(BIND_TIME, INFO),
)


def consumed(old: str | None, new: str | None) -> bool:
    """A device plugin's write to HAMi's to-allocate list (reference §5.1): it empties container groups
    one by one (the groups keep their positions; the encoding may grow trailing `;`), never adds or
    changes a device. True when `new` is `old` with some container groups emptied."""
    before = (old or "").split(";")
    for position, group in enumerate((new or "").split(";")):
        if group and (position >= len(before) or before[position] != group):
            return False
    return True


def declared(vendors: Iterable[Vendor]) -> dict[str, PodKey]:
    """Every declared pod key by name: the core's, then each vendor's (a key two vendors declare, such as
    Ascend's `predicate-time`, must be declared alike; the first declaration wins)."""
    keys = {key.name: key for key in CORE_KEYS}
    for vendor in vendors:
        for key in vendor.pod_keys:
            keys.setdefault(key.name, key)
    return keys


def allocation_keys(vendors: Iterable[Vendor]) -> frozenset[str]:
    """The names of every key that makes up a pod's allocation (role `ALLOCATION`, the core's node too)."""
    return frozenset(name for name, key in declared(vendors).items() if key.role == ALLOCATION)


def owned(name: str, keys: Mapping[str, PodKey]) -> bool:
    """Is this pod annotation written only by the scheduler or a device plugin?"""
    return name in keys or name.startswith(SCHEDULER_OWNED_PREFIXES)


def owned_of(annotations: Mapping[str, str], keys: Mapping[str, PodKey]) -> dict[str, str]:
    return {name: value for name, value in annotations.items() if owned(name, keys)}


def changed(old: Mapping[str, str], new: Mapping[str, str], keys: Mapping[str, PodKey]) -> list[str]:
    """The owned keys an update adds, changes or removes, sorted."""
    a, b = owned_of(old, keys), owned_of(new, keys)
    return sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))


def reallocated(old: Mapping[str, str], new: Mapping[str, str], keys: Mapping[str, PodKey]) -> list[str]:
    """The allocation keys an update of a bound pod would change beyond what their `amend` allows (for
    everyone: the devices were handed to the running containers)."""
    return [
        name
        for name in changed(old, new, keys)
        if name in keys
        and keys[name].role == ALLOCATION
        and not keys[name].amend(old.get(name), new.get(name))
    ]


def unaccounted(annotations: Mapping[str, str], vendors: Sequence[Vendor]) -> list[str]:
    """The allocation keys a pod carries for a vendor whose allocated list — the one the ledger counts —
    it does not carry: a device plugin would hand out what they name while nobody counts it (a forged key
    that got past the webhook, e.g. while it failed open). The filter always writes the list with them."""
    found = []
    for vendor in vendors:
        if vendor.allocated_annotation and vendor.allocated_annotation not in annotations:
            found += [k.name for k in vendor.pod_keys if k.role == ALLOCATION and k.name in annotations]
    return sorted(set(found))
