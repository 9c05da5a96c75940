"""pods/eviction: kube-apiserver's eviction subresource with its PodDisruptionBudget check, as `kubectl drain`
uses it (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go, v1.34).

The order is the real server's: a pod that is finished, pending or already terminating is deleted without
looking at budgets; more than one matching budget is an error (500 in a Status); a pod that is not Ready
is deleted when its budget says `unhealthyPodEvictionPolicy: AlwaysAllow`, or (IfHealthyBudget, the
default) when the budget has its desired healthy pods; otherwise the budget must have been observed at its
generation and allow a disruption — then `status.disruptionsAllowed` is decremented, the pod recorded in
`status.disruptedPods` and the pod deleted gracefully; else 429 "Cannot evict pod as it would violate the
pod's disruption budget.".

Like the real server, this never computes a budget's status: the disruption controller of
kube-controller-manager does. The emulator has none (neither has the real control plane our tests run), so
a test that evicts runs `sim.cluster.disruption`, which computes it from the pods the way that controller
does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sim.emulator import resources
from sim.emulator.errors import ApiError
from sim.emulator.objects import DeleteOptions, Objects
from sim.emulator.selectors import FieldSelector, LabelSelector, Requirement

TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."
MANY_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}


def selector(raw: Any) -> LabelSelector:
    """A metav1.LabelSelector object (matchLabels, matchExpressions); empty selects everything."""
    raw = raw if isinstance(raw, dict) else {}
    labels = raw.get("matchLabels") or {}
    requirements = [Requirement(k, "=", frozenset({str(v)})) for k, v in labels.items()]
    for term in raw.get("matchExpressions") or ():
        requirements.append(
            Requirement(str(term["key"]), _OPERATORS[term["operator"]], frozenset(term.get("values") or ()))
        )
    return LabelSelector(tuple(requirements))


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _can_ignore_budgets(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def _too_many() -> ApiError:
    return ApiError(429, TOO_MANY, reason="TooManyRequests", retry_after=0)


def evict(objects: Objects, namespace: str, name: str, body: Any) -> None:
    """Evict the pod or raise the ApiError the real server answers."""
    if not isinstance(body, dict) or (body.get("metadata") or {}).get("name", name) != name:
        raise ApiError(400, "name in URL does not match name in Eviction object")
    pod = objects.get(resources.PODS, namespace, name).obj
    options = DeleteOptions((body.get("deleteOptions") or {}).get("gracePeriodSeconds"))
    if _can_ignore_budgets(pod):
        objects.delete(resources.PODS, namespace, name, options)
        return
    labels = pod["metadata"].get("labels") or {}
    _, entries = objects.select(resources.PDBS, namespace, LabelSelector(), FieldSelector())
    budgets = [e.obj for e in entries if selector(e.obj.get("spec", {}).get("selector")).matches(labels)]
    if len(budgets) > 1:
        raise ApiError(500, MANY_BUDGETS)
    if budgets:
        budget = budgets[0]
        spec, status = budget.get("spec") or {}, budget.get("status") or {}
        if not ready(pod):
            if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
                objects.delete(resources.PODS, namespace, name, options)
                return
            desired = int(status.get("desiredHealthy", 0))
            if int(status.get("currentHealthy", 0)) >= desired > 0:
                objects.delete(resources.PODS, namespace, name, options)
                return
        _decrement(objects, namespace, budget, name)
    objects.delete(resources.PODS, namespace, name, options)


def _decrement(objects: Objects, namespace: str, budget: dict[str, Any], pod: str) -> None:
    meta, status = budget["metadata"], budget.get("status") or {}
    if int(status.get("observedGeneration", 0)) < int(meta.get("generation", 1)):
        raise _too_many()
    allowed = int(status.get("disruptionsAllowed", 0))
    if allowed < 0:
        why = (
            f'poddisruptionbudgets.policy "{meta["name"]}" is forbidden: pdb disruptions allowed is negative'
        )
        raise ApiError(403, why)
    if allowed == 0:
        raise _too_many()
    disrupted = dict(status.get("disruptedPods") or {})
    disrupted[pod] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch = {"status": {"disruptionsAllowed": allowed - 1, "disruptedPods": disrupted}}
    objects.patch(resources.PDBS, namespace, meta["name"], "application/merge-patch+json", patch, "status")
