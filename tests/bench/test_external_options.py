"""`python -m bench` options for an outside extender (bench/real_external.py): bad combinations are one
line and exit 2, a good one becomes the harness's ExternalExtender; the headline of a run without our
no-op floor has the throughput ratio and no floor figures."""

from __future__ import annotations

import pytest

from bench.__main__ import external, parse
from bench.real_summary import headline
from sim.cluster.spec import ExternalExtender

URL = "https://127.0.0.1:9443"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--webhook-url", f"{URL}/webhook"], "--webhook-url: needs --extender-url", id="webhook-alone"
        ),
        pytest.param(
            ["--external-start", "true"], "--external-start: needs --extender-url", id="start-alone"
        ),
        pytest.param(["--extender-url", URL], "--extender-url: needs --control-plane real", id="emulator"),
        pytest.param(
            ["--control-plane", "real", "--extender-url", URL, "--webhook-ca", "ca.crt"],
            "--webhook-ca: needs --webhook-url",
            id="ca-without-webhook",
        ),
    ],
)
def test_bad_outside_options_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_outside_options_make_the_harness_external_extender() -> None:
    args = parse(
        [
            "--control-plane", "real", "--extender-url", URL, "--extender-ca", "ca.crt",
            "--webhook-url", f"{URL}/webhook", "--webhook-ca", "hook.crt", "--scheduler-name", "hami",
        ]
    )  # fmt: skip
    assert external(args) == ExternalExtender(URL, "ca.crt", f"{URL}/webhook", "hook.crt", "hami")
    assert external(parse(["--control-plane", "real"])) is None


def _phase(rate: float) -> dict[str, object]:
    timing = {"p50_ms": 1.0, "mean_ms": 1.0}
    return {
        "pods_per_second": rate,
        "kube_scheduler": {"algorithm": timing, "attempt_scheduled": timing},
        "server": {},
        "cpu_ms_per_pod": {},
        "api_requests": {"per_pod": {"POST pods/binding": 1.0}, "per_pod_total": 1.0},
        "load_average": {"start": [0.0], "end": [0.0]},
        "correctness": {"ok": True},
    }


def test_headline_without_the_noop_floor_reports_the_ratio_only() -> None:
    report = headline({"nodes": 3}, {"baseline": _phase(100.0), "extender": _phase(25.0)})
    assert report["extender_throughput_ratio"] == 0.25 and report["correct"] is True
    assert set(report["targets"]) == {"extender_throughput_ratio"}
    assert "filter_noop_ratio" not in report and "noop_pods_per_second" not in report
    assert set(report["ks_algorithm_p50_ms"]) == {"baseline", "extender"}
