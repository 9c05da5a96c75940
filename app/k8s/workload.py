"""Is Kubernetes' Workload API served: may the registration worker list and watch PodGroups?

PodGroups are `scheduling.k8s.io/v1beta1` (gate `GenericWorkload`, beta and off by default in 1.37 and
1.38; absent before 1.37). A cluster without them answers 404 for the group version, or serves it without
`podgroups`: no gangs, not an error (docs/gangs.md). A 403 means the chart's RBAC for podgroups is missing
(an older ClusterRole): no gangs either, said once by the caller.
"""

from __future__ import annotations

from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.objects import get_json

GROUP_VERSION = "/apis/scheduling.k8s.io/v1beta1"
PODGROUPS = "podgroups"


def podgroups_served(kube: Kube) -> bool:
    """True when the API server serves scheduling.k8s.io/v1beta1 podgroups; False on 404 (not served) or
    when the group version lists no podgroups. Any other failure (403 included) raises ApiError."""
    try:
        found = get_json(kube, GROUP_VERSION)
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    resources = found.get("resources")
    if not isinstance(resources, list):
        return False
    return any(isinstance(r, dict) and r.get("name") == PODGROUPS for r in resources)
