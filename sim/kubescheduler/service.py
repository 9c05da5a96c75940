"""The extender's Kubernetes Service as the simulated kube-scheduler reaches it with several replicas.

With one URL the Service is that URL (the demo: kube-scheduler talks to its own replica). With several, it
behaves like a ClusterIP Service whose endpoints are the replicas passing their readiness probe: a prober
thread GETs every replica's `/readyz` every `period` seconds (kubelet probe + endpoint propagation), and
calls go to the Ready ones in turn (kube-proxy spreads connections over every Ready endpoint; normally only
the leader is Ready, but two replicas that both believe they lead — sim.chaos.twoleaders — both get calls). A
call that fails at the transport level (the replica was killed) wakes the prober at once. With no Ready
endpoint the call fails the way kube-proxy does (connection refused), so the pod goes to kube-scheduler's
backoff queue and is retried.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import urllib3

from sim.kit.kube import warnings_quiet


class NoEndpoints(Exception):
    """No replica is Ready: what a connection to a Service without endpoints gets."""


class Service:
    def __init__(
        self, urls: Sequence[str], pool: urllib3.PoolManager, period: float = 0.5, timeout: float = 1.0
    ) -> None:
        if not urls:
            raise ValueError("a Service needs at least one URL")
        self.urls = [u.rstrip("/") for u in urls]
        self._pool = pool
        self._period = period
        self._timeout = timeout
        self._lock = threading.Lock()
        self._ready: list[str] = list(self.urls) if len(self.urls) == 1 else []
        self._turn = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if len(self.urls) > 1:
            self._probe()
            self._thread = threading.Thread(target=self._run, name="sim-service-prober", daemon=True)
            self._thread.start()

    def endpoint(self) -> str:
        """The URL a call goes to now; raises NoEndpoints when no replica is Ready."""
        with self._lock:
            if not self._ready:
                raise NoEndpoints(f"no ready endpoints among {len(self.urls)} replicas: connection refused")
            self._turn += 1
            return self._ready[self._turn % len(self._ready)]

    def failed(self, url: str) -> None:
        """A call to `url` failed at the transport level: take it out until a probe says it is Ready."""
        if self._thread is None:
            return
        with self._lock:
            if url in self._ready:
                self._ready.remove(url)
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)

    def _ready_now(self, url: str) -> bool:
        try:
            with warnings_quiet():
                response = self._pool.request(
                    "GET", f"{url}/readyz", timeout=urllib3.Timeout(total=self._timeout), retries=False
                )
        except urllib3.exceptions.HTTPError:
            return False
        return response.status == 200

    def _probe(self) -> None:
        ready = [url for url in self.urls if self._ready_now(url)]
        with self._lock:
            self._ready = ready

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._period)
            self._wake.clear()
            if not self._stop.is_set():
                self._probe()
