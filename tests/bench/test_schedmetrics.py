"""The benchmark's reading of Prometheus histograms and of the per-request timing lines: the quantiles are
Prometheus' histogram_quantile (linear within the bucket), over the series matching the labels asked for,
as after - before deltas."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import schedmetrics, summary

EXPOSITION = """# HELP scheduler_scheduling_attempt_duration_seconds x
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="0.001"} 0
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="0.002"} 4
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="0.004"} 8
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="+Inf"} 10
scheduler_scheduling_attempt_duration_seconds_sum{profile="p",result="scheduled"} 0.05
scheduler_scheduling_attempt_duration_seconds_count{profile="p",result="scheduled"} 10
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="error",le="0.001"} 5
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="error",le="0.002"} 5
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="error",le="0.004"} 5
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="error",le="+Inf"} 5
scheduler_scheduling_attempt_duration_seconds_sum{profile="p",result="error"} 0.001
scheduler_scheduling_attempt_duration_seconds_count{profile="p",result="error"} 5
# HELP scheduler_schedule_attempts_total x
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="p",result="scheduled"} 10
scheduler_schedule_attempts_total{profile="p",result="error"} 5
"""
NAME = "scheduler_scheduling_attempt_duration_seconds"


def scrape() -> summary.Scrape:
    return summary.parse_metrics(EXPOSITION, schedmetrics.KUBE_SCHEDULER)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param(
            {"result": "scheduled"},
            {"n": 10, "mean_ms": 5.0, "p50_ms": 2.5, "p90_ms": 4.0, "p99_ms": 4.0},
            id="one-series-median-a-quarter-into-its-bucket-tail-at-the-largest-finite-bound",
        ),
        pytest.param(
            {},
            {"n": 15, "mean_ms": 3.4, "p50_ms": 1.625, "p90_ms": 4.0, "p99_ms": 4.0},
            id="all-series-summed",
        ),
        pytest.param(
            {"result": "nothing"},
            {"n": 0, "mean_ms": 0.0, "p50_ms": 0.0, "p90_ms": 0.0, "p99_ms": 0.0},
            id="no-matching-series",
        ),
    ],
)
def test_histogram_quantiles(labels: dict[str, str], expected: dict[str, float]) -> None:
    assert schedmetrics.histogram(scrape(), NAME, **labels) == expected


def test_histogram_is_the_delta_over_a_window() -> None:
    after = scrape()
    before = {key: value / 2 for key, value in after.items()}
    result = schedmetrics.histogram(after, NAME, before, result="scheduled")
    assert result["n"] == 5 and result["mean_ms"] == 5.0 and result["p50_ms"] == 2.5


def test_kube_scheduler_view_counts_attempts_by_result() -> None:
    view = schedmetrics.kube_scheduler_view(scrape())
    assert view["attempts"] == {"scheduled": 10, "error": 5}
    assert view["attempt_scheduled"]["n"] == 10
    assert view["algorithm"]["n"] == 0 and view["extension_points"] == {}


def test_server_timings_keep_the_window_and_the_known_paths(tmp_path: Path) -> None:
    (tmp_path / "1.tsv").write_text(
        "100.0\t/filter\t2.0\n150.0\t/filter\t4.0\n150.5\t/bench/noop\t1.0\n200.0\t/filter\t8.0\n"
    )
    (tmp_path / "2.tsv").write_text("160.0\t/healthz\t0.1\n160.0\t/bind\t3.0\nnot a line\n")
    timings = schedmetrics.server_timings(tmp_path, 140.0, 190.0)
    assert set(timings) == {"/filter", "/bench/noop", "/bind"}
    assert timings["/filter"]["n"] == 1 and timings["/filter"]["p50_ms"] == 4.0
    assert timings["/bind"]["max_ms"] == 3.0
    assert schedmetrics.server_timings(tmp_path / "absent", 0.0, 1e12) == {}
