"""kube-apiserver's own count of the calls it made to our webhook, and of the ones its matchConditions left
out, read from its /metrics: what proves on the real API server that a request was, or was not, sent to us."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sim.kit.kube import Kube

WEBHOOK = "vgpu.hami.io"
CALLS = "apiserver_admission_webhook_admission_duration_seconds_count"
EXCLUDED = "apiserver_admission_match_condition_exclusions_total"
ERRORS = "apiserver_admission_match_condition_evaluation_errors_total"
_SAMPLE = re.compile(r"^(?P<metric>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


@dataclass(frozen=True)
class Counts:
    calls: float  # requests kube-apiserver sent to our webhook
    excluded: float  # requests our rules matched and our matchConditions left out
    errors: float  # matchCondition evaluations that failed (each fails the request under Fail)

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.calls - other.calls, self.excluded - other.excluded, self.errors - other.errors)


def counts(admin: Kube, operation: str = "") -> Counts:
    """The sums over every sample of our webhook (of one operation, e.g. CREATE, when given)."""
    status, text = admin.exchange("GET", "/metrics")
    assert status == 200 and isinstance(text, str), f"kube-apiserver /metrics answered {status}"
    sums = dict.fromkeys((CALLS, EXCLUDED, ERRORS), 0.0)
    for line in text.splitlines():
        sample = _SAMPLE.match(line)
        labels = sample["labels"] if sample else ""
        if not sample or sample["metric"] not in sums or f'name="{WEBHOOK}"' not in labels:
            continue
        if not operation or f'operation="{operation}"' in labels:
            sums[sample["metric"]] += float(sample["value"])  # type: ignore[index]
    return Counts(sums[CALLS], sums[EXCLUDED], sums[ERRORS])
