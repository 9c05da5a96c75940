"""The pods whose allocations count, watched as one: one list+watch per counted scheduler name.

Why it exists: the ledger counts pods of our scheduler name and of the adopted names
(app/core/adoption.py). The API server's field selectors cannot express "one of these names", and watching
every pod of the cluster would cost memory at scale (most pods are not GPU pods), so each name gets its own
`spec.schedulerName=<name>` informer. `spec.schedulerName` is immutable, so every pod lives in exactly one
of them and their events never race each other; the reconciler handles them all under its one lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.k8s.client import Kube
from app.k8s.watching import Target, list_objects
from workers.informers import Handler, Informer, by_uid
from workers.shapes import Shape


def pod_targets(names: Sequence[str]) -> tuple[Target, ...]:
    return tuple(Target("pods", field_selector=f"spec.schedulerName={name}") for name in names)


class PodWatch:
    """One informer per counted scheduler name, read as one store keyed by pod UID."""

    def __init__(
        self,
        kube: Kube,
        names: Sequence[str],
        shape: Shape,
        handler: Handler,
        *,
        on_restart: Callable[[str, str], None],
    ) -> None:
        self._kube = kube
        self._shape = shape
        self.targets = pod_targets(names)
        self.informers = tuple(
            Informer(kube, target, shape, by_uid, handler, on_restart=on_restart) for target in self.targets
        )

    def get(self, uid: str) -> dict[str, Any] | None:
        for informer in self.informers:
            found = informer.get(uid)
            if found is not None:
                return found
        return None

    def keys(self) -> set[str]:
        return set().union(*(informer.keys() for informer in self.informers))

    def list_fresh(self, on_page: Callable[[], None]) -> list[dict[str, Any]]:
        """A fresh list of every counted pod from the API (not the watch caches), one name after the other."""
        found: list[dict[str, Any]] = []
        for target in self.targets:
            items, _ = list_objects(self._kube, target, self._shape, on_page=on_page)
            found.extend(items)
        return found
