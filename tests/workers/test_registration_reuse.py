"""A pass reuses the view and the decode of a node object it saw in the last pass (issue 20): the same
object gives the same pass as a fresh copy of it, and a changed node is looked at again."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from worker_builders import HANDSHAKE, VENDORS, gpu_node, register

from app.core import health
from app.core.model import NodeDevices
from app.core.vendor import NodeView
from workers import registration, shapes
from workers.metrics import WorkerMetrics
from workers.registration import Pass, Registrar

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SHAPE = shapes.node_shape(VENDORS)
NAMES = ("a", "b", "c")


def node(
    name: str, *, stamp_age: int = 0, gpus: int = 2, allocatable: int = 2, zone: str = "z1"
) -> dict[str, Any]:
    raw = gpu_node(
        name,
        register_value=register(name, gpus),
        allocatable=allocatable,
        labels={shapes.ZONE_LABEL: zone},
    )
    raw["metadata"]["annotations"][HANDSHAKE] = health.handshake_value(NOW - timedelta(seconds=stamp_age))
    return SHAPE(raw)


def outcome(result: Pass) -> tuple[object, ...]:
    published = result.published
    snapshot = (
        None
        if published is None
        else (published.generation, dict(published.nodes), dict(published.broken), published.quota_limits)
    )
    return (snapshot, result.stamps, result.registered, result.unhealthy, result.corrupt)


def test_an_unchanged_node_object_is_neither_viewed_nor_decoded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    viewed: list[str] = []
    decoded: list[str] = []
    real_view, real_decode = registration.node_view, registration.decode_node

    def counting_view(obj: Any) -> NodeView:
        viewed.append(obj["metadata"]["name"])
        return real_view(obj)

    def counting_decode(obj: Any, vendors: Any) -> NodeDevices:
        decoded.append(obj["metadata"]["name"])
        return real_decode(obj, vendors)

    monkeypatch.setattr(registration, "node_view", counting_view)
    monkeypatch.setattr(registration, "decode_node", counting_decode)
    registrar = Registrar(VENDORS, tmp_path, WorkerMetrics())
    a, b = node("a"), node("b")
    registrar.run([a, b], [], NOW)
    assert (viewed, decoded) == (["a", "b"], ["a", "b"])
    registrar.run([a, b], [], NOW + timedelta(seconds=15))
    assert (viewed, decoded) == (["a", "b"], ["a", "b"]), "the same objects: neither viewed nor decoded"
    stamped_again = node("b", stamp_age=0)  # a new object, only its handshake differs: viewed, not decoded
    registrar.run([a, stamped_again], [], NOW + timedelta(seconds=16))
    assert (viewed, decoded) == (["a", "b", "b"], ["a", "b"])
    regrown = node("b", gpus=3, allocatable=3)
    result = registrar.run([a, regrown], [], NOW + timedelta(seconds=17))
    assert (viewed, decoded) == (["a", "b", "b", "b"], ["a", "b", "b"])
    assert result.published is not None and len(result.published.nodes["b"].devices.devices) == 3


# one step: per node, keep the object, replace it with a new one (maybe differing), or drop it
CHANGE = st.sampled_from(["keep", "copy", "stamp", "stale", "gpus", "zone", "allocatable0", "drop"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(CHANGE, CHANGE, CHANGE), min_size=1, max_size=8))
def test_kept_objects_pass_as_fresh_copies_do(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str, str]]
) -> None:
    """Two registrars over the same passes: one is handed the informer's objects (kept ones again), the
    other a deep copy of every node every pass. Every pass gives the same result."""
    kept = Registrar(VENDORS, tmp_path_factory.mktemp("kept"), WorkerMetrics())
    fresh = Registrar(VENDORS, tmp_path_factory.mktemp("fresh"), WorkerMetrics())
    current = {name: node(name) for name in NAMES}
    moment = NOW
    for number, changes in enumerate(steps):
        moment = NOW + timedelta(seconds=15 * number)
        for name, change in zip(NAMES, changes, strict=True):
            built = {
                "copy": lambda n=name: copy.deepcopy(current.get(n) or node(n)),
                "stamp": lambda n=name: node(n, stamp_age=0),
                "stale": lambda n=name: node(n, stamp_age=600),
                "gpus": lambda n=name: node(n, gpus=3, allocatable=3),
                "zone": lambda n=name: node(n, zone="z2"),
                "allocatable0": lambda n=name: node(n, allocatable=0),
            }
            if change == "drop":
                current.pop(name, None)
            elif change == "keep":
                current.setdefault(name, node(name))
            else:
                current[name] = built[change]()
        objects = list(current.values())
        assert outcome(kept.run(objects, [], moment)) == outcome(
            fresh.run(copy.deepcopy(objects), [], moment)
        ), f"pass {number}"
