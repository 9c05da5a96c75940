"""app/k8s/exchange.py: the request is byte for byte urllib3's, answers are read whole or refused with the
messages urllib3 gave (they reach /bind's Error and events), and a connection is reused only after a
complete answer the server keeps open. Real sockets (a small HTTP/1.1 server in a thread); the TLS path
runs in tests/k8s/test_objects.py against the emulator."""

from __future__ import annotations

import io
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.client import BadStatusLine, HTTPException, LineTooLong, RemoteDisconnected, UnknownProtocol

import pytest
import urllib3
from kubernetes import client
from urllib3.exceptions import ProtocolError

from app.k8s import exchange, objects
from app.k8s.client import Kube
from app.k8s.errors import from_exception

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


@dataclass
class Server:
    """Accepts connections; for each request read (up to the blank line, then Content-Length bytes) it
    records the raw bytes and writes `answer(n)` (n counts requests), closing the connection after it
    when `close_after` says so."""

    answer: Callable[[int], bytes]
    close_after: Callable[[int], bool] = lambda n: False
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    accepted: list[socket.socket] = field(default_factory=list)
    listener: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self.accepted.append(conn)
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as stream:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = stream.readline()
                    if not line:
                        return
                    head += line
                length = next(
                    (
                        int(v)
                        for k, _, v in (h.partition(b":") for h in head.split(b"\r\n"))
                        if k == b"Content-Length"
                    ),
                    0,
                )
                self.requests.append(head + stream.read(length))
                count = len(self.requests)
                conn.sendall(self.answer(count))
                if self.close_after(count):
                    conn.shutdown(socket.SHUT_RDWR)
                    return


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(answer: Callable[[int], bytes] = lambda n: OK, **kwargs: Callable[[int], bool]) -> Server:
        server = Server(answer, **kwargs)
        threading.Thread(target=server.serve, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.listener.close()
        for conn in server.accepted:
            conn.close()


def _send(pool: urllib3.HTTPConnectionPool, method: str, path: str, body: bytes | None) -> exchange.Answer:
    headers = {
        "User-Agent": "hami-scheduler-test/1",
        "Accept": "application/json",
        "authorization": "Bearer t",
    }
    lines = exchange.header_lines(headers)
    if body is not None:
        lines += b"Content-Type: application/merge-patch+json\r\n"
    length = None if body is None else len(body)
    head = exchange.request_head(method, path, exchange.host_header(pool), lines, length)
    return exchange.send(pool, head, body, connect_timeout=2.0, read_timeout=2.0, method=method)


@pytest.mark.parametrize(
    ("method", "body"),
    [("GET", None), ("PATCH", b'{"metadata":{"annotations":{"a":"1"}}}'), ("POST", b"{}")],
    ids=["get-no-body", "patch-with-body", "post-with-body"],
)
def test_the_request_is_byte_for_byte_what_urllib3_sends(
    serve: Callable[..., Server], method: str, body: bytes | None
) -> None:
    server = serve()
    pool = urllib3.HTTPConnectionPool("127.0.0.1", server.port)
    path = "/api/v1/namespaces/default/pods/p%201?fieldSelector=spec.nodeName%3Dn1"
    headers = {
        "User-Agent": "hami-scheduler-test/1",
        "Accept": "application/json",
        "authorization": "Bearer t",
    }
    if body is not None:
        headers["Content-Type"] = "application/merge-patch+json"
    pool.urlopen(method, path, body=body, headers=headers, retries=False, redirect=False)
    answer = _send(pool, method, path, body)
    assert (answer.status, answer.reason, answer.body) == (200, "OK", b"{}")
    assert len(server.requests) == 2 and server.requests[1] == server.requests[0]
    assert server.connections == 1  # kept alive: urllib3's connection carried ours too


def test_host_header_names_the_port_unless_it_is_the_schemes_default() -> None:
    assert exchange.host_header(urllib3.HTTPSConnectionPool("api.example", 443)) == b"api.example"
    assert exchange.host_header(urllib3.HTTPSConnectionPool("api.example", 6443)) == b"api.example:6443"
    assert exchange.host_header(urllib3.HTTPConnectionPool("::1", 8080)) == b"[::1]:8080"


def test_a_header_with_a_line_break_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid header"):
        exchange.header_lines({"authorization": "Bearer t\r\nX-Injected: 1"})


ANSWERS = {
    "content-length": (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, b"hello", True),
    "chunked-with-extension-and-trailer": (
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;name=x\r\nhel\r\n2\r\nlo\r\n0\r\nX-Trailer: 1\r\n\r\n",
        201,
        b"hello",
        True,
    ),
    "interim-100-continue-first": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        200,
        b"{}",
        True,
    ),
    "connection-close": (
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
        200,
        b"{}",
        False,
    ),
    "http-1.0": (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", 200, b"{}", False),
    "no-length-reads-to-the-end": (b"HTTP/1.1 200 OK\r\n\r\nto the end", 200, b"to the end", False),
    "negative-length-reads-to-the-end": (
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nabc",
        200,
        b"abc",
        False,
    ),
    "header-line-without-colon-skipped": (
        b"HTTP/1.1 200 OK\r\nbroken\r\nContent-Length: 1\r\n\r\nx",
        200,
        b"x",
        True,
    ),
    "no-content": (b"HTTP/1.1 204 No Content\r\n\r\n", 204, b"", True),
    "error-status-with-body": (b"HTTP/1.1 409 Conflict\r\nContent-Length: 3\r\n\r\nabc", 409, b"abc", True),
}
POOL = urllib3.HTTPConnectionPool("127.0.0.1", 1)


def _read(stream: io.BytesIO) -> tuple[exchange.Answer, bool]:
    version, status, reason, headers = exchange.read_head(stream)
    return exchange.read_body(stream, POOL, "GET", version, status, reason, headers)


@pytest.mark.parametrize(("raw", "status", "body", "keep"), ANSWERS.values(), ids=ANSWERS.keys())
def test_answers_are_read_whole(raw: bytes, status: int, body: bytes, keep: bool) -> None:
    stream = io.BytesIO(raw + b"NEXT" if keep else raw)
    answer, reusable = _read(stream)
    assert (answer.status, answer.body, reusable) == (status, body, keep)
    if keep:
        assert stream.read() == b"NEXT"  # nothing of the next answer was consumed


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
REFUSED = {  # what http.client (the status line and headers) or urllib3 (the body) raises, and says
    "empty": (b"", RemoteDisconnected, "Remote end closed connection without response"),
    "bad-status-line": (b"HTP/1.1 200 OK\r\n\r\n", BadStatusLine, "HTP/1.1 200 OK"),
    "bad-status-code": (b"HTTP/1.1 2x0 OK\r\n\r\n", BadStatusLine, "2x0"),
    "unknown-protocol": (b"HTTP/2.0 200 OK\r\n\r\n", UnknownProtocol, "HTTP/2.0"),
    "too-many-headers": (
        b"HTTP/1.1 200 OK\r\n" + b"X: 1\r\n" * 100 + b"\r\n",
        HTTPException,
        "more than 100",
    ),
    "line-too-long": (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n", LineTooLong, "header line"),
    "cut-short-body": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
        ProtocolError,
        "Connection broken: IncompleteRead(3 bytes read, 7 more expected)",
    ),
    "negative-chunk": (
        CHUNKED + b"-1\r\nabc",
        ProtocolError,
        "Connection broken: IncompleteRead(0 bytes read)",
    ),
    "prefixed-chunk": (CHUNKED + b"0x3\r\nabc\r\n0\r\n\r\n", ProtocolError, "IncompleteRead(0 bytes read)"),
    "chunk-without-line-break": (
        CHUNKED + b"3\r\nabcd\r\n0\r\n\r\n",
        ProtocolError,
        "IncompleteRead(3 bytes",
    ),
    "chunked-cut-short": (CHUNKED + b"3\r\nabc\r\n", ProtocolError, "IncompleteRead(3 bytes read)"),
    "compressed": (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
        ProtocolError,
        "unexpected Content-Encoding 'gzip'",
    ),
}


@pytest.mark.parametrize(("raw", "error", "says"), REFUSED.values(), ids=REFUSED.keys())
def test_a_malformed_or_truncated_answer_is_refused_as_http_client_and_urllib3_refuse_it(
    raw: bytes, error: type[Exception], says: str
) -> None:
    with pytest.raises(error) as raised:
        _read(io.BytesIO(raw))
    assert says in str(raised.value)


def _urllib3_message(pool: urllib3.HTTPConnectionPool) -> str:
    """What the request path before exchange.py raised for the same failure (urlopen, then `.data`)."""
    try:
        response = pool.urlopen(
            "GET", "/x", retries=False, redirect=False, preload_content=False, timeout=TIMEOUT
        )
        response.data  # noqa: B018 - reading the body is the point
    except Exception as exc:
        return from_exception(exc).message
    raise AssertionError("urllib3 raised nothing")


def _exchange_message(pool: urllib3.HTTPConnectionPool) -> str:
    head = exchange.request_head("GET", "/x", exchange.host_header(pool), b"", None)
    try:
        exchange.send(
            pool, head, None, connect_timeout=TIMEOUT.connect_timeout, read_timeout=0.3, method="GET"
        )
    except Exception as exc:
        return from_exception(exc).message
    raise AssertionError("exchange raised nothing")


TIMEOUT = urllib3.Timeout(connect=1.0, read=0.3)
FAILURES = {
    "closed-without-an-answer": lambda n: b"",
    "body-cut-short": lambda n: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}",
}


