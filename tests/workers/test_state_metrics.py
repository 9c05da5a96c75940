"""The worker's renderer of HAMi's gauges (workers/statemetrics.py) and their `/metrics/hami` endpoint:
render on a change of the snapshot or the ledger, only touch the file otherwise, render again when the
file went; the endpoint streams a fresh file and answers 503 without one; HAMI_STATE_METRICS_INTERVAL."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import BinaryIO

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.core.model import DeviceInfo, DeviceUse, NodeDevices
from app.state import gauges
from app.state.ledger import Entry, Ledger
from app.state.snapshot import NodeRecord, Snapshot
from config.envvars import SettingsError
from config.settings import load_settings
from workers.metrics import MetricsServer, WorkerMetrics
from workers.statemetrics import StateMetrics

DEVICE = DeviceInfo("GPU-a", 0, 10, 32768, 100, "NVIDIA V100", 0, "hami-core", True, "NVIDIA")


def snapshot(generation: int) -> Snapshot:
    return Snapshot(generation, {"a": NodeRecord(NodeDevices("a", (DEVICE,)), generation)})


def allocated(path: Path) -> dict[str, float]:
    """pod -> vGPU memory in MiB, as the file says."""
    text = path.read_text(encoding="utf-8")
    return {
        s.labels["pod"]: s.value / 2**20
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "hami_vgpu_memory_allocated_bytes"
    }


def test_renders_on_changes_and_touches_otherwise(tmp_path: Path) -> None:
    current: list[Snapshot | None] = [None]
    metrics = WorkerMetrics()
    renderer = StateMetrics(tmp_path, 10.0, lambda: current[0], metrics.state_metrics_seconds)
    ledger = Ledger(tmp_path)
    path = tmp_path / gauges.GAUGES_FILE
    try:
        assert renderer.step() is True  # first: no snapshot yet, an empty ledger
        assert allocated(path) == {}
        os.utime(path, (time.time() - 30, time.time() - 30))
        assert renderer.step() is False  # nothing changed: touched, so readers see it is maintained
        assert gauges.age(tmp_path, time.time()) < 5

        ledger.upsert([Entry("u1", "ns", "p1", "a", "bound", {"GPU-a": DeviceUse(1, 1000, 10)})])
        assert renderer.step() is True
        assert allocated(path) == {"p1": 1000}

        current[0] = snapshot(1)
        assert renderer.step() is True
        assert "hami_gpu_memory_limit_bytes{" in path.read_text(encoding="utf-8")
        assert renderer.step() is False

        path.unlink()
        assert renderer.step() is True  # the file went: rendered again, not touched
        assert path.exists()
        assert metrics.registry.get_sample_value("hami_worker_state_metrics_render_seconds_count") == 4
    finally:
        renderer.stop()
        ledger.close()


def test_the_thread_renders_at_once_and_stops(tmp_path: Path) -> None:
    renderer = StateMetrics(tmp_path, 30.0, lambda: snapshot(1), WorkerMetrics().state_metrics_seconds)
    renderer.start()
    renderer.start()  # the work loop calls it after every step: only the first starts the thread
    deadline = time.monotonic() + 10
    while not (tmp_path / gauges.GAUGES_FILE).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    renderer.stop()
    assert (tmp_path / gauges.GAUGES_FILE).exists()
    assert time.monotonic() - started < 5  # stop does not wait for the next interval


def _get(url: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read(), response.headers["Content-Type"]
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read(), error.headers["Content-Type"]


def test_metrics_hami_streams_the_fresh_file(tmp_path: Path) -> None:
    fresh = [True]

    def open_file() -> BinaryIO | None:
        return gauges.open_fresh(tmp_path, time.time(), 60.0 if fresh[0] else -1.0)

    server = MetricsServer("127.0.0.1:0", WorkerMetrics(), lambda: True, open_file)
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics/hami"
        assert _get(url)[0] == 503  # no file yet
        ledger = Ledger(tmp_path)
        try:
            ledger.upsert([Entry("u1", "ns", "p1", "a", "bound", {"GPU-a": DeviceUse(1, 1000, 10)})])
            renderer = StateMetrics(
                tmp_path, 10.0, lambda: snapshot(1), WorkerMetrics().state_metrics_seconds
            )
            renderer.step()
            renderer.stop()
        finally:
            ledger.close()
        status, body, content_type = _get(url)
        assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
        assert body == (tmp_path / gauges.GAUGES_FILE).read_bytes()
        assert "hami_worker" not in body.decode(), "only HAMi's gauges: the worker's own stay on /metrics"
        fresh[0] = False
        assert _get(url)[0] == 503  # stale
        status, body, _ = _get(f"http://127.0.0.1:{server.port}/metrics")
        assert status == 200 and b"hami_gpu_memory_limit_bytes" not in body  # never twice on one port
    finally:
        server.stop()


def test_the_interval_setting() -> None:
    assert load_settings({}).state_metrics_interval == 10.0
    assert load_settings({"HAMI_STATE_METRICS_INTERVAL": "1m"}).state_metrics_interval == 60.0
    for bad in ("500ms", "0s", "soon"):
        with pytest.raises(SettingsError, match="HAMI_STATE_METRICS_INTERVAL"):
            load_settings({"HAMI_STATE_METRICS_INTERVAL": bad})
