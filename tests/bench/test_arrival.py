"""The latency mode of the real benchmark (`--arrival-rate R`, bench/arrival.py): bad rates are one line and
exit 2 like the other options; the driver creates the pods on its schedule (never before a pod is due),
stops at the first failed creation and reports creation to bind; the headline of a latency run judges
the floor ratios, not the throughput, and carries the API requests per pod of every run."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bench import arrival, real_summary
from bench.__main__ import parse, real_options
from sim.kit.kube import KubeError

Obj = dict[str, Any]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--arrival-rate", "0"], "must be a positive number of pods per second, not '0'", id="zero"
        ),
        pytest.param(
            ["--arrival-rate=-2"], "must be a positive number of pods per second, not '-2'", id="negative"
        ),
        pytest.param(["--arrival-rate", "fast"], "not 'fast'", id="not-a-number"),
        pytest.param(["--arrival-rate", "nan"], "not 'nan'", id="nan"),
        pytest.param(["--arrival-rate", "inf"], "not 'inf'", id="infinite"),
        pytest.param(
            ["--arrival-rate", "0.01", "--pods", "100"],
            "100 pods at 0.01/s arrive over 10000s, more than 3600s",
            id="unbounded-in-time",
        ),
    ],
)
def test_bad_arrival_rates_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(["--control-plane", "real", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("python -m bench: error: argument --arrival-rate: ") and err[-1].endswith(
        message
    )


def test_arrival_rate_needs_the_real_control_plane(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(["--arrival-rate", "5"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().endswith("argument --arrival-rate: needs --control-plane real")


def test_a_good_rate_reaches_the_run_options_and_none_means_saturated() -> None:
    assert real_options(parse(["--control-plane", "real", "--arrival-rate", "2.5"])).arrival_rate == 2.5
    assert real_options(parse(["--control-plane", "real"])).arrival_rate == 0.0


def _pods(count: int) -> list[Obj]:
    return [{"metadata": {"name": f"p{i}"}} for i in range(count)]


def test_the_whole_schedule_runs_and_pod_i_is_sent_no_earlier_than_i_over_r() -> None:
    sent: dict[str, float] = {}
    rate, pods = 40.0, _pods(8)
    began = time.perf_counter()
    arrivals = arrival.Arrivals(
        lambda pod: sent.setdefault(pod["metadata"]["name"], time.perf_counter()), pods, rate
    )
    arrivals.start()
    deadline = time.monotonic() + 30.0
    while not arrivals.done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert arrivals.done() and arrivals.created() == 8
    for index in range(8):
        assert sent[f"p{index}"] - began >= index / rate - 0.001, index
    report = arrivals.report({f"default/p{i}": sent[f"p{i}"] + 0.5 for i in range(8)})
    assert report["rate"] == rate and report["created"] == 8 and report["lag_ms"]["n"] == 8
    assert report["create_to_bind_ms"]["n"] == 8
    assert 499.0 <= report["create_to_bind_ms"]["p50_ms"] <= 501.0  # bound 0.5 s after the creation was sent


def test_the_first_failed_creation_stops_the_schedule_and_is_raised() -> None:
    calls: list[str] = []

    def create(pod: Obj) -> None:
        calls.append(pod["metadata"]["name"])
        if pod["metadata"]["name"] == "p1":
            raise KubeError(403, "Forbidden", "no")

    arrivals = arrival.Arrivals(create, _pods(50), 20.0).start()
    deadline = time.monotonic() + 30.0
    while not arrivals.done() and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(KubeError, match="Forbidden"):
        arrivals.check()
    assert "p1" in calls and len(calls) < 50  # 50 pods at 20/s would take 2.5 s: stopped well before


def _phase(rate: float, algorithm_p50: float) -> Obj:
    timing = {"p50_ms": algorithm_p50, "mean_ms": algorithm_p50}
    return {
        "pods_per_second": rate,
        "kube_scheduler": {"algorithm": timing, "attempt_scheduled": timing},
        "server": {"/filter": {"p50_ms": 4.0}, "/bench/noop": {"p50_ms": 2.0}},
        "cpu_ms_per_pod": {},
        "api_requests": {"per_pod": {"POST pods/binding": 1.0, "PATCH pods": 2.0}, "per_pod_total": 3.0},
        "arrivals": {"create_to_bind_ms": {"p50_ms": 10.0 * algorithm_p50}},
        "load_average": {"start": [0.0], "end": [0.0]},
        "correctness": {"ok": True},
    }


@pytest.mark.parametrize(
    ("arrival_rate", "mode", "targets"),
    [
        pytest.param(
            None,
            "saturated",
            {"extender_throughput_ratio", "filter_noop_ratio", "ks_filter_noop_ratio"},
            id="saturated-judges-throughput",
        ),
        pytest.param(
            5.0, "latency", {"filter_noop_ratio", "ks_filter_noop_ratio"}, id="latency-pods-s-is-the-rate"
        ),
    ],
)
def test_headline_modes(arrival_rate: float | None, mode: str, targets: set[str]) -> None:
    phases = {"baseline": _phase(5.0, 1.0), "noop": _phase(5.0, 2.0), "extender": _phase(5.0, 6.0)}
    report = real_summary.headline({"nodes": 3, "arrival_rate": arrival_rate}, phases)
    assert report["mode"] == mode and set(report["targets"]) == targets
    assert report["ks_algorithm_p50_ms"] == {"baseline": 1.0, "noop": 2.0, "extender": 6.0}
    assert report["ks_filter_noop_ratio"] == 3.0
    assert report["api_requests_per_pod"]["extender"] == {"POST pods/binding": 1.0, "PATCH pods": 2.0}
    assert report["api_requests_per_pod_total"] == {"baseline": 3.0, "noop": 3.0, "extender": 3.0}
    if arrival_rate:
        assert report["create_to_bind_p50_ms"] == {"baseline": 10.0, "noop": 20.0, "extender": 60.0}
    else:
        assert "create_to_bind_p50_ms" not in report
