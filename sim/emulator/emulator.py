"""The emulator as one object: configuration, store, semantics, faults, request log and the HTTP server.

Tests in the same process use it directly (``Emulator(...).start()`` and the seeding/inspection methods of
``sim.emulator.state.EmulatorState``); tests that run it as a separate process reach the same methods over
HTTP under ``/_sim/`` (see ``hooks``).
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType

from sim.emulator import kubeconfig, tls
from sim.emulator.server import SimServer
from sim.emulator.state import EmulatorConfig, EmulatorState

__all__ = ["Emulator", "EmulatorConfig"]


class Emulator(EmulatorState):
    def __init__(self, config: EmulatorConfig | None = None) -> None:
        super().__init__(config)
        self._server: SimServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> Emulator:
        context = None
        if self.config.tls:
            certs = tls.generate([self.config.host, "127.0.0.1", "localhost"])
            self.ca_pem = certs.ca_pem
            context = tls.server_context(certs)
        self._server = SimServer((self.config.host, self.config.port), self, context)
        self._port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="sim-apiserver",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.store.close_watches()
        self._deferred.stop()
        server, self._server = self._server, None
        self._port = None
        if server is None:
            return
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host = self.config.host if ":" not in self.config.host else f"[{self.config.host}]"
        return f"{'https' if self.config.tls else 'http'}://{host}:{self.port}"

    def write_kubeconfig(self, path: Path) -> Path:
        return kubeconfig.write(path, kubeconfig.kubeconfig(self.url, self.config.token, self.ca_pem))
