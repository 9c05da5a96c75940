"""Registration passes: what enters the snapshot, change detection and per-node revisions."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from worker_builders import HANDSHAKE, REGISTER, VENDORS, cpu_node, device, gpu_node, register

from app.core import health
from app.core.model import NodeDevices
from app.state import snapshot
from app.state.snapshot import NodeRecord, Snapshot
from workers import shapes
from workers.metrics import WorkerMetrics
from workers.registration import Registrar, next_snapshot

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SHAPE = shapes.node_shape(VENDORS)


def nodes(*raw: dict[str, Any]) -> list[dict[str, Any]]:
    return [SHAPE(n) for n in raw]


def stamped(node: dict[str, Any], seconds_ago: float = 0) -> dict[str, Any]:
    node["metadata"]["annotations"][HANDSHAKE] = health.handshake_value(NOW - timedelta(seconds=seconds_ago))
    return node


@pytest.fixture
def registrar(tmp_path: Path) -> Registrar:
    return Registrar(VENDORS, tmp_path, WorkerMetrics())


def record(name: str, *uuids: str, zone: str = "") -> NodeRecord:
    devices = tuple(dataclasses.replace(_info(u), index=i) for i, u in enumerate(uuids))
    return NodeRecord(NodeDevices(name, devices), 0, zone)


def _info(uuid: str) -> Any:
    from app.core.codec import decode_register_json

    return decode_register_json(json.dumps([device(uuid)]), "NVIDIA")[0]


# -- next_snapshot: change detection and revisions ------------------------------------------------------


def test_first_publish_numbers_everything_generation_one() -> None:
    published = next_snapshot(None, {"a": record("a", "G1"), "b": record("b", "G2")}, {}, {}, 1.0)
    assert published is not None
    assert published.generation == 1
    assert {n: r.rev for n, r in published.nodes.items()} == {"a": 1, "b": 1}


def _base() -> Snapshot:
    first = next_snapshot(None, {"a": record("a", "G1"), "b": record("b", "G2")}, {"c": "corrupt"}, {}, 1.0)
    assert first is not None
    return first


CHANGES = [
    pytest.param(
        {"a": record("a", "G1"), "b": record("b", "G2")}, {"c": "corrupt"}, {}, None, id="nothing: no write"
    ),
    pytest.param(
        {"a": record("a", "G1"), "b": record("b", "G2", "G3")},
        {"c": "corrupt"},
        {},
        {"a": 1, "b": 2},
        id="b's devices",
    ),
    pytest.param(
        {"a": record("a", "G1", zone="z"), "b": record("b", "G2")},
        {"c": "corrupt"},
        {},
        {"a": 2, "b": 1},
        id="a's zone",
    ),
    pytest.param({"a": record("a", "G1")}, {"c": "corrupt"}, {}, {"a": 1}, id="b left"),
    pytest.param(
        {"a": record("a", "G1"), "b": record("b", "G2"), "d": record("d", "G4")},
        {"c": "corrupt"},
        {},
        {"a": 1, "b": 1, "d": 2},
        id="d joined",
    ),
    pytest.param({"a": record("a", "G1"), "b": record("b", "G2")}, {}, {}, {"a": 1, "b": 1}, id="c repaired"),
    pytest.param(
        {"a": record("a", "G1"), "b": record("b", "G2")},
        {"c": "corrupt"},
        {"team": {"nvidia.com/gpumem": 100}},
        {"a": 1, "b": 1},
        id="quota limit",
    ),
]


@pytest.mark.parametrize(("current", "broken", "quotas", "revs"), CHANGES)
def test_publish_only_on_change_and_bump_only_changed_nodes(
    current: dict[str, NodeRecord],
    broken: dict[str, str],
    quotas: dict[str, dict[str, int]],
    revs: dict[str, int] | None,
) -> None:
    published = next_snapshot(_base(), current, broken, quotas, 2.0)
    if revs is None:
        assert published is None
        return
    assert published is not None
    assert published.generation == 2
    assert {n: r.rev for n, r in published.nodes.items()} == revs


def test_a_restarted_worker_continues_from_the_snapshot_on_disk(tmp_path: Path) -> None:
    base = _base()
    snapshot.write(tmp_path, base)
    restarted = Registrar(VENDORS, tmp_path, WorkerMetrics())
    assert restarted.last is not None and restarted.last.generation == 1
    again = next_snapshot(
        restarted.last, {"a": record("a", "G1"), "b": record("b", "G9")}, {"c": "corrupt"}, {}, 3.0
    )
    assert again is not None and again.generation == 2
    assert again.nodes["a"].rev == 1 and again.nodes["b"].rev == 2


def test_unreadable_snapshot_on_disk_starts_from_scratch(tmp_path: Path) -> None:
    (tmp_path / snapshot.SNAPSHOT_FILE).write_text("{not json")
    assert Registrar(VENDORS, tmp_path, WorkerMetrics()).last is None


# -- a pass over nodes ----------------------------------------------------------------------------------


def test_pass_registers_gpu_nodes_and_ignores_cpu_nodes(registrar: Registrar, tmp_path: Path) -> None:
    result = registrar.run(
        nodes(gpu_node("g1", labels={shapes.ZONE_LABEL: "z1", shapes.REGION_LABEL: "r1"}), cpu_node("c1")),
        [],
        NOW,
    )
    assert result.published is not None
    published = snapshot.read(tmp_path)
    assert sorted(published.nodes) == ["g1"]
    assert (published.nodes["g1"].zone, published.nodes["g1"].region) == ("z1", "r1")
    assert [d.id for d in published.nodes["g1"].devices.devices] == ["GPU-g1-0", "GPU-g1-1"]
    assert published.broken == {}
    assert [s.node for s in result.stamps] == ["g1"], "CPU nodes are not stamped (quirk #20)"
    assert result.stamps[0].annotation == HANDSHAKE and result.stamps[0].value == health.handshake_value(NOW)


EXCLUDED = [
    pytest.param(
        gpu_node("x", register_value="[{"), "hami.io/node-nvidia-register: ", "corrupt", id="bad JSON"
    ),
    pytest.param(gpu_node("x", register_value="[]"), "no gpu found on node", "corrupt", id="empty list"),
    pytest.param(
        gpu_node("x", register_value=json.dumps([device("G"), device("G", 1)])),
        "duplicate device id G",
        "corrupt",
        id="duplicate uuid",
    ),
    pytest.param(
        gpu_node("x", annotations={"hami.io/node-nvidia-score": "{"}),
        "hami.io/node-nvidia-register: ",
        "corrupt",
        id="bad pair scores",
    ),
    pytest.param(
        stamped(gpu_node("x", allocatable=0), 120), "unhealthy: NVIDIA: handshake", "unhealthy", id="expired"
    ),
]


@pytest.mark.parametrize(("bad", "reason", "kind"), EXCLUDED)
def test_unusable_node_is_left_out_with_a_reason_and_never_poisons_others(
    registrar: Registrar, tmp_path: Path, bad: dict[str, Any], reason: str, kind: str
) -> None:
    result = registrar.run(nodes(gpu_node("good"), bad), [], NOW)
    published = snapshot.read(tmp_path)
    assert sorted(published.nodes) == ["good"]
    assert published.broken["x"].startswith(reason) or reason in published.broken["x"]
    assert (result.corrupt, result.unhealthy) == ((1, 0) if kind == "corrupt" else (0, 1))


def test_device_with_health_false_stays_in(registrar: Registrar, tmp_path: Path) -> None:
    registrar.run(nodes(gpu_node("g", register_value=register("g", 2, health=False))), [], NOW)
    devices = snapshot.read(tmp_path).nodes["g"].devices.devices
    assert [d.health for d in devices] == [False, False]


def test_cordon_annotation_is_carried(registrar: Registrar, tmp_path: Path) -> None:
    registrar.run(nodes(gpu_node("g", annotations={"hami.io/device-cordon": "GPU-g-1"})), [], NOW)
    assert snapshot.read(tmp_path).nodes["g"].devices.cordoned == frozenset({"GPU-g-1"})


def test_deleted_register_annotation_drops_the_node(registrar: Registrar, tmp_path: Path) -> None:
    """HAMi keeps the stale devices (quirks #23/#24); we drop them at the next pass."""
    registrar.run(nodes(gpu_node("g"), gpu_node("h")), [], NOW)
    gone = gpu_node("g")
    del gone["metadata"]["annotations"][REGISTER]
    result = registrar.run(nodes(gone, gpu_node("h")), [], NOW)
    assert result.published is not None and sorted(result.published.nodes) == ["h"]
    assert result.published.broken == {}


def test_unchanged_pass_writes_nothing_and_reuses_decoded_devices(
    registrar: Registrar, tmp_path: Path
) -> None:
    first = registrar.run(nodes(gpu_node("g")), [], NOW)
    stamp = (tmp_path / snapshot.SNAPSHOT_FILE).stat().st_mtime_ns
    second = registrar.run(nodes(gpu_node("g")), [], NOW + timedelta(seconds=15))
    assert first.published is not None and second.published is None
    assert (tmp_path / snapshot.SNAPSHOT_FILE).stat().st_mtime_ns == stamp
    assert registrar.last is first.published


def test_a_handshake_change_reuses_the_decoded_devices(
    registrar: Registrar, monkeypatch: pytest.MonkeyPatch
) -> None:
    """decode_node never reads the handshake: a new stamp or device-plugin report must not re-decode."""
    from workers import registration

    decoded: list[str] = []
    real = registration.decode_node

    def counting(node: Any, vendors: Any) -> NodeDevices:
        decoded.append(node["metadata"]["name"])
        return real(node, vendors)

    monkeypatch.setattr(registration, "decode_node", counting)
    first = registrar.run(nodes(stamped(gpu_node("g"), 30)), [], NOW)
    second = registrar.run(nodes(stamped(gpu_node("g"), 0)), [], NOW + timedelta(seconds=1))
    assert decoded == ["g"]
    assert first.published is not None and second.published is None
    changed = stamped(gpu_node("g", register_value=register("other")), 0)
    third = registrar.run(nodes(changed), [], NOW + timedelta(seconds=2))
    assert decoded == ["g", "g"] and third.published is not None


def test_allocatable_drop_excludes_then_readmits(registrar: Registrar) -> None:
    """NVIDIA bookkeeping across passes: 4 -> 0 is unhealthy at once even with a fresh stamp."""
    node = stamped(gpu_node("g", allocatable=4), 10)
    assert registrar.run(nodes(node), [], NOW).registered == 1
    dropped = stamped(gpu_node("g", allocatable=0), 10)
    result = registrar.run(nodes(dropped), [], NOW)
    assert (result.registered, result.unhealthy) == (0, 1)
    assert result.published is not None and "dropped to 0" in result.published.broken["g"]
    assert registrar.run(nodes(dropped), [], NOW).registered == 1, "then the fresh stamp counts again"


def test_quota_limits_are_published(registrar: Registrar) -> None:
    quota = {
        "metadata": {"name": "q", "namespace": "team"},
        "spec": {"hard": {"limits.nvidia.com/gpumem": "2000", "limits.cpu": "4"}},
    }
    result = registrar.run(nodes(gpu_node("g")), [shapes.quota_shape(VENDORS)(quota)], NOW)
    assert result.published is not None
    assert result.published.quota_limits == {"team": {"nvidia.com/gpumem": 2000}}


def test_metrics_follow_the_pass(registrar: Registrar) -> None:
    registrar.node_changed("g", NOW.timestamp() - 30)
    registrar.node_changed("x", NOW.timestamp() - 5)
    registrar.run(nodes(gpu_node("g"), gpu_node("x", register_value="{")), [], NOW)
    registry = registrar._metrics.registry
    assert registry.get_sample_value("hami_worker_nodes_registered") == 1
    assert registry.get_sample_value("hami_worker_nodes_corrupt") == 1
    assert registry.get_sample_value("hami_worker_node_last_report_age_seconds", {"node": "g"}) == 30
    registrar.node_changed("x", None)
    registrar.run(nodes(gpu_node("g")), [], NOW)
    assert registry.get_sample_value("hami_worker_node_last_report_age_seconds", {"node": "x"}) is None
