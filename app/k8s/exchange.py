"""One HTTP/1.1 request and its answer over a connection of the client's urllib3 pool, without http.client.

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
- Failures raise OSError (socket, TLS, timeouts) or urllib3's ProtocolError (a malformed or truncated
  answer): both are "no HTTP answer" to app.k8s.errors.from_exception (status 0), as urllib3's were.
"""

from __future__ import annotations

from typing import IO, cast

from urllib3 import HTTPConnectionPool
from urllib3.connection import HTTPConnection
from urllib3.exceptions import ProtocolError

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
    """Write one request (`head`: `request_head`, then `body`) on a pooled connection; read the answer."""
    conn = cast(
        HTTPConnection, pool._get_conn()
    )  # a dropped keep-alive connection comes back closed: reopened below
    reusable = False
    try:
        conn.timeout = connect_timeout
        pool._validate_conn(conn)  # HTTPS: connects (TLS as configured) when the connection is closed
        if conn.is_closed:  # plain HTTP connects here
            conn.connect()
        sock = conn.sock
        if sock is None:
            raise ProtocolError("the connection could not be opened")
        sock.settimeout(read_timeout)
        sock.sendall(head + body if body else head)
        with sock.makefile("rb") as stream:
            answer, reusable = read_answer(stream, method)
    finally:
        if not reusable:
            conn.close()
        pool._put_conn(conn)
    return answer


def _line(stream: IO[bytes]) -> bytes:
    line = stream.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise ProtocolError("answer line too long")
    if not line:
        raise ProtocolError("the server closed the connection without an answer")
    return line


def _headers(stream: IO[bytes]) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = {}
    for _ in range(MAX_HEADERS + 1):
        line = _line(stream)
        if line in (b"\r\n", b"\n"):
            return found
        name, colon, value = line.partition(b":")
        if not colon:
            raise ProtocolError(f"malformed header line {line[:80]!r}")
        key = name.strip().lower()
        value = value.strip()
        found[key] = found[key] + b", " + value if key in found else value
    raise ProtocolError(f"more than {MAX_HEADERS} headers")


def read_answer(stream: IO[bytes], method: str) -> tuple[Answer, bool]:
    """The answer to one request from `stream`, and whether the connection may carry another request."""
    while True:
        version, _, rest = _line(stream).rstrip(b"\r\n").partition(b" ")
        code, _, reason = rest.partition(b" ")
        if not version.startswith(b"HTTP/") or len(code) != 3 or not code.isdigit():
            raise ProtocolError(f"malformed status line {version + b' ' + rest!r}"[:120])
        status = int(code)
        headers = _headers(stream)
        if status >= 200 or status == 101:
            break  # an interim 1xx answer (100 Continue) is followed by the real one
    encoding = headers.get(b"content-encoding", b"identity").lower()
    if encoding != b"identity":
        raise ProtocolError(f"unexpected Content-Encoding {encoding!r}")
    keep = version == b"HTTP/1.1" and b"close" not in headers.get(b"connection", b"").lower()
    if method == "HEAD" or status in NO_BODY or status < 200:
        return Answer(status, reason.decode("latin-1"), b""), keep
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        return Answer(status, reason.decode("latin-1"), _chunked(stream)), keep
    length = headers.get(b"content-length")
    if length is None:  # the body runs to the end of the connection
        return Answer(status, reason.decode("latin-1"), stream.read()), False
    if not length.isdigit():
        raise ProtocolError(f"malformed Content-Length {length!r}")
    return Answer(status, reason.decode("latin-1"), _exactly(stream, int(length))), keep


def _exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise ProtocolError(f"answer body cut short: {len(data)} of {size} bytes")
    return data


def _chunked(stream: IO[bytes]) -> bytes:
    parts: list[bytes] = []
    while True:
        size_field = _line(stream).split(b";", 1)[0].strip()
        if not size_field or size_field.strip(HEX):
            raise ProtocolError(f"malformed chunk size {size_field[:40]!r}")
        size = int(size_field, 16)
        if size == 0:
            _headers(stream)  # trailers, up to the blank line that ends the answer
            return b"".join(parts)
        parts.append(_exactly(stream, size))
        if _line(stream) not in (b"\r\n", b"\n"):
            raise ProtocolError("a chunk does not end with a line break")
