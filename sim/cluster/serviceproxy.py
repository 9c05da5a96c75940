"""A Kubernetes Service on loopback: a TCP proxy in front of our replicas that forwards each connection to a
replica passing its readiness probe (kube-proxy + the endpoints controller, as far as we need them).

In acquire mode the chart points every kube-scheduler at the Service, whose only Ready endpoint is the
extender leader. There is no kube-proxy on loopback, so the harness runs this: a prober thread GETs every
replica's `/readyz` (HTTPS, the chart's CA) every `period` seconds; a new connection goes to the first Ready
replica, bytes are copied both ways untouched (TLS passes through: the client verifies the replica's
certificate against the Service's host name, as in a cluster); with no Ready replica the connection is closed
at once (what a Service without endpoints does to a client). Connections already open stay on their replica
until either side closes them, as with kube-proxy. A Service port may target another port of the pod
than the probed one (`targets`: the chart's `extender` port, probed through the public server's `/readyz`).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence


class ServiceProxy:
    def __init__(
        self,
        backends: Sequence[str],
        ca_file: str,
        probe: str = "/readyz",
        period: float = 0.5,
        targets: Mapping[str, str] | None = None,
    ) -> None:
        """`backends`: the replicas' base URLs (https://127.0.0.1:PORT); `probe`: the readiness path
        (`/healthz` for a Service with publishNotReadyAddresses, such as the chart's webhook Service);
        `targets`: where connections to a Ready backend go, when not to the backend itself."""
        self.probe = probe
        self.targets = dict(targets or {})
        self.backends = list(backends)
        self._context = ssl.create_default_context(cafile=ca_file)
        self._period = period
        self._ready: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self.url = f"https://127.0.0.1:{self.port}"
        self._threads = [
            threading.Thread(target=self._probe_loop, name="service-prober", daemon=True),
            threading.Thread(target=self._accept_loop, name="service-proxy", daemon=True),
        ]

    def start(self) -> ServiceProxy:
        self._probe()
        for thread in self._threads:
            thread.start()
        return self

    def add(self, backend: str, target: str = "") -> None:
        with self._lock:
            self.backends.append(backend)
            if target:
                self.targets[backend] = target

    def ready(self) -> list[str]:
        with self._lock:
            return list(self._ready)

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._server.close()
        for thread in self._threads:
            thread.join(5)

    # --- readiness ------------------------------------------------------------------------------------------

    def _ready_now(self, url: str) -> bool:
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=self._context)
        )
        try:
            with opener.open(f"{url}{self.probe}", timeout=1.0) as response:
                return bool(response.status == 200)
        except urllib.error.HTTPError as error:
            error.close()
            return False
        except (urllib.error.URLError, OSError):
            return False

    def _probe(self) -> None:
        with self._lock:
            backends = list(self.backends)
        ready = [url for url in backends if self._ready_now(url)]
        with self._lock:
            self._ready = ready

    def _probe_loop(self) -> None:
        while not self._stop.wait(self._period):
            self._probe()

    # --- forwarding -----------------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        ready = self.ready()
        if not ready:
            client.close()
            return
        target = self.targets.get(ready[0], ready[0])
        host, port = target.rsplit("//", 1)[1].rsplit(":", 1)
        try:
            upstream = socket.create_connection((host, int(port)), timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        pump = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
        pump.start()
        _copy(client, upstream)
        pump.join()


def _copy(source: socket.socket, target: socket.socket) -> None:
    """Copy until `source` closes, then close both (the other direction's copy ends too)."""
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
