"""A pod no scheduler places (its schedulerName names nobody): it stays Pending, so a real suite can write
its annotations and Bindings by hand as our processes or HAMi's device plugin would, and see what the API
server and our webhook make of each write."""

from __future__ import annotations

from typing import Any


def unplaced_pod(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulerName": "nobody-scheduler", "containers": [{"name": "main", "image": "busybox"}]},
    }
