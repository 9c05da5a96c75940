"""The latency mode of `python -m bench --control-plane real --arrival-rate R`: pods arrive at R per second.

In the default (saturated) mode every pod of a run exists before its kube-scheduler starts, so the queue is
full and the figures are throughput and latency under saturation. With an arrival rate the run's
kube-scheduler starts first and the driver creates the pods on a fixed schedule — pod i at start + i / R —
so, as long as scheduling keeps up with R, nothing queues and the CPU is not saturated: kube-scheduler's
algorithm duration is then the latency of one decision, comparable between the no-op floor and our extender
at the same rate.

The schedule is bounded in count (the run's pods) and in time (count / R seconds, checked against
`MAX_SECONDS` when the options are parsed). Creations run on a few threads, so one slow API call does not
delay the next arrivals; how late each creation was sent against its schedule is reported (`lag_ms`) to
show whether the driver kept the rate. Each pod's creation time is kept, so the run can report the time
from creation to bind as the harness saw it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench import summary

Obj = dict[str, Any]
MAX_SECONDS = 3600.0  # one run's arrivals at most this long
THREADS = 4


def arrival_rate(text: str) -> float:
    """`--arrival-rate`: a positive, finite number of pods per second (argparse's `type`)."""
    try:
        rate = float(text)
    except ValueError:
        rate = math.nan
    if not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"must be a positive number of pods per second, not {text!r}")
    return rate


def too_long(pods: int, rate: float) -> str:
    """Why `pods` arriving at `rate` per second is no run ("" when it is one)."""
    seconds = pods / rate
    if seconds > MAX_SECONDS:
        return f"{pods} pods at {rate:g}/s arrive over {seconds:.0f}s, more than {MAX_SECONDS:.0f}s"
    return ""


class Arrivals:
    """Creates `pods` with `create` at `rate` per second, on a schedule fixed when `start` is called."""

    def __init__(self, create: Callable[[Obj], object], pods: list[Obj], rate: float) -> None:
        self.create, self.pods, self.rate = create, pods, rate
        self.sent_at: dict[str, float] = {}  # pod name -> perf_counter when its creation was sent
        self.lag_ms: list[float] = []
        self.failure: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()  # stop requested, or a creation failed
        self._finished = threading.Event()  # every creation sent has returned
        self._thread = threading.Thread(target=self._run, name="bench-arrivals", daemon=True)

    def start(self) -> Arrivals:
        self._thread.start()
        return self

    def created(self) -> int:
        with self._lock:
            return len(self.sent_at)

    def done(self) -> bool:
        return self._finished.is_set()

    def check(self) -> None:
        """Raise the first creation's failure, if any."""
        if self.failure is not None:
            raise self.failure

    def stop(self, wait: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(wait)

    def _send(self, pod: Obj, due: float) -> None:
        if self._stop.is_set():
            return
        now = time.perf_counter()
        with self._lock:
            self.sent_at[pod["metadata"]["name"]] = now
            self.lag_ms.append(max(0.0, (now - due) * 1000.0))
        try:
            self.create(pod)
        except Exception as exc:
            with self._lock:
                self.failure = self.failure or exc
            self._stop.set()

    def _run(self) -> None:
        with ThreadPoolExecutor(THREADS, thread_name_prefix="bench-arrive") as executor:
            began = time.perf_counter()
            for index, pod in enumerate(self.pods):
                due = began + index / self.rate
                if self._stop.wait(max(0.0, due - time.perf_counter())):
                    break
                executor.submit(self._send, pod, due)
        self._finished.set()

    def report(self, bound_at: dict[str, float]) -> Obj:
        """How the schedule was kept (`lag_ms`), and each pod's time from its creation sent to its bind
        seen (`create_to_bind_ms`); `bound_at` maps `namespace/name` to the perf_counter of the bind."""
        with self._lock:
            sent, lags = dict(self.sent_at), list(self.lag_ms)
        waits = [
            1000.0 * (at - sent[key.rsplit("/", 1)[-1]])
            for key, at in bound_at.items()
            if key.rsplit("/", 1)[-1] in sent
        ]
        return {
            "rate": self.rate,
            "created": len(sent),
            "lag_ms": summary.latency(lags),
            "create_to_bind_ms": summary.latency(waits),
        }
