"""One HTTP/1.1 request and its answer over a connection of the client's urllib3 pool, without http.client's
request and response objects.

Why it exists (issue 20): the extender makes about seven API calls per scheduled pod (the allocation PATCH,
the lock, the re-check's LIST, the bind-phase stamp, the Binding, two events), and urllib3's request path
spends most of each call's CPU in Python around a few hundred bytes: http.client assembles the request
header by header and parses the answer's headers with the `email` package, urllib3 wraps both. Here the
request is written in one piece and the answer is read with a few `readline`s (~0.2 ms of CPU less per
call, measured in docs/benchmarks.md).

What stays urllib3's: the pool and its connections — so TLS (CA, client certificate, hostname checks,
SNI), the connect timeout and the socket options are exactly the client configuration's, set up by
urllib3 when a connection is (re)opened (`_validate_conn`); a pooled connection the server closed is
detected and reopened by the pool (`_get_conn`). The request is the one urllib3 sends for the same call:
the same request line and headers (`Host`, `Accept-Encoding: identity`, `Content-Length` for a body, then
the caller's), so the API server sees no difference. No retries (the client is configured without them).

Invariants owned here:
- A connection goes back to the pool only after its answer was read completely and the server keeps it
  open; on any failure — a timeout, a reset, an answer this reader does not accept — it is closed
  (its slot still goes back), so a later request never reads the rest of an earlier answer.
- A failure raises what urllib3's `urlopen` (without retries) and `HTTPResponse.data` raise for it, with
  the same text: `ProtocolError('Connection aborted.', RemoteDisconnected(...))` for a connection closed
  before the answer, `ReadTimeoutError` for a timeout, `NewConnectionError`, `SSLError`, `Connection
  broken: IncompleteRead(...)` for a body cut short. The messages reach /bind's `Error` and the
  BindingFailed and FilteringFailed events (app.k8s.errors.from_exception), which therefore do not change.
- The answer is read as http.client and urllib3 read it: only `100 Continue` is skipped, a body is framed
  by chunked transfer coding, else Content-Length, else the end of the connection; no body for HEAD, 1xx,
  204 and 304. A Content-Encoding other than identity is refused (the request asks for identity).
"""

from __future__ import annotations

import errno
import socket
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
from typing import IO, cast

from urllib3 import HTTPConnectionPool
from urllib3.connection import HTTPConnection
from urllib3.exceptions import ProtocolError, ReadTimeoutError, SSLError

MAX_LINE = 65536  # bytes of a status or header line (http.client's limit)
MAX_HEADERS = 100  # header lines of an answer (http.client's limit)
NO_BODY = frozenset({204, 304})
HEX = b"0123456789abcdefABCDEF"


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
            with sock.makefile("rb") as stream:
                try:
                    version, status, reason, headers = read_head(stream)
                except (BaseSSLError, OSError) as exc:  # urllib3's _make_request around getresponse()
                    pool._raise_timeout(err=exc, url="", timeout_value=read_timeout)
                    raise
                answer, reusable = read_body(stream, pool, method, version, status, reason, headers)
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


def read_head(stream: IO[bytes]) -> tuple[int, int, str, dict[bytes, bytes]]:
    """The answer's HTTP version (10 or 11), status, reason and headers (names lower-cased, the first of
    repeated ones), skipping `100 Continue`; http.client's exceptions for what http.client refuses."""
    while True:
        line = stream.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise LineTooLong("status line")
        if not line:
            raise RemoteDisconnected("Remote end closed connection without response")
        text = str(line, "iso-8859-1")
        parts = text.split(None, 2)
        version = parts[0] if len(parts) >= 2 else ""
        if not version.startswith("HTTP/"):
            raise BadStatusLine(text)
        if not parts[1].isdigit() or not 100 <= int(parts[1]) <= 999:
            raise BadStatusLine(text)
        status, reason = int(parts[1]), (parts[2].strip() if len(parts) > 2 else "")
        headers = _headers(stream)
        if status != 100:
            break
    if version in ("HTTP/1.0", "HTTP/0.9"):
        return 10, status, reason, headers
    if not version.startswith("HTTP/1."):
        raise UnknownProtocol(version)
    return 11, status, reason, headers


def _headers(stream: IO[bytes]) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = {}
    for _ in range(MAX_HEADERS):
        line = stream.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise LineTooLong("header line")
        if line in (b"\r\n", b"\n", b""):
            return found
        name, colon, value = line.partition(b":")
        if colon:  # a line without one is a defect http.client's parser skips
            found.setdefault(name.strip().lower(), value.strip())
    raise HTTPException(f"got more than {MAX_HEADERS} headers")


def read_body(
    stream: IO[bytes],
    pool: HTTPConnectionPool,
    method: str,
    version: int,
    status: int,
    reason: str,
    headers: dict[bytes, bytes],
) -> tuple[Answer, bool]:
    """The whole answer, and whether the connection may carry another request; errors as urllib3's
    `HTTPResponse.data` raises them."""
    encoding = headers.get(b"content-encoding", b"identity").lower()
    if encoding != b"identity":
        raise ProtocolError(f"unexpected Content-Encoding {encoding.decode('latin-1')!r}")
    keep = version == 11 and b"close" not in headers.get(b"connection", b"").lower()
    chunked = headers.get(b"transfer-encoding", b"").lower() == b"chunked"
    length = _length(headers) if not chunked else None
    if method == "HEAD" or status in NO_BODY or 100 <= status < 200:
        return Answer(status, reason, b""), keep
    try:
        if chunked:
            data = _chunked(stream)
        elif length is None:  # the body runs to the end of the connection
            data, keep = stream.read(), False
        else:
            data = stream.read(length)
            if len(data) != length:
                raise IncompleteRead(data, length - len(data))
    except TimeoutError as exc:
        raise ReadTimeoutError(pool, None, "Read timed out.") from exc
    except BaseSSLError as exc:
        if "read operation timed out" not in str(exc):
            raise SSLError(exc) from exc
        raise ReadTimeoutError(pool, None, "Read timed out.") from exc
    except (HTTPException, OSError) as exc:
        raise ProtocolError(f"Connection broken: {exc!r}", exc) from exc
    return Answer(status, reason, data), keep


def _length(headers: dict[bytes, bytes]) -> int | None:
    """Content-Length as urllib3 reads it: None when absent, malformed or negative."""
    value = headers.get(b"content-length")
    if value is None:
        return None
    try:
        lengths = {int(part) for part in value.split(b",")}
    except ValueError:
        return None
    if len(lengths) != 1:
        raise ProtocolError(f"Content-Length contained multiple unmatching values ({value!r})")
    length = lengths.pop()
    return length if length >= 0 else None


def _chunked(stream: IO[bytes]) -> bytes:
    """A chunked body (extensions ignored, trailers read and dropped); a malformed or cut-short one raises
    http.client's IncompleteRead with what was read."""
    parts: list[bytes] = []
    while True:
        line = stream.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise LineTooLong("chunk size")
        size_field = line.split(b";", 1)[0].strip()
        if not size_field or size_field.strip(HEX):
            raise IncompleteRead(b"".join(parts))
        size = int(size_field, 16)
        if size == 0:
            while stream.readline(MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        chunk = stream.read(size)
        parts.append(chunk)
        if len(chunk) != size or stream.read(2) not in (b"\r\n",):
            raise IncompleteRead(b"".join(parts), size - len(chunk))
