"""app/k8s/exchange.py: the request is byte for byte urllib3's, answers are read whole or refused with the
messages urllib3 gave (they reach /bind's Error and events), and a connection is reused only after a
complete answer the server keeps open. Real sockets (a small HTTP/1.1 server in a thread); the TLS path
runs in tests/k8s/test_objects.py against the emulator."""

from __future__ import annotations

import contextlib
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
    records the raw bytes and writes `answer(n)` (n counts requests; a list is written piece by piece,
    50 ms apart), closing the connection after it when `close_after` says so."""

    answer: Callable[[int], bytes | list[bytes]]
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
        with conn, conn.makefile("rb") as stream, contextlib.suppress(ConnectionError):  # a client's reset
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
                answer = self.answer(count)
                for piece in answer if isinstance(answer, list) else [answer]:
                    conn.sendall(piece)
                    time.sleep(0.05 if isinstance(answer, list) else 0)
                if self.close_after(count):
                    conn.shutdown(socket.SHUT_RDWR)
                    return


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(
        answer: Callable[[int], bytes | list[bytes]] = lambda n: OK, **kwargs: Callable[[int], bool]
    ) -> Server:
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


FIRST = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
ANSWERS = {  # (the bytes, status, body, reusable)
    # obs-fold (RFC 9112 5.2): unfolded into the field it continues, so a folded Content-Length frames nothing
    "folded-content-length": (
        b"HTTP/1.1 200 OK\r\nX-A: 1\r\n Content-Length: 2\r\nContent-Length: 5\r\n\r\nfirst",
        200,
        b"first",
        True,
    ),
    "folded-header-with-tabs-and-spaces": (
        b"HTTP/1.1 200 OK\r\nX-A: 1\r\n\t more\r\n  and more\r\nContent-Length: 5\r\n\r\nfirst",
        200,
        b"first",
        True,
    ),
    "folded-interim-answer-then-the-answer": (
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>;\r\n rel=preload\r\n\r\n" + FIRST,
        200,
        b"first",
        True,
    ),
    "content-length": (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, b"hello", True),
    "chunked-with-extensions-and-trailers": (
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"
        b'3;name=x;q="a b"\r\nhel\r\n2;last\r\nlo\r\n0;end=1\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n',
        201,
        b"hello",
        True,
    ),
    "interim-100-continue-first": (b"HTTP/1.1 100 Continue\r\n\r\n" + FIRST, 200, b"first", True),
    "interim-103-early-hints-first": (
        b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" + FIRST,
        200,
        b"first",
        True,
    ),
    "several-interim-answers-first": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\nLink: </b>\r\n\r\n" + FIRST,
        200,
        b"first",
        True,
    ),
    "connection-close": (
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
        200,
        b"{}",
        False,
    ),
    "http-1.0": (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", 200, b"{}", False),
    "http-1.0-keep-alive-still-closed": (
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}",
        200,
        b"{}",
        False,
    ),
    "close-delimited-body": (b"HTTP/1.1 200 OK\r\n\r\nto the end", 200, b"to the end", False),
    "no-content": (b"HTTP/1.1 204 No Content\r\n\r\n", 204, b"", True),
    "not-modified-with-a-length-has-no-body": (
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
        304,
        b"",
        True,
    ),
    "error-status-with-body": (b"HTTP/1.1 409 Conflict\r\nContent-Length: 3\r\n\r\nabc", 409, b"abc", True),
}
POOL = urllib3.HTTPConnectionPool("127.0.0.1", 1)
DELIVERY = {"in-one-read": 1 << 20, "in-7-byte-reads": 7}


def _read(raw: bytes, piece: int = 1 << 20, *, head_only: bool = False) -> tuple[exchange.Answer, bool]:
    """`exchange.receive` over `raw`, `piece` bytes per read, then the end of the connection."""
    stream = io.BytesIO(raw)
    return exchange.receive(lambda n: stream.read(min(n, piece)), POOL, 2.0, head_only=head_only)


@pytest.mark.parametrize("piece", DELIVERY.values(), ids=DELIVERY.keys())
@pytest.mark.parametrize(("raw", "status", "body", "keep"), ANSWERS.values(), ids=ANSWERS.keys())
def test_answers_are_read_whole(raw: bytes, status: int, body: bytes, keep: bool, piece: int) -> None:
    answer, reusable = _read(raw, piece)
    assert (answer.status, answer.body, reusable) == (status, body, keep)


def test_a_head_answer_has_no_body_and_ends_its_connection() -> None:
    answer, reusable = _read(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", head_only=True)
    assert (answer.status, answer.body, reusable) == (200, b"", False)


SURPLUS = {
    "a-second-answer": FIRST + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    "bytes-that-are-no-answer": FIRST + b"NEXT",
    "a-body-longer-than-its-length": b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nfirst",
}


@pytest.mark.parametrize("raw", SURPLUS.values(), ids=SURPLUS.keys())
def test_bytes_after_the_answer_end_the_connection(raw: bytes) -> None:
    """The server and we disagree on where the answer ends: the connection is never used again."""
    answer, reusable = _read(raw)
    assert answer.status == 200 and not reusable


REFUSED = {  # what http.client (the status line) or urllib3 (the body) raises, and says; llhttp for the rest
    "empty": (b"", RemoteDisconnected, "Remote end closed connection without response"),
    "closed-inside-the-head": (
        b"HTTP/1.1 200 OK\r\nContent-Le",
        RemoteDisconnected,
        "Remote end closed connection without response",
    ),
    "closed-after-an-interim-answer": (
        b"HTTP/1.1 103 Early Hints\r\n\r\n",
        RemoteDisconnected,
        "Remote end closed connection without response",
    ),
    "bad-status-line": (b"HTP/1.1 200 OK\r\n\r\n", BadStatusLine, "HTP"),
    "bad-status-code": (b"HTTP/1.1 2x0 OK\r\n\r\n", BadStatusLine, "2x"),
    "unknown-protocol": (b"HTTP/2.0 200 OK\r\n\r\n", UnknownProtocol, "HTTP/2.0"),
    "switching-protocols-unasked": (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
        HTTPException,
        "no upgrade was asked for",
    ),
    "too-many-headers": (
        b"HTTP/1.1 200 OK\r\n" + b"X: 1\r\n" * 100 + b"\r\n",
        HTTPException,
        "more than 100",
    ),
    "line-too-long": (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n", LineTooLong, "header line"),
    "endless-interim-answers": (
        (b"HTTP/1.1 103 Early Hints\r\n" + (b"Link: </" + b"a" * 4000 + b">\r\n") * 16 + b"\r\n") * 20,
        HTTPException,
        "longer than 1048576 bytes",
    ),
    "continuation-before-any-header": (
        b"HTTP/1.1 200 OK\r\n Content-Length: 2\r\n\r\n{}",
        HTTPException,
        "invalid answer head",
    ),
    "conflicting-content-lengths": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nfirst",
        HTTPException,
        "Duplicate Content-Length",
    ),
    "repeated-content-length": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nfirst",
        HTTPException,
        "Duplicate Content-Length",
    ),
    "content-length-list": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nfirst",
        HTTPException,
        "Invalid character in Content-Length",
    ),
    "negative-content-length": (
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nabc",
        HTTPException,
        "Invalid character in Content-Length",
    ),
    "content-length-and-chunked": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        HTTPException,
        "Transfer-Encoding can't be present with Content-Length",
    ),
    "other-transfer-coding": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        ProtocolError,
        "unexpected Transfer-Encoding 'gzip, chunked'",
    ),
    "header-line-without-colon": (
        b"HTTP/1.1 200 OK\r\nbroken\r\nContent-Length: 1\r\n\r\nx",
        HTTPException,
        "invalid answer head",
    ),
    "whitespace-before-colon": (
        b"HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\nx",
        HTTPException,
        "Invalid header field char",
    ),
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
    "chunked-cut-inside-the-trailers": (
        CHUNKED + b"3\r\nabc\r\n0\r\nX-T: 1\r\n",
        ProtocolError,
        "IncompleteRead(3 bytes read)",
    ),
    "compressed": (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
        ProtocolError,
        "unexpected Content-Encoding 'gzip'",
    ),
}


@pytest.mark.parametrize("piece", DELIVERY.values(), ids=DELIVERY.keys())
@pytest.mark.parametrize(("raw", "error", "says"), REFUSED.values(), ids=REFUSED.keys())
def test_a_malformed_or_truncated_answer_is_refused(
    raw: bytes, error: type[Exception], says: str, piece: int
) -> None:
    with pytest.raises(error) as raised:
        _read(raw, piece)
    assert says in str(raised.value)


SECOND = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"
# the first answer's pieces, whether the server closes after it, what the first call gets, connections used
SCRIPTED = {
    "103-early-hints-then-the-answer": (
        [b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", FIRST],
        False,
        b"first",
        1,
    ),
    "several-interim-answers-then-the-answer": (
        [
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
            FIRST,
        ],
        False,
        b"first",
        1,
    ),
    "folded-content-length": (
        [b"HTTP/1.1 200 OK\r\nX-A: 1\r\n Content-Length: 2\r\nContent-Length: 5\r\n\r\nfirst"],
        False,
        b"first",
        1,
    ),
    "chunked-with-extensions-and-trailers": (
        [CHUNKED + b"3;a=1\r\nfir\r\n2;b\r\nst\r\n0\r\nX-Checksum: 9\r\n\r\n"],
        False,
        b"first",
        1,
    ),
    "content-length-too-short": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nfirst"],
        False,
        b"fir",
        2,
    ),
    "content-length-too-long-then-closed": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst"],
        True,
        "Connection broken: IncompleteRead(5 bytes read, 5 more expected)",
        2,
    ),
    "content-length-too-long-kept-open": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst"],
        False,
        "Read timed out.",
        2,
    ),
    "conflicting-content-lengths": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nfirst"],
        False,
        "Duplicate Content-Length",
        2,
    ),
    "close-delimited-body": ([b"HTTP/1.1 200 OK\r\n\r\nfirst"], True, b"first", 2),
}


@pytest.mark.parametrize(("pieces", "close", "first", "connections"), SCRIPTED.values(), ids=SCRIPTED.keys())
def test_a_scripted_answer_and_the_next_call_on_the_pool_gets_its_own(
    serve: Callable[..., Server], pieces: list[bytes], close: bool, first: bytes | str, connections: int
) -> None:
    """The first call gets its answer or an error; the second call on the same pool (one connection) gets
    the second answer, on the same connection only when the first was read whole and nothing followed."""
    server = serve(lambda n: pieces if n == 1 else SECOND, close_after=lambda n: close and n == 1)
    pool = urllib3.HTTPConnectionPool("127.0.0.1", server.port, maxsize=1)
    if isinstance(first, bytes):
        answer = _send(pool, "GET", "/x", None)
        assert (answer.status, answer.body) == (200, first)
    else:
        with pytest.raises(urllib3.exceptions.HTTPError) as raised:
            _send(pool, "GET", "/x", None)
        assert first in str(raised.value)
    time.sleep(0.2)  # whatever else the server writes for the first call arrives before the second
    assert _send(pool, "GET", "/x", None).body == b"second"
    assert server.connections == connections and len(server.requests) == 2


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
