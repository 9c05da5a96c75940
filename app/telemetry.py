"""Metrics every process exports, whatever it does: `hami_build_info` and the process metrics.

HAMi's scheduler exports `hami_build_info` (reference §8) and, through client_golang, `process_*` and
`go_*`. Ours are `hami_build_info` with HAMi's label names where they mean the same (`version`, `revision`,
`build_date`, `compiler`, `platform`) and `python_version` in place of `go_version`, plus prometheus_client's
`process_*` and `python_info`.

The build identity comes from the image (the Dockerfile turns its VERSION, REVISION and CREATED build
arguments into HAMI_BUILD_VERSION, HAMI_BUILD_REVISION and HAMI_BUILD_DATE); outside an image the
installed package version is used and the others are `unknown`.

Under Gunicorn a scrape reaches one worker at random, so per-process values would jump between scrapes.
`ProcessTreeCollector` reports the extender container as one process instead: the sums over the Gunicorn
master and its workers (CPU seconds, resident and virtual memory, open file descriptors), with the master's
start time and descriptor limit. A worker that exits takes its CPU seconds with it (a counter reset).
"""

from __future__ import annotations

import functools
import os
import platform
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from pathlib import Path

from prometheus_client import ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

PACKAGE = "hami-scheduler-py"
_SUMMED = ("process_virtual_memory_bytes", "process_resident_memory_bytes", "process_open_fds")
_FROM_ROOT = ("process_start_time_seconds", "process_max_fds")


def build_labels(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The labels of hami_build_info."""
    env = os.environ if env is None else env
    try:
        installed = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        installed = "unknown"
    return {
        "version": env.get("HAMI_BUILD_VERSION") or installed,
        "revision": env.get("HAMI_BUILD_REVISION") or "unknown",
        "build_date": env.get("HAMI_BUILD_DATE") or "unknown",
        "python_version": platform.python_version(),
        "compiler": platform.python_implementation(),
        "platform": f"{platform.system().lower()}/{platform.machine().lower()}",
    }


class BuildInfoCollector(Collector):
    """`hami_build_info` = 1 with the build's labels (no zone label, as in HAMi)."""

    def __init__(self, labels: Mapping[str, str] | None = None) -> None:
        self._labels = dict(labels or build_labels())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "hami_build_info", "Build information of hami-scheduler-py", labels=list(self._labels)
        )
        family.add_metric(list(self._labels.values()), 1)
        yield family


def children(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """Direct children of `pid`, found by scanning /proc (no CONFIG_PROC_CHILDREN needed)."""
    found = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after the command name, which may hold spaces
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return sorted(found)


class ProcessTreeCollector(Collector):
    """process_* of `root()` and its direct children, as one process (see the module docstring)."""

    def __init__(self, root: Callable[[], int], proc: Path = Path("/proc")) -> None:
        self._root = root
        self._proc = proc

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        root = self._root()
        sums: dict[str, float] = {}
        kept: dict[str, float] = {}
        for pid in (root, *children(root, self._proc)):
            collector = ProcessCollector(pid=functools.partial(int, pid), proc=str(self._proc), registry=None)
            for family in collector.collect():
                for sample in family.samples:
                    if sample.name in _SUMMED or sample.name == "process_cpu_seconds_total":
                        sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
                    elif sample.name in _FROM_ROOT and pid == root:
                        kept[sample.name] = sample.value
        if "process_cpu_seconds_total" in sums:
            yield CounterMetricFamily(
                "process_cpu_seconds",
                "User and system CPU time of the process tree in seconds.",
                value=sums["process_cpu_seconds_total"],
            )
        helps = {
            "process_virtual_memory_bytes": "Virtual memory size of the process tree in bytes.",
            "process_resident_memory_bytes": "Resident memory size of the process tree in bytes.",
            "process_open_fds": "Open file descriptors of the process tree.",
            "process_start_time_seconds": "Start time of the root process since the epoch in seconds.",
            "process_max_fds": "Maximum number of open file descriptors of the root process.",
        }
        for name, help_text in helps.items():
            value = sums.get(name, kept.get(name))
            if value is not None:
                yield GaugeMetricFamily(name, help_text, value=value)
