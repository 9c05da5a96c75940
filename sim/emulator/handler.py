"""HTTP/1.1 plumbing: a handler per connection (keep-alive), chunked watch streams, faults, the request log.

Reads the body first (so an injected error never desynchronises a keep-alive connection), asks the fault
injector what to do, dispatches to discovery, the test hooks or the resource API, and records the outcome.
A "lost response" closes the socket after the work is done, which is what a client sees when a proxy or the
network drops an answer in flight.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

import orjson

from sim.emulator import api, discovery, hooks, openapi
from sim.emulator.errors import ApiError, expired, page_not_found
from sim.emulator.faults import NO_FAULT, Fault
from sim.emulator.requestlog import RequestRecord
from sim.emulator.routing import Route, parse_route
from sim.emulator.watch import error_line, run_watch

if TYPE_CHECKING:
    from sim.emulator.state import EmulatorState

logger = logging.getLogger(__name__)
JSON = "application/json"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sim-apiserver"
    _logged: bool
    _log: Callable[[int], None]  # records the current request in the request log (once)

    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: object) -> None:
        """Silenced: the emulator keeps its own request log."""

    @property
    def emulator(self) -> EmulatorState:
        """The state the server (sim.emulator.server.SimServer, which imports this module) serves."""
        state: EmulatorState = getattr(self.server, "emulator")  # noqa: B009 (no import of the server)
        return state

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self) -> None:
        started, clock = time.time(), time.perf_counter()
        method = self.command
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        body = self._read_body()
        if url.path == "/_sim" or url.path.startswith("/_sim/"):
            self._send(hooks.handle(self.emulator, method, url.path, query, body))
            return
        route: Route | None = None
        fault: Fault = NO_FAULT
        status = 0
        self._logged = False

        def log(code: int) -> None:
            """Record the request once, BEFORE its answer is written: a client that has its answer finds
            the request in the log."""
            if self._logged:
                return
            self._logged = True
            self.emulator.requests.add(
                RequestRecord(
                    started,
                    method,
                    url.path,
                    url.query,
                    route.verb if route else "",
                    route.rtype.key if route else "",
                    code,
                    round((time.perf_counter() - clock) * 1000, 3),
                    fault.fired,
                )
            )

        self._log = log
        try:
            route = parse_route(method, url.path, query.get("watch", "") in ("true", "1"))
            fault = self.emulator.faults.decide(method, url.path, route, self.headers.get("User-Agent", ""))
            if fault.delay > 0:
                time.sleep(fault.delay)
            if fault.error is not None:
                raise fault.error
            if route is not None and route.verb == "watch":
                status = self._watch(route, query, fault)
            else:
                reply = self._answer(method, url.path, route, query, body)
                status = self._finish(reply, fault)
        except ApiError as error:
            status = self._finish(api.error_reply(error), fault)
        except OSError:  # the client went away (or the server is stopping): nothing left to answer
            self.close_connection = True
        except Exception:
            logger.exception("internal error serving %s %s", method, self.path)
            status = self._finish(api.error_reply(ApiError(500, "Internal error occurred")), fault)
        log(status)  # a watch (when its stream ends), a drop, a client gone

    def _answer(
        self, method: str, path: str, route: Route | None, query: dict[str, str], body: bytes
    ) -> api.Reply:
        if route is not None:
            content_type = self.headers.get("Content-Type", "")
            return api.serve(self.emulator, route, query, content_type, self.headers.get("Accept", ""), body)
        if method != "GET":
            raise page_not_found()
        spec = openapi.document(path)
        if spec is not None:
            return api.Reply(200, spec)
        document = discovery.document(path, f"{self.emulator.config.host}:{self.emulator.port}")
        if document is None:
            raise page_not_found()
        return api.Reply(200, orjson.dumps(document))

    def _finish(self, reply: api.Reply, fault: Fault) -> int:
        if fault.lost_response:
            self._drop()
            return 0
        self._log(reply.code)
        self._send(reply)
        return reply.code

    def _send(self, reply: api.Reply) -> None:
        self.send_response(reply.code)
        self.send_header("Content-Type", JSON)
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(reply.body)

    def _drop(self) -> None:
        """Close the connection without a byte of answer."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # --- watch ----------------------------------------------------------------------------------------------

    def _watch(self, route: Route, query: dict[str, str], fault: Fault) -> int:
        if fault.lost_response:
            self._drop()
            return 0
        drop = fault.drop_watch
        try:
            if fault.expire:
                raise expired(f"too old resource version: {query.get('resourceVersion') or 0} (injected)")
            accept, agent = self.headers.get("Accept", ""), self.headers.get("User-Agent", "")
            after = drop.after_events if drop else None
            setup = api.open_watch(self.emulator, route, query, accept, after, agent)
        except ApiError as error:
            if error.code != 410:
                raise
            self._start_chunked()
            self._chunk(error_line(error.status()))
            self._chunk(b"")
            return 200
        self._start_chunked()
        store = self.emulator.store
        try:
            ending = run_watch(
                store, setup.watcher, setup.backlog, self, setup.options, self.emulator.stopping
            )
        finally:
            store.unsubscribe(route.rtype, setup.watcher)
        if ending == "expired":
            self._chunk(error_line(expired(f"too old resource version: {store.rv} (watch closed)").status()))
            self._chunk(b"")
        elif ending == "dropped" and not (drop and drop.graceful):
            self._drop()
        elif ending in ("client", "stopped"):
            self.close_connection = True
        else:
            self._chunk(b"")
        return 200

    def _start_chunked(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", JSON)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def send(self, data: bytes) -> None:
        """watch.Sink: one chunk per batch of events."""
        self._chunk(data)

    def client_gone(self) -> bool:
        """watch.Sink: a watch client never sends on its connection, so readable means closed."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)
