"""Whose allocations count: pods of our scheduler name, and pods of the adopted names (a migration's).

Why it exists: a pod's allocation annotations are honoured by HAMi's device plugin whoever wrote them, so
every pod a HAMi-compatible scheduler placed must count as usage, or its GPUs are handed out twice. Pods
placed by HAMi's own scheduler (`hami-scheduler` unless renamed) keep their `spec.schedulerName` after HAMi
is removed, so when ours runs under another name — or HAMi ran under one — their allocations would be
invisible. Adopted names close that gap. They are counted, never scheduled nor written: kube-scheduler only
sends pods of our profile to /filter and /bind.

The other side of the rule (HAMi #3041): a pod of any other name never counts, so a pod that slipped past
the webhook with forged annotations cannot reserve capacity. `default-scheduler` can therefore never be
adopted: it is the name of every pod the webhook leaves alone.

Invariant: the ledger's worker rebuild, its live reconciliation, bind's re-check (through the ledger), the
webhook's quota view (through the ledger) and the `explain` command all decide with `Counted.role`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HAMI_DEFAULT_SCHEDULER = "hami-scheduler"  # HAMi's chart default `schedulerName` (reference §10.5)
DEFAULT_SCHEDULER = "default-scheduler"
OURS, ADOPTED, FOREIGN = "ours", "adopted", "foreign"

# spec.schedulerName must be a DNS-1123 subdomain (the API server validates it); the names also go into
# field selectors, which must not see commas or `=`.
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def name_problem(name: str) -> str:
    """Why `name` cannot be adopted ('' when it can)."""
    if not name or len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        return f"{name!r} is not a valid scheduler name (a DNS-1123 subdomain)"
    if name == DEFAULT_SCHEDULER:
        return (
            f"{DEFAULT_SCHEDULER!r} cannot be adopted: every pod the webhook leaves alone names it, so its "
            "allocation annotations were checked by nobody"
        )
    return ""


def scheduler_of(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec")
    name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) else ""


@dataclass(frozen=True, slots=True)
class Counted:
    """Our scheduler name and the adopted ones, in the order configured."""

    ours: str = HAMI_DEFAULT_SCHEDULER
    adopted: tuple[str, ...] = (HAMI_DEFAULT_SCHEDULER,)

    @property
    def names(self) -> frozenset[str]:
        return frozenset((self.ours, *self.adopted))

    def ordered(self) -> tuple[str, ...]:
        """Every counted name once, ours first."""
        return tuple(dict.fromkeys((self.ours, *self.adopted)))

    def role(self, pod: Mapping[str, Any]) -> str:
        """OURS, ADOPTED (counted, never written) or FOREIGN (never counted)."""
        name = scheduler_of(pod)
        if name == self.ours:
            return OURS
        return ADOPTED if name in self.adopted else FOREIGN


def refusal(counted: Counted, pod: Mapping[str, Any]) -> str:
    """Why /filter and /bind must not touch `pod` ('' when they may): its name is adopted, not ours."""
    if counted.role(pod) != ADOPTED:
        return ""
    metadata = pod.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    who = f"{metadata.get('namespace') or 'default'}/{metadata.get('name') or '?'}"
    return (
        f"pod {who} belongs to the adopted scheduler {scheduler_of(pod)!r}: its allocation is counted, "
        f"never changed; only pods of {counted.ours!r} are scheduled here"
    )


def parse_names(raw: str) -> tuple[str, ...]:
    """`a,b` -> ('a', 'b'); blanks dropped, duplicates kept once; raises ValueError naming a bad entry."""
    names = tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    for name in names:
        problem = name_problem(name)
        if problem:
            raise ValueError(problem)
    return names


def describe(counted: Counted, roles: Sequence[str]) -> str:
    """One line for operators: how many counted pods are ours and adopted."""
    ours = sum(1 for r in roles if r == OURS)
    adopted = sum(1 for r in roles if r == ADOPTED)
    names = ", ".join(n for n in counted.adopted if n != counted.ours) or "none"
    return f"{ours + adopted} pods hold devices: {ours} ours ({counted.ours}), {adopted} adopted ({names})"
