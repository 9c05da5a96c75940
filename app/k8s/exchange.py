"""One HTTP/1.1 request and its answer over a connection of the client's urllib3 pool, without http.client's
request and response objects.

Why it exists (issue 20): the extender makes about seven API calls per scheduled pod (the allocation PATCH,
the lock, the re-check's LIST, the bind-phase stamp, the Binding, two events), and urllib3's request path
spends most of each call's CPU in Python around a few hundred bytes: http.client assembles the request
header by header and parses the answer's headers with the `email` package, urllib3 wraps both. Here the
request is written in one piece and the answer is read by llhttp (~0.2 ms of CPU less per call than
urllib3, measured in docs/benchmarks.md).

Who frames the answer (issue 28): llhttp, Node's HTTP/1.1 parser, through httptools, not code of ours. The
first version read the answer with `readline`s and framed it by hand; a review found it took a `103 Early
Hints` for the answer (the real answer was then left for the next call on the connection) and read a
folded line (` Content-Length: 2`) as a header of its own, cutting the body short. Fixing that parser and
proving it against h11 was the other choice; llhttp was measured cheaper as well as maintained and fuzzed
elsewhere: ~4 µs to parse an API server's answer against ~5 µs for the `readline`s and ~40 µs for h11, and
0.86-0.94 of the old client CPU per whole call (medians of two sittings: one recv per read instead of a
file object per call; docs/benchmarks.md, "issue 28"). tests/k8s/test_exchange_h11.py compares what is
read here with h11's reading of generated answers.

What stays urllib3's: the pool and its connections — so TLS (CA, client certificate, hostname checks,
SNI), the connect timeout and the socket options are exactly the client configuration's, set up by
urllib3 when a connection is (re)opened (`_validate_conn`); a pooled connection the server closed, or on
which unasked bytes arrived, is detected and reopened by the pool (`_get_conn`). The request is the one
urllib3 sends for the same call: the same request line and headers (`Host`, `Accept-Encoding: identity`,
`Content-Length` for a body, then the caller's), so the API server sees no difference. No retries (the
client is configured without them).

Invariants owned here:
- A connection goes back to the pool only after its answer was read completely, by its own framing, with
  nothing after it in what was received, from an HTTP/1.1 server that keeps it open; on anything else —
  a timeout, a reset, an answer refused, bytes after the answer, a body that ran to the end of the
  connection, HTTP/1.0 — it is closed (its slot still goes back), so a later request never reads any part
  of an earlier answer.
- Interim answers (1xx: `100 Continue`, `102`, `103 Early Hints`, any number) are read and skipped; the
  answer is the first final one (2xx-5xx). An unasked `101 Switching Protocols` is refused. The bytes
  before the final answer's body are limited (MAX_HEAD), and so are each line (MAX_LINE) and the header
  lines of each answer (MAX_HEADERS, http.client's limits).
- Framing is llhttp's strict reading of RFC 9112 6.3: chunked, else Content-Length, else the end of the
  connection; no body for HEAD, 1xx, 204 and 304. Refused, never guessed at: a Content-Length that is
  repeated (even with the same value), a list, negative or not a number; Content-Length together with
  Transfer-Encoding; a transfer coding other than chunked; a malformed chunk; a header line without a
  colon or with space before it; a bare LF ending a line. A Content-Encoding other than identity is
  refused too (the request asks for identity).
- Obsolete line folding (a header line starting with a space or tab after a header line, RFC 9112 5.2) is
  unfolded as that section requires of a user agent: each fold (CRLF followed by spaces or tabs) becomes one
  space before llhttp reads the head, so the continuation belongs to the field it continues. A folded
  ` Content-Length: 2` is therefore part of the previous field's value: it can neither frame the body nor
  cut it short. A line starting with whitespace right after the status line continues no field and is
  refused (RFC 9112 2.2 lets a recipient reject it). Only heads are unfolded (interim and final, each once
  whole); the body is fed as received.
- A failure raises what urllib3's `urlopen` (without retries) and `HTTPResponse.data` raise for it, with
  the same text: `ProtocolError('Connection aborted.', RemoteDisconnected(...))` for a connection closed
  before the answer, `ReadTimeoutError` for a timeout, `NewConnectionError`, `SSLError`, `Connection
  broken: IncompleteRead(...)` for a body cut short or malformed, http.client's `BadStatusLine`,
  `LineTooLong` and `UnknownProtocol` for what http.client refused. The messages reach /bind's `Error`
  and the BindingFailed and FilteringFailed events (app.k8s.errors.from_exception), which therefore do
  not change. An answer refused for a reason http.client did not have says llhttp's reason.
"""

