"""kube-apiserver's write semantics on top of the store.

Create (generateName, uid, creationTimestamp, pod defaults, implicit namespaces), replace and patch
(optimistic concurrency on resourceVersion, immutable identity fields, status only through /status for kinds
that split it), delete (graceful for bound pods, finished later by a background timer), pods/binding,
delete-collection, bulk seeding and reset. Updates (their content comes from ``versions``) are computed
outside the store lock and committed only if the object did not change meanwhile, so the critical section
stays a dict update.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.emulator import resources, versions
from sim.emulator.deferred import Deferred
from sim.emulator.errors import ApiError, already_exists, bad_request, conflict, invalid, not_found
from sim.emulator.patching import apply_patch
from sim.emulator.resources import NAMESPACES, PODS, ResourceType
from sim.emulator.selectors import FieldSelector, LabelSelector
from sim.emulator.store import Entry, JsonObj, Store

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class DeleteOptions:
    grace_period: int | None = None
    uid: str | None = None
    resource_version: str | None = None


@dataclass(frozen=True)
class Deletion:
    entry: Entry
    gone: bool  # False while a graceful pod deletion is pending


def _namespace_key(rtype: ResourceType, namespace: str | None) -> str:
    return (namespace or "") if rtype.namespaced else ""


def _sort_key(entry: Entry) -> tuple[str, str]:
    meta = entry.metadata
    return meta.get("namespace", ""), meta["name"]


class Objects:
    def __init__(
        self, store: Store, deferred: Deferred, pod_deletion_delay: float, kubelet_deletions: bool = False
    ) -> None:
        self._store = store
        self._deferred = deferred
        self._pod_deletion_delay = pod_deletion_delay
        # kube-apiserver's way: a graceful pod deletion stays until its kubelet deletes with grace 0 (the
        # simulated kubelets' `--finish-deletions`); otherwise the emulator ends it after the delay itself
        self._kubelet_deletions = kubelet_deletions

    # --- reads ----------------------------------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Entry:
        entry = self._store.get(rtype, _namespace_key(rtype, namespace), name)
        if entry is None:
            raise not_found(rtype.plural, rtype.group, name)
        return entry

    def select(
        self, rtype: ResourceType, namespace: str | None, labels: LabelSelector, fields: FieldSelector
    ) -> tuple[int, list[Entry]]:
        """The current version and the matching entries in (namespace, name) order."""
        wanted = (r.value for r in fields.requirements if r.label == "spec.nodeName" and not r.negate)
        node = next(wanted, None)
        if rtype is PODS and node:  # the index, as kube-apiserver's watch cache has it
            rv, entries = self._store.pods_on_node(node)
            entries = [e for e in entries if namespace is None or e.metadata.get("namespace") == namespace]
        else:
            rv, entries = self._store.snapshot(rtype, namespace if rtype.namespaced else None)
        if labels.requirements or fields.requirements:
            entries = [
                e for e in entries if labels.matches(e.metadata.get("labels")) and fields.matches(e.obj)
            ]
        entries.sort(key=_sort_key)
        return rv, entries

    # --- create ---------------------------------------------------------------------------------------------

    def create(self, rtype: ResourceType, namespace: str | None, body: Any) -> Entry:
        obj = self._prepare_create(rtype, namespace, body)
        if obj["metadata"].get("resourceVersion"):
            raise ApiError(500, "resourceVersion should not be set on objects to be created")
        if rtype is PODS:
            obj["spec"] = {
                "schedulerName": "default-scheduler",
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                **(obj.get("spec") or {}),
            }
            obj["status"] = {"phase": "Pending"}
        with self._store.lock:
            return self._insert(rtype, obj)

    def seed(self, objects: Any) -> int:
        """Bulk insert at storage level: status, uid and timestamps are kept as given. All or nothing."""
        if not isinstance(objects, list):
            raise bad_request("expected a list of objects")
        prepared: list[tuple[ResourceType, JsonObj]] = []
        for body in objects:
            if not isinstance(body, dict):
                raise bad_request("every object must be a JSON object")
            rtype = resources.by_kind(str(body.get("apiVersion", "")), str(body.get("kind", "")))
            if rtype is None:
                raise bad_request(f"unsupported apiVersion/kind: {body.get('apiVersion')}/{body.get('kind')}")
            meta = body.get("metadata")
            namespace = (meta.get("namespace") if isinstance(meta, dict) else None) or "default"
            prepared.append((rtype, self._prepare_create(rtype, namespace, body)))
        with self._store.lock:
            seen: set[tuple[str, str, str]] = set()
            for rtype, obj in prepared:
                meta = obj["metadata"]
                if not meta.get("name"):
                    continue
                key = (rtype.key, meta.get("namespace", ""), meta["name"])
                if key in seen or self._store.get(rtype, key[1], key[2]) is not None:
                    raise already_exists(rtype.plural, rtype.group, key[2])
                seen.add(key)
            for rtype, obj in prepared:
                self._insert(rtype, obj)
        return len(prepared)

    def _prepare_create(self, rtype: ResourceType, namespace: str | None, body: Any) -> JsonObj:
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        if body.get("kind", rtype.kind) != rtype.kind or body.get("apiVersion", rtype.api_version) != (
            rtype.api_version
        ):
            raise bad_request(
                f"the kind and API version in the data ({body.get('kind')}, {body.get('apiVersion')}) do not "
                f"match the expected {rtype.kind}, {rtype.api_version}"
            )
        meta = dict(versions.checked_metadata(body))
        if not meta.get("name") and not meta.get("generateName"):
            raise invalid(rtype.kind, "", "metadata.name: Required value: name or generateName is required")
        if meta.get("name"):
            versions.check_name(rtype.kind, str(meta["name"]), label=rtype is NAMESPACES)
        if rtype.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", versions.timestamp())
        obj: JsonObj = {**body, "kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
        if rtype is NAMESPACES:
            meta["labels"] = {
                **(meta.get("labels") or {}),
                "kubernetes.io/metadata.name": meta.get("name", ""),
            }
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj.setdefault("status", {"phase": "Active"})
        return obj

    def _insert(self, rtype: ResourceType, obj: JsonObj) -> Entry:
        """Name, duplicate check, implicit namespace and the write; the caller holds the store lock."""
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        if not meta.get("name"):
            name = meta["generateName"] + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
            while self._store.get(rtype, namespace, name) is not None:
                name = meta["generateName"] + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
            obj = {**obj, "metadata": {**meta, "name": name}}
        name = obj["metadata"]["name"]
        if self._store.get(rtype, namespace, name) is not None:
            raise already_exists(rtype.plural, rtype.group, name)
        if rtype.namespaced:
            self._ensure_namespace(namespace)
        obj["metadata"].pop("resourceVersion", None)
        return self._store.put(rtype, obj, None)

    def _ensure_namespace(self, namespace: str) -> None:
        if self._store.get(NAMESPACES, "", namespace) is None:
            self._store.put(
                NAMESPACES, self._prepare_create(NAMESPACES, None, {"metadata": {"name": namespace}}), None
            )

    def ensure_default_namespaces(self) -> None:
        with self._store.lock:
            for namespace in DEFAULT_NAMESPACES:
                self._ensure_namespace(namespace)

    # --- update ---------------------------------------------------------------------------------------------

    def _update(
        self, rtype: ResourceType, namespace: str | None, name: str, build: Callable[[Entry], JsonObj]
    ) -> Entry:
        """Optimistic read-compute-commit: ``build`` runs outside the lock, again if the object moved."""
        while True:
            current = self.get(rtype, namespace, name)
            candidate = build(current)
            with self._store.lock:
                if self._store.get(rtype, _namespace_key(rtype, namespace), name) is current:
                    return self._store.put(rtype, candidate, current)

    def replace(
        self, rtype: ResourceType, namespace: str | None, name: str, body: Any, subresource: str = ""
    ) -> Entry:
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        if body.get("kind", rtype.kind) != rtype.kind:
            raise bad_request(f"the kind in the data ({body.get('kind')}) does not match {rtype.kind}")
        return self._update(
            rtype, namespace, name, lambda current: versions.updated(rtype, current, body, subresource)
        )

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        patch: Any,
        subresource: str = "",
    ) -> Entry:
        def build(current: Entry) -> JsonObj:
            patched = apply_patch(content_type, current.obj, patch)
            if not isinstance(patched, dict):
                raise bad_request("the patch must produce a JSON object")
            return versions.updated(rtype, current, patched, subresource)

        return self._update(rtype, namespace, name, build)

    def bind(self, namespace: str, name: str, binding: Any) -> Entry:
        """pods/binding: set spec.nodeName once, with PodScheduled=True and the binding's annotations."""
        target = versions.binding_target(name, binding)
        return self._update(
            PODS, namespace, name, lambda current: versions.bound(current, name, binding, target)
        )

    # --- delete ---------------------------------------------------------------------------------------------

    def delete(
        self, rtype: ResourceType, namespace: str | None, name: str, options: DeleteOptions
    ) -> Deletion:
        with self._store.lock:
            current = self.get(rtype, namespace, name)
            meta = current.metadata
            if options.uid is not None and options.uid != meta["uid"]:
                raise conflict(
                    rtype.plural, rtype.group, name, versions.uid_mismatch(options.uid, meta["uid"])
                )
            if options.resource_version is not None and options.resource_version != str(current.rv):
                why = (
                    f"Precondition failed: ResourceVersion in precondition: {options.resource_version}, "
                    f"ResourceVersion in object meta: {current.rv}"
                )
                raise conflict(rtype.plural, rtype.group, name, why)
            grace = self._grace_period(rtype, current, options)
            if grace > 0:
                if meta.get("deletionTimestamp"):
                    was = int(meta.get("deletionGracePeriodSeconds") or 0)
                    if options.grace_period is None or grace >= was:
                        return Deletion(current, False)
                    # only a shorter grace given in the DELETE shortens one in progress (kube-apiserver's
                    # BeforeDelete): the deadline moves to the deletion's start plus the new grace
                    deadline = versions.parse_timestamp(meta["deletionTimestamp"]) - was + grace
                    shortened = {
                        **current.obj,
                        "metadata": {
                            **meta,
                            "deletionTimestamp": versions.timestamp(deadline - time.time()),
                            "deletionGracePeriodSeconds": grace,
                        },
                    }
                    return Deletion(self._store.put(rtype, shortened, current), False)
                terminating = {
                    **current.obj,
                    "metadata": {
                        **meta,
                        "deletionTimestamp": versions.timestamp(grace),
                        "deletionGracePeriodSeconds": grace,
                    },
                }
                entry = self._store.put(rtype, terminating, current)
                if not self._kubelet_deletions:
                    self._deferred.call_later(
                        self._pod_deletion_delay,
                        lambda: self._finish_deletion(meta["namespace"], name, meta["uid"]),
                    )
                return Deletion(entry, False)
            if rtype is PODS and meta.get("deletionGracePeriodSeconds") != 0:
                # kube-apiserver deletes a pod in two writes even at grace 0: deletionTimestamp first
                # (watchers see MODIFIED), then the removal (DELETED, carrying that timestamp).
                marked = {
                    **current.obj,
                    "metadata": {
                        **meta,
                        "deletionTimestamp": meta.get("deletionTimestamp") or versions.timestamp(0),
                        "deletionGracePeriodSeconds": 0,
                    },
                }
                current = self._store.put(rtype, marked, current)
            final = self._store.remove(rtype, current)
            if rtype is NAMESPACES:
                self._remove_namespace_content(name)
            return Deletion(final, True)

    def _grace_period(self, rtype: ResourceType, current: Entry, options: DeleteOptions) -> int:
        """Seconds of graceful deletion; 0 (immediate) for everything but bound, running pods."""
        if rtype is not PODS or (self._pod_deletion_delay <= 0 and not self._kubelet_deletions):
            return 0
        spec = current.obj.get("spec") or {}
        if not spec.get("nodeName") or (current.obj.get("status") or {}).get("phase") in _TERMINAL_PHASES:
            return 0
        if options.grace_period is not None:
            return max(0, options.grace_period)
        return int(spec.get("terminationGracePeriodSeconds", 30))

    def _finish_deletion(self, namespace: str, name: str, uid: str) -> None:
        with self._store.lock:
            current = self._store.get(PODS, namespace, name)
            if (
                current is not None
                and current.metadata["uid"] == uid
                and current.metadata.get("deletionTimestamp")
            ):
                self._store.remove(PODS, current)

    def _remove_namespace_content(self, namespace: str) -> None:
        """Cascade (immediately; a real namespace goes through Terminating first). Caller holds the lock."""
        for rtype in resources.ALL:
            if rtype.namespaced:
                for entry in self._store.bucket(rtype, namespace):
                    self._store.remove(rtype, entry)

    def delete_collection(
        self,
        rtype: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        options: DeleteOptions,
    ) -> list[Entry]:
        _, entries = self.select(rtype, namespace, labels, fields)
        deleted: list[Entry] = []
        for entry in entries:
            meta = entry.metadata
            try:
                deleted.append(self.delete(rtype, meta.get("namespace"), meta["name"], options).entry)
            except ApiError as error:
                if error.code != 404:
                    raise
        return deleted

    def reset(self) -> None:
        self._deferred.cancel_all()
        self._store.clear()
        self.ensure_default_namespaces()
