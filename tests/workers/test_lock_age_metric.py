"""`hami_worker_node_lock_age_seconds{node,lock}` (workers/metrics.py LockAges): one sample per held lock, the
seconds since the lock's own timestamp; unlocked nodes have none; an unparsable value is as old as the
epoch (the lock rules treat it as expired, so the alert on old locks fires for it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from workers.metrics import LockAges

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC).timestamp()


def node(name: str, lock: str | None) -> dict[str, Any]:
    annotations = {"hami.io/mutex.lock": lock} if lock is not None else {}
    return {"metadata": {"name": name, "annotations": annotations}}


def test_one_sample_per_locked_node() -> None:
    nodes = [
        node("held", "2026-03-01T11:59:18Z,team,train"),
        node("free", None),
        node("legacy", "2026-03-01T11:00:00Z"),
        node("garbage", "not a lock"),
    ]
    registry = CollectorRegistry()
    registry.register(LockAges(lambda: nodes, lambda: NOW))
    (family,) = text_string_to_metric_families(generate_latest(registry).decode())
    assert family.name == "hami_worker_node_lock_age_seconds" and family.type == "gauge"
    ages = {s.labels["node"]: s.value for s in family.samples}
    assert ages == {"held": 42.0, "legacy": 3600.0, "garbage": NOW}


def test_every_lock_key_has_its_own_sample() -> None:
    """A vendor's own lock (Cambricon's `cambricon.com/dsmlu.lock`, a bare time) beside HAMi's shared one."""
    nodes = [
        {
            "metadata": {
                "name": "mlu",
                "annotations": {
                    "hami.io/mutex.lock": "2026-03-01T11:59:18Z,team,train",
                    "cambricon.com/dsmlu.lock": "2026-03-01T11:59:00Z",
                },
            }
        }
    ]
    registry = CollectorRegistry()
    registry.register(
        LockAges(lambda: nodes, lambda: NOW, ["cambricon.com/dsmlu.lock", "hami.io/mutex.lock"])
    )
    (family,) = text_string_to_metric_families(generate_latest(registry).decode())
    ages = {(s.labels["node"], s.labels["lock"]): s.value for s in family.samples}
    assert ages == {("mlu", "hami.io/mutex.lock"): 42.0, ("mlu", "cambricon.com/dsmlu.lock"): 60.0}