from __future__ import annotations

import errno
import re
import socket
from collections.abc import Callable
from http.client import (
    BadStatusLine,
    HTTPException,
    IncompleteRead,
    LineTooLong,
    RemoteDisconnected,
    UnknownProtocol,
)
from ssl import CertificateError
from ssl import SSLError as BaseSSLError
from typing import NoReturn, cast

import httptools
from urllib3 import HTTPConnectionPool
from urllib3.connection import HTTPConnection
from urllib3.exceptions import ProtocolError, ReadTimeoutError, SSLError

MAX_LINE = 65536  # bytes of a status or header line (http.client's limit)
MAX_HEADERS = 100  # header lines of an answer, the blank line included (http.client's limit)
MAX_HEAD = 1 << 20  # bytes before the final answer's body (interim answers included)
READ_SIZE = 65536  # bytes asked of the socket per read
FIRST_BYTES = 512  # bytes of a refused status line that its error shows
STATUS_LINE = re.compile(rb"HTTP/[0-9]\.[0-9] [0-9]{3}(?: [^\r\n]*)?\r?")
HEAD_END = re.compile(rb"\r?\n\r?\n")  # a bare LF is found too, for llhttp to refuse
FOLD = re.compile(rb"\r\n[ \t]+")  # obs-fold (RFC 9112 5.2)


class Answer:
    """The status line's code and reason, and the whole body."""

    __slots__ = ("body", "reason", "status")

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        self.status, self.reason, self.body = status, reason, body


def request_head(method: str, target: str, host: bytes, headers: bytes, length: int | None) -> bytes:
    """The request line and headers as urllib3 writes them: `Host` and `Accept-Encoding` first (http.client's
    `putrequest`), `Content-Length` when there is a body, then the caller's (`headers`: encoded lines)."""
    size = b"" if length is None else b"Content-Length: %d\r\n" % length
    return b"%s %s HTTP/1.1\r\nHost: %s\r\nAccept-Encoding: identity\r\n%s%s\r\n" % (
        method.encode("ascii"),
        target.encode("ascii"),
        host,
        size,
        headers,
    )


def header_lines(headers: dict[str, str]) -> bytes:
    """`Name: value` lines (latin-1, as http.client encodes them); a value with a line break is refused,
    as http.client refuses it."""
    lines = []
    for name, value in headers.items():
        if any(c in name or c in value for c in "\r\n") or not name or ":" in name:
            raise ValueError(f"invalid header {name!r}")
        lines.append(f"{name}: {value}\r\n".encode("latin-1"))
    return b"".join(lines)


def host_header(pool: HTTPConnectionPool) -> bytes:
    """The `Host` value http.client sends: the port only when it is not the scheme's default."""
    try:
        host = pool.host.encode("ascii")
    except UnicodeEncodeError:
        host = pool.host.encode("idna")
    if b":" in host:  # an IPv6 address
        host = b"[" + host + b"]"
    default = 443 if pool.scheme == "https" else 80
    return host if pool.port in (None, default) else b"%s:%d" % (host, pool.port)


def send(
    pool: HTTPConnectionPool,
    head: bytes,
    body: bytes | None,
    *,
    connect_timeout: float,
    read_timeout: float,
    method: str,
) -> Answer:
    """Write one request (`head`: `request_head`, then `body`) on a pooled connection; read the answer.
    Timeouts as urllib3 applies them: the connect timeout to connecting and sending, the read timeout to
    each read of the answer."""
    conn = cast(HTTPConnection, pool._get_conn())  # a dropped keep-alive connection comes back closed
    reusable = False
    try:
        try:
            sock = _connect(pool, conn, connect_timeout)
            _write(sock, head + body if body else head)
            sock.settimeout(read_timeout)
            answer, reusable = receive(sock.recv, pool, read_timeout, head_only=method == "HEAD")
        except (OSError, HTTPException) as exc:  # urllib3's urlopen
            if isinstance(exc, BaseSSLError | CertificateError):
                raise SSLError(exc) from exc
            raise ProtocolError("Connection aborted.", exc) from exc
    finally:
        if not reusable:
            conn.close()
        pool._put_conn(conn)
    return answer


