"""The two-leader fault's parts (sim/cluster/skewclock.py, sim/chaos/twoleaders.py): a process whose wall
clock is stepped back and forward while it runs, the decisions counted from a replica's /metrics, and the
storm's options that cannot be honoured refused up front."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.chaos.run import add_arguments, run
from sim.chaos.twoleaders import decisions
from sim.cluster.skewclock import Offset, write_offset
from sim.emulator.testing import REPO_ROOT


def test_the_offset_follows_its_file_and_counts_as_zero_without_one(tmp_path: Path) -> None:
    ticks = [0.0]
    path = tmp_path / "clock-offset"
    offset = Offset(path, monotonic=lambda: ticks[0])
    assert offset.seconds() == 0.0  # no file: the real clock
    write_offset(path, 20)
    assert offset.seconds() == 0.0  # looked at no more often than every 50 ms
    ticks[0] = 0.06
    assert offset.seconds() == 20.0
    path.write_text("not a number", encoding="utf-8")
    ticks[0] = 0.12
    assert offset.seconds() == 0.0
    write_offset(path, 0)
    ticks[0] = 0.18
    assert offset.seconds() == 0.0


def test_a_module_run_under_the_stepped_clock_sees_it_behind(tmp_path: Path) -> None:
    path = tmp_path / "clock-offset"
    write_offset(path, 30)
    code = "import time; print(time.time()); print(time.time_ns())"
    (tmp_path / "show_clock.py").write_text(code, encoding="utf-8")
    env = {"PYTHONPATH": f"{REPO_ROOT}:{tmp_path}"}
    before = time.time()
    shown = subprocess.run(
        [sys.executable, "-m", "sim.cluster.skewclock", str(path), "show_clock"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    ).stdout.split()
    after = time.time()
    seconds, nanos = float(shown[0]), int(shown[1])
    assert before - 30 - 1 <= seconds <= after - 30 + 1
    assert abs(nanos / 1e9 - seconds) < 1


METRICS = """# HELP hami_scheduler_filter_results_total Filter answers by result
hami_scheduler_filter_results_total{result="placed"} 12.0
hami_scheduler_filter_results_total{result="error"} 40.0
hami_scheduler_bind_results_total{reason="",result="bound"} 7.0
hami_scheduler_bind_results_total{reason="no-longer-fits",result="error"} 2.0
hami_scheduler_bind_results_total{reason="already-bound",result="bound"} 1.0
"""


def test_decisions_count_placements_and_bindings() -> None:
    assert decisions(METRICS) == (12, 8)
    assert decisions("") == (0, 0)


@pytest.mark.parametrize(
    "argv",
    [
        ["--control-plane", "real", "--two-leaders", "1"],
        ["--control-plane", "real", "--vendors", "nvidia+awsneuron"],
        ["--vendors", "nvidia+nosuchvendor"],
        ["--replicas", "1", "--two-leaders", "1"],
    ],
    ids=["two-leaders-on-real", "vendors-on-real", "unknown-vendor", "two-leaders-one-replica"],
)
def test_options_the_storm_cannot_honour_are_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert run(parser.parse_args(argv)) == 2  # before anything starts
    assert capsys.readouterr().err.startswith("sim chaos: ")