@pytest.mark.parametrize("answer", FAILURES.values(), ids=FAILURES.keys())
def test_a_failure_says_what_urllib3_said(
    serve: Callable[..., Server], answer: Callable[[int], bytes]
) -> None:
    """/bind's Error and the BindingFailed/FilteringFailed events carry these messages: unchanged."""
    server = serve(answer, close_after=lambda n: True)
    assert _exchange_message(urllib3.HTTPConnectionPool("127.0.0.1", server.port)) == _urllib3_message(
        urllib3.HTTPConnectionPool("127.0.0.1", server.port)
    )


def test_a_timeout_and_a_refused_connection_say_what_urllib3_said(serve: Callable[..., Server]) -> None:
    silent = serve(lambda n: b"")  # reads the request, never answers
    pool = urllib3.HTTPConnectionPool("127.0.0.1", silent.port)
    assert "Read timed out. (read timeout=0.3)" in _exchange_message(pool)
    assert _exchange_message(pool) == _urllib3_message(pool)
    gone = socket.create_server(("127.0.0.1", 0))
    port = gone.getsockname()[1]
    gone.close()
    refused = _exchange_message(urllib3.HTTPConnectionPool("127.0.0.1", port))
    assert "Connection refused" in refused
    assert refused == _urllib3_message(urllib3.HTTPConnectionPool("127.0.0.1", port))