def _connect(pool: HTTPConnectionPool, conn: HTTPConnection, timeout: float) -> socket.socket:
    """Open the connection if it is closed, as urllib3 does (TLS as the client is configured)."""
    conn.timeout = timeout
    try:
        try:
            pool._validate_conn(conn)  # HTTPS: connects when the connection is closed
            if conn.is_closed:  # plain HTTP connects here
                conn.connect()
        except (TimeoutError, BaseSSLError) as exc:
            pool._raise_timeout(err=exc, url="", timeout_value=conn.timeout)
            raise
    except (BaseSSLError, CertificateError) as exc:
        raise SSLError(exc) from exc
    sock = conn.sock
    if sock is None:
        raise ProtocolError("Connection aborted.", RemoteDisconnected("the connection could not be opened"))
    sock.settimeout(timeout)  # a reused connection still has the previous answer's read timeout
    return sock


def _write(sock: socket.socket, data: bytes) -> None:
    """Send the request; a connection the server already closed is not an error yet (urllib3 then reads
    what answer there is: the server may legitimately answer and close)."""
    try:
        sock.sendall(data)
    except BrokenPipeError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
            raise


def receive(
    recv: Callable[[int], bytes], pool: HTTPConnectionPool, read_timeout: float, *, head_only: bool = False
) -> tuple[Answer, bool]:
    """Read one whole answer with `recv` (a socket's), interim 1xx answers skipped; the answer, and whether
    the connection may carry another request. Errors as urllib3 raises them: before the final answer's head
    is complete as `urlopen` (timeouts through the pool), after it as `HTTPResponse.data`."""
    reader = _Reader(head_only)
    heads = _Heads(reader)
    head_bytes = 0
    while True:
        try:
            data = recv(READ_SIZE)
        except (BaseSSLError, OSError) as exc:
            if not reader.final:  # urllib3's _make_request around getresponse()
                pool._raise_timeout(err=exc, url="", timeout_value=read_timeout)
                raise
            _body_failure(pool, exc)
        if not data:
            heads.flush()
            return reader.at_end(), False
        try:
            heads.feed(data)
        except (HTTPException, OSError) as exc:
            if not reader.final:
                raise
            raise ProtocolError(f"Connection broken: {exc!r}", exc) from exc
        if reader.complete:
            return Answer(reader.status, reader.reason, b"".join(reader.parts)), reader.keep
        if not reader.final:
            head_bytes += len(data)
            if head_bytes > MAX_HEAD:
                raise HTTPException(f"the answer's head is longer than {MAX_HEAD} bytes")


def _body_failure(pool: HTTPConnectionPool, exc: OSError) -> NoReturn:
    """What urllib3's `HTTPResponse.data` raises for a failed read of the body."""
    if isinstance(exc, TimeoutError):
        raise ReadTimeoutError(pool, None, "Read timed out.") from exc
    if isinstance(exc, BaseSSLError):
        if "read operation timed out" not in str(exc):
            raise SSLError(exc) from exc
        raise ReadTimeoutError(pool, None, "Read timed out.") from exc
    raise ProtocolError(f"Connection broken: {exc!r}", exc) from exc


class _Heads:
    """Hands the answer to the reader with each head unfolded (RFC 9112 5.2): until the final answer's head
    is read, bytes are kept until a head is whole; then that head, its folds replaced by a space, and what
    follows go to the reader. Afterwards (the body) bytes go through as received."""

    __slots__ = ("pending", "reader")

    def __init__(self, reader: _Reader) -> None:
        self.reader, self.pending = reader, b""

    def feed(self, data: bytes) -> None:
        if self.reader.final and not self.pending:
            self.reader.feed(data)
            return
        searched = max(0, len(self.pending) - 3)  # a head's end may straddle the previous piece
        self.pending += data
        while not self.reader.final and not self.reader.complete:
            end = HEAD_END.search(self.pending, searched)
            if end is None:
                return
            head, self.pending = self.pending[: end.end()], self.pending[end.end() :]
            self.reader.feed(unfold(head))
            searched = 0
        rest, self.pending = self.pending, b""
        if rest and not self.reader.complete:
            self.reader.feed(rest)

    def flush(self) -> None:
        """The connection ended: what was kept (a head cut short) goes to the reader as it is."""
        rest, self.pending = self.pending, b""
        if rest:
            self.reader.feed(unfold(rest))


def unfold(head: bytes) -> bytes:
    """`head` with each obsolete line fold after the status line replaced by one space (RFC 9112 5.2: a user
    agent MUST replace each received obs-fold with one or more SP octets before interpreting the field)."""
    first = head.find(b"\n") + 1
    if first <= 0 or (b"\n " not in head and b"\n\t" not in head):
        return head
    return head[:first] + FOLD.sub(b" ", head[first:])


