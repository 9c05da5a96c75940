"""`keys --chart`: the data the chart's admission matchConditions are built from, generated from the vendors.

    python -m app.cli keys --chart > helm/hami-scheduler/generated/admission-scope.json

Why it exists (issue 28, findings 1 and 3): kube-apiserver asks our webhook only about the requests the
MutatingWebhookConfiguration's CEL `matchConditions` select, and with `failurePolicy: Fail` every request it
selects depends on our webhook being up. They must select every request the webhook could change or refuse
(a pod asking for a managed resource, anything carrying a scheduler-owned key, a Binding setting the opt-out
label) and nothing else, so that plain pods and plain Bindings never wait on us. Helm cannot run Python, so
what the webhook's rules derive from the declarations (app.core.podkeys, each family's resource names) is
written here once, into a file the chart reads (`.Files.Get`); tests/chart/test_chart_admission_scope.py
keeps the file equal to this output and the rendered conditions a superset of what the service decides.

The data, all of it a superset of what any configuration of the service protects or serves:
- `ownedKeys`, `ownedPrefixes`, `ownedAffixes`: every pod key any family declares (all families, enabled
  or not: a key of a disabled vendor sent to the webhook is merely allowed there), the scheduler-owned
  prefixes, and for families with one vendor per chip (Ascend, Iluvatar) each key with the chip's type
  word replaced by a wildcard, as (prefix, suffix), since the chart's chips may be any;
- `unboundFlags`: the core's keys outside every allocation (a trusted user's writes of them on a bound pod
  cannot be refused), and `optOutLabels`: the labels the chart's opt-outs read;
- `families`: per device-config section, HAMi's enabling rule (always, a `--enable-*` flag, or a count
  key), the chart's default resource names, the same wildcards for per-chip names, and the keys that make
  the family's webhook mutation touch every pod (`every_pod`). The chart adds the names its rendered device
  config sets (every `resource*` string of the section and of its chips).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any

from app.cli.common import TYPE
from app.core.podkeys import CORE_KEYS, OPT_OUT_LABELS, SCHEDULER_OWNED_PREFIXES
from app.core.vendor import ALLOCATION, ResourceNames, Vendor
from app.devices import REGISTRY, Family
from app.devices.common.config import DeviceConfigError

GENERATED = "helm/hami-scheduler/generated/admission-scope.json"


def _built(family: Family, *, every_backend: bool = True) -> tuple[Vendor, ...]:
    """The backends the family builds with the chart's names; `every_backend`: also those a section builds
    only when it names their count resource (Metax sGPU, Enflame GCU; as `keys` lists them)."""
    vendors: dict[str, Vendor] = {}
    for section in (None, dict.fromkeys(family.count_keys, "x"))[: 2 if every_backend else 1]:
        try:
            built = family.build(section)
        except DeviceConfigError:
            continue
        vendors.update((vendor.key, vendor) for vendor in built if vendor.key not in vendors)
    return tuple(vendors.values())


def resource_names(resources: ResourceNames) -> list[str]:
    """Every resource name of a vendor (its count, memory, percentage, cores and priority names)."""
    fields = (resources.count, resources.memory, resources.memory_percentage, resources.cores)
    return [name for name in (*fields, resources.priority) if name]


def _per_chip(vendors: Iterable[Vendor], names: Any) -> tuple[set[str], set[tuple[str, str]]]:
    """The vendors' names: exact, or — when several vendors differ only by their type word — as (prefix,
    suffix) wildcards around it."""
    vendors = tuple(vendors)
    exact: set[str] = set()
    shapes: dict[tuple[str, ...], int] = {}
    for vendor in vendors:
        shape = tuple(sorted(name.replace(vendor.key, TYPE) for name in names(vendor)))
        shapes[shape] = shapes.get(shape, 0) + 1
    affixes: set[tuple[str, str]] = set()
    for vendor in vendors:
        shape = tuple(sorted(name.replace(vendor.key, TYPE) for name in names(vendor)))
        for name in names(vendor):
            templated = name.replace(vendor.key, TYPE)
            if shapes[shape] > 1 and TYPE in templated:
                prefix, suffix = templated.split(TYPE, 1)
                affixes.add((prefix, suffix.split(TYPE, 1)[-1]))
            else:
                exact.add(name)
    return exact, affixes


def _family(family: Family) -> dict[str, Any]:
    names, affixes = _per_chip(_built(family, every_backend=False), lambda v: resource_names(v.resources))
    return {
        "section": family.section,
        "always": family.always,
        "flag": family.flag,
        "countKeys": list(family.count_keys),
        "resources": sorted(names | set(family.resources)),
        "resourceAffixes": sorted([list(pair) for pair in affixes]),
        "everyPod": list(family.every_pod),
    }


def scope() -> dict[str, Any]:
    """The file's content (module docstring)."""
    keys: set[str] = {key.name for key in CORE_KEYS}
    affixes: set[tuple[str, str]] = set()
    for family in REGISTRY:
        exact, around = _per_chip(_built(family), lambda v: [key.name for key in v.pod_keys])
        keys |= exact
        affixes |= around

    def wild(key: str) -> bool:  # matched by a prefix or a wildcard already: left out of the exact keys
        covered = any(key.startswith(p) and key.endswith(s) and len(key) > len(p + s) for p, s in affixes)
        return covered or key.startswith(SCHEDULER_OWNED_PREFIXES)

    return {
        "generatedBy": f"python -m app.cli keys --chart > {GENERATED}",
        "ownedKeys": sorted(key for key in keys if not wild(key)),
        "ownedPrefixes": sorted(SCHEDULER_OWNED_PREFIXES),
        "ownedAffixes": sorted([list(pair) for pair in affixes]),
        "unboundFlags": sorted(key.name for key in CORE_KEYS if key.role != ALLOCATION),
        "optOutLabels": list(OPT_OUT_LABELS),
        "families": [_family(family) for family in REGISTRY],
    }


def run(args: argparse.Namespace) -> str:
    del args
    return json.dumps(scope(), indent=2)
