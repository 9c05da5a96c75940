"""The listening socket: a threading HTTP/1.1 server with optional TLS and tracked connections.

TLS handshakes run in the connection's own thread (not in the accept loop), and every open connection is
tracked so that stopping the emulator closes keep-alive and watch connections at once instead of leaving
threads blocked on sockets.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from sim.emulator.handler import Handler

if TYPE_CHECKING:
    from sim.emulator.state import EmulatorState


class SimServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], emulator: EmulatorState, tls: ssl.SSLContext | None) -> None:
        self.emulator = emulator
        self._tls = tls
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        connection: socket.socket = request
        # Headers and body leave in two writes: without NODELAY, Nagle + delayed ACK stall answers ~40 ms.
        with contextlib.suppress(OSError):
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls is not None:
            try:
                connection = self._tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                request.close()
                return
        with self._connections_lock:
            self._connections.add(connection)
        try:
            super().finish_request(connection, client_address)
        finally:
            with self._connections_lock:
                self._connections.discard(connection)
            if connection is not request:
                connection.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connection-level errors (client resets) are normal for a test fixture; stay quiet."""

    def close_connections(self, wait: float = 5.0) -> None:
        """Shut every open connection down and wait for their threads to let go of them."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with self._connections_lock:
                if not self._connections:
                    return
            time.sleep(0.01)
