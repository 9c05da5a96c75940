"""Read-only lists of the DRA objects the registration worker and `inspect` compare with our inventory.

DeviceClasses and ResourceSlices of resource.k8s.io/v1 (GA in Kubernetes 1.34), as plain JSON, paged. A
cluster that does not serve that group-version (older than 1.34, or the API turned off) answers 404: the lists
are then None — no DRA, not an error (`app.core.dra.facts`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.objects import get_json

GROUP_VERSION = "/apis/resource.k8s.io/v1"
PAGE = 500


def list_cluster(kube: Kube, plural: str) -> list[dict[str, Any]] | None:
    """Every object of a cluster-scoped resource.k8s.io/v1 resource; None when the API is not served."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        query = {"limit": PAGE, **({"continue": token} if token else {})}
        try:
            page = get_json(kube, f"{GROUP_VERSION}/{plural}?{urlencode(query)}")
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        items.extend(i for i in page.get("items") or () if isinstance(i, dict))
        metadata = page.get("metadata")
        token = str(metadata.get("continue") or "") if isinstance(metadata, dict) else ""
        if not token:
            return items


def list_dra(kube: Kube) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """(DeviceClasses, ResourceSlices), or None where the cluster has no resource.k8s.io/v1."""
    classes = list_cluster(kube, "deviceclasses")
    if classes is None:
        return None
    slices = list_cluster(kube, "resourceslices")
    return None if slices is None else (classes, slices)
