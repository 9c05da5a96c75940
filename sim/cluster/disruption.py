"""A PodDisruptionBudget's status from the pods it selects, as kube-controller-manager's disruption controller
computes it (pkg/controller/disruption): the eviction API (the real one and the emulator's,
sim/emulator/eviction.py) only reads this status, and neither the emulator nor the test control plane runs
that controller.

Simplified where our deployments do not need more: the expected pod count is the number of selected pods
(the controller takes it from the owning Deployment's scale; equal once a rollout settled), and
`disruptedPods` recorded by evictions are kept out of the healthy count until they are gone, as the
controller does for two minutes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sim.emulator.eviction import ready, selector
from sim.kit.kube import Kube, KubeError
from sim.kit.ticker import Ticker


def _count(value: Any, total: int, *, round_up: bool) -> int:
    """An IntOrString: a number, or a percentage of `total`."""
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def pdb_status(budget: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    spec = budget.get("spec") or {}
    status = budget.get("status") or {}
    chosen = selector(spec.get("selector"))
    namespace = (budget.get("metadata") or {}).get("namespace")
    selected = [
        p
        for p in pods
        if (p.get("metadata") or {}).get("namespace") == namespace
        and chosen.matches((p.get("metadata") or {}).get("labels") or {})
    ]
    disrupted = dict(status.get("disruptedPods") or {})
    present = {(p.get("metadata") or {}).get("name") for p in selected}
    disrupted = {name: when for name, when in disrupted.items() if name in present}
    healthy = sum(
        1
        for p in selected
        if ready(dict(p))
        and not (p.get("metadata") or {}).get("deletionTimestamp")
        and (p.get("metadata") or {}).get("name") not in disrupted
    )
    expected = len(selected)
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _count(spec["maxUnavailable"], expected, round_up=True))
    else:
        desired = _count(spec.get("minAvailable", 1), expected, round_up=True)
    generation = int((budget.get("metadata") or {}).get("generation") or 1)
    return {
        "observedGeneration": generation,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": max(0, healthy - desired),
        "disruptedPods": disrupted or None,
    }


class DisruptionController:
    """kube-controller-manager's disruption controller for one budget: every `period` seconds its status
    from the pods, written to the status subresource (on the emulator or the real API server)."""

    def __init__(self, kube: Kube, namespace: str, name: str, period: float = 0.2) -> None:
        self._kube = kube
        self._path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}"
        self._pods = f"/api/v1/namespaces/{namespace}/pods"
        self._ticker = Ticker("disruption", period, self._tick)

    def start(self) -> DisruptionController:
        self._ticker.start()
        return self

    def close(self) -> None:
        self._ticker.stop(10)

    def status(self) -> dict[str, Any]:
        return dict(self._kube.get(self._path).get("status") or {})

    def _tick(self) -> None:
        try:
            budget = self._kube.get(self._path)
            pods = self._kube.list(self._pods)[1]
            self._kube.patch(f"{self._path}/status", {"status": pdb_status(budget, pods)})
        except KubeError:  # a conflict or a server going away: the next round computes it again
            return