class _Reader:
    """llhttp's callbacks (through httptools) for one answer: the status, the framing and encoding headers,
    the body. llhttp frames the answer (Content-Length, chunked, or the end of the connection) and refuses
    what RFC 9112 calls invalid; what it leaves to its caller is decided here."""

    __slots__ = (
        "complete",
        "count",
        "final",
        "first",
        "framed",
        "head_only",
        "http11",
        "keep",
        "length",
        "parser",
        "parts",
        "reason",
        "status",
    )

    def __init__(self, head_only: bool) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.head_only = head_only
        self.complete = self.final = self.keep = self.framed = self.http11 = False
        self.first = b""  # the first bytes received: a refused status line's text
        self.status, self.reason, self.count, self.length = 0, "", 0, -1
        self.parts: list[bytes] = []

    def feed(self, data: bytes) -> None:
        if len(self.first) < FIRST_BYTES and b"\n" not in self.first:
            self.first = (self.first + data)[:FIRST_BYTES]
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if self.complete:  # stopped after the answer: surplus bytes (or a HEAD's head)
                return
            raise cast(Exception, exc.__context__) from None
        except httptools.HttpParserError as exc:
            if self.complete:  # the answer was whole; what followed it was not an answer
                self.keep = False
                return
            raise self._refused(exc) from None

    def _refused(self, exc: Exception) -> HTTPException:
        """An answer llhttp refuses: http.client's BadStatusLine for the status line, IncompleteRead with
        what was read for the body (urllib3's `Connection broken: IncompleteRead(...)`)."""
        if self.final:
            return IncompleteRead(b"".join(self.parts))
        line = self.first.split(b"\n", 1)[0]
        if not STATUS_LINE.fullmatch(line):
            return BadStatusLine(str(line, "iso-8859-1").rstrip("\r"))
        return HTTPException(f"invalid answer head: {exc}")

    def at_end(self) -> Answer:
        """The connection was closed: the answer if its body runs to the end, else the failure."""
        if not self.final:
            raise RemoteDisconnected("Remote end closed connection without response")
        body = b"".join(self.parts)
        if self.framed:  # by Content-Length or chunked: cut short
            missing = self.length - len(body) if self.length >= 0 else None
            error = IncompleteRead(body, missing)
            raise ProtocolError(f"Connection broken: {error!r}", error)
        return Answer(self.status, self.reason, body)

    def on_message_begin(self) -> None:
        if self.complete:
            self.keep = False  # a second answer to one request: the connection is out of step
            raise HTTPException("surplus answer")
        self.count, self.length, self.framed = 0, -1, False

    def on_status(self, reason: bytes) -> None:
        self.reason += str(reason, "iso-8859-1")
        if len(self.reason) > MAX_LINE:
            raise LineTooLong("status line")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.count += 1
        if self.count >= MAX_HEADERS:
            raise HTTPException(f"got more than {MAX_HEADERS} headers")
        if len(name) + len(value) > MAX_LINE:
            raise LineTooLong("header line")
        name = name.lower()
        if name == b"content-length":
            self.length, self.framed = int(value), True  # llhttp accepts one, of digits only
        elif name == b"transfer-encoding":
            if value.lower() != b"chunked":
                raise ProtocolError(f"unexpected Transfer-Encoding {value.decode('latin-1')!r}")
            self.framed = True
        elif name == b"content-encoding" and value.lower() != b"identity":
            raise ProtocolError(f"unexpected Content-Encoding {value.decode('latin-1')!r}")

    def on_headers_complete(self) -> None:
        version, status = self.parser.get_http_version(), self.parser.get_status_code()
        if not version.startswith("1."):
            raise UnknownProtocol(f"HTTP/{version}")
        if status == 101:
            raise HTTPException("101 Switching Protocols, and no upgrade was asked for")
        if status >= 200:
            self.status, self.final, self.http11 = status, True, version == "1.1"
            self.reason = self.reason.strip()
            if self.head_only:  # no body follows; llhttp cannot be told, so the reading stops here
                self.complete = True
                raise HTTPException("head only")
        else:
            self.reason = ""  # an interim answer (100 Continue, 103 Early Hints, ...): skipped

    def on_body(self, data: bytes) -> None:
        self.parts.append(data)

    def on_message_complete(self) -> None:
        if self.final:
            self.complete = True
            self.keep = self.http11 and self.parser.should_keep_alive() and not self.head_only
