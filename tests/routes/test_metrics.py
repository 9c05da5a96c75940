"""/metrics of the extender: our metrics and state gauges, then HAMi's gauges streamed from the file the
registration worker renders (app/state/gauges.py) — each family once, in both exposition formats; a
missing or stale file leaves HAMi's gauges out and says so in `hami_scheduler_state_metrics_age_seconds`."""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from app.core.model import DeviceInfo, DeviceUse, NodeDevices
from app.routes.common import CONTEXT_KEY
from app.state import gauges
from app.state.ledger import Entry
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView

OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


@pytest.fixture
def state_dir(client: FlaskClient) -> Path:
    path: Path = client.application.extensions[CONTEXT_KEY].settings.state_dir
    return path


@pytest.fixture
def rendered(state_dir: Path) -> Iterator[Path]:
    device = DeviceInfo("GPU-x", 0, 10, 1000, 100, 'odd "type"', 0, "hami-core", True, "NVIDIA")
    view = UsageView()
    view.load([Entry("u", "ns", "p", "x", "bound", {"GPU-x": DeviceUse(1, 100, 5)})])
    gauges.write(state_dir, Snapshot(1, {"x": NodeRecord(NodeDevices("x", (device,)), 1)}), view)
    path = state_dir / gauges.GAUGES_FILE
    yield path
    path.unlink(missing_ok=True)


def scrape(client: FlaskClient, accept: str = "") -> tuple[str, str, int]:
    """(body, content type, Content-Length); the response is closed, as a WSGI server closes it."""
    with client.get("/metrics", headers={"Accept": accept} if accept else {}) as reply:
        assert reply.status_code == 200
        return reply.get_data(as_text=True), reply.content_type, int(reply.headers["Content-Length"])


def scraped_families(client: FlaskClient) -> dict[str, Metric]:
    return {f.name: f for f in text_string_to_metric_families(scrape(client)[0])}


def family_names(text: str) -> list[str]:
    return [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]


def test_hami_gauges_follow_our_metrics_once_each(client: FlaskClient, rendered: Path) -> None:
    text, content_type, length = scrape(client)
    assert content_type.startswith("text/plain; version=0.0.4") and length == len(text.encode())
    names = family_names(text)
    assert [n for n, count in Counter(names).items() if count > 1] == []
    assert set(names) >= gauges.NAMES and "hami_scheduler_leader" in names
    assert text.endswith(rendered.read_text(encoding="utf-8"))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (sample,) = families["hami_gpu_memory_limit_bytes"].samples
    assert sample.value == 1000 * 2**20 and sample.labels["device_type"] == 'odd "type"'
    (age,) = families["hami_scheduler_state_metrics_age_seconds"].samples
    assert 0 <= age.value < 60


def test_openmetrics_ends_after_the_file(client: FlaskClient, rendered: Path) -> None:
    text, content_type, length = scrape(client, OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text") and length == len(text.encode())
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    names = {f.name for f in openmetrics_families(text)}  # the strict parser: one family each, EOF last
    assert names >= gauges.NAMES and "hami_scheduler_synced" in names


def test_a_stale_or_missing_file_is_left_out_and_said_so(client: FlaskClient, rendered: Path) -> None:
    old = time.time() - 3600
    os.utime(rendered, (old, old))
    families = {
        f.name: f for f in text_string_to_metric_families(client.get("/metrics").get_data(as_text=True))
    }
    assert not gauges.NAMES & families.keys()
    assert families["hami_scheduler_state_metrics_age_seconds"].samples[0].value >= 3600 - 5
    rendered.unlink()
    families = {
        f.name: f for f in text_string_to_metric_families(client.get("/metrics").get_data(as_text=True))
    }
    assert not gauges.NAMES & families.keys()
    assert math.isnan(families["hami_scheduler_state_metrics_age_seconds"].samples[0].value)


def test_the_file_is_closed_after_the_scrape(client: FlaskClient, rendered: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        client.get("/metrics").close()
        client.head("/metrics").close()
    assert len(os.listdir("/proc/self/fd")) <= before