def test_a_connection_the_server_closes_is_not_reused(serve: Callable[..., Server]) -> None:
    """After `Connection: close`, and after the server silently dropped an idle connection, the next
    request opens a new connection and gets its answer."""
    close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
    server = serve(lambda n: close if n == 1 else OK, close_after=lambda n: n in (1, 2))
    pool = urllib3.HTTPConnectionPool("127.0.0.1", server.port, maxsize=1)
    for _ in range(3):
        assert _send(pool, "GET", "/x", None).body == b"{}"
        time.sleep(0.05)  # the server's close reaches us before the next request
    assert server.connections == 3 and len(server.requests) == 3
    assert _send(pool, "GET", "/x", None).body == b"{}"
    assert server.connections == 3  # the third connection was kept alive


def test_a_failed_answer_closes_its_connection_and_the_next_request_succeeds(
    serve: Callable[..., Server],
) -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}"
    server = serve(lambda n: cut if n == 1 else OK, close_after=lambda n: n == 1)
    pool = urllib3.HTTPConnectionPool("127.0.0.1", server.port, maxsize=1)
    with pytest.raises(ProtocolError, match="IncompleteRead"):
        _send(pool, "GET", "/x", None)
    assert _send(pool, "GET", "/x", None).body == b"{}"
    assert server.connections == 2


def test_with_a_proxy_configured_the_call_goes_through_it(serve: Callable[..., Server]) -> None:
    """A client configured with a proxy keeps urllib3's ProxyManager (app/k8s/objects.py): the request
    reaches the proxy with the API server's absolute URL, and the answer is read as any other."""
    proxy = serve()
    configuration = client.Configuration()
    configuration.host = "http://api.example:8080"
    configuration.proxy = f"http://127.0.0.1:{proxy.port}"
    api = client.ApiClient(configuration)
    kube = Kube(api, client.CoreV1Api(api), client.CoordinationV1Api(api), client.EventsV1Api(api))
    try:
        assert objects.get_json(kube, "/api/v1/namespaces/default/pods/p1") == {}
    finally:
        kube.close()
    assert proxy.requests[0].startswith(
        b"GET http://api.example:8080/api/v1/namespaces/default/pods/p1 HTTP/1.1"
    )
