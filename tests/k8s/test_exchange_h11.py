"""app/k8s/exchange.py against h11, a second HTTP/1.1 reader, over generated answers (hypothesis).

Generated: zero to three interim answers (100, 102, 103, with headers), then a final answer (HTTP/1.1 or
1.0, a status with or without a body, a reason, ordinary headers, `Connection: close` / `keep-alive` or
none) whose body is framed by Content-Length, chunked coding (random chunk sizes, extensions, trailers) or
the end of the connection; at most one defect; the bytes delivered in reads of a drawn size, then the end
of the connection. The relation:

- what the exchange accepts, h11 accepts, with the same status, reason and body;
- the exchange reuses a connection only where h11 would, and does wherever h11 would and nothing followed
  the answer;
- what h11 refuses, the exchange refuses;
- what h11 accepts and the exchange refuses carries one of the defects in STRICTER: where llhttp, and so
  the exchange, is stricter than h11 by choice (module docstring of app/k8s/exchange.py).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from http.client import HTTPException

import h11
import urllib3
from hypothesis import given, settings
from hypothesis import strategies as st
from urllib3.exceptions import HTTPError

from app.k8s import exchange

POOL = urllib3.HTTPConnectionPool("127.0.0.1", 1)
STRICTER = frozenset(
    {
        "content-length-repeated",  # identical repeated Content-Length: h11 takes it, llhttp refuses
        "content-length-and-chunked",  # h11 lets chunked win; RFC 9112 6.3: "ought to be handled as an error"
        "bare-lf",  # LF alone ending a head line: h11 accepts it (RFC 9112 2.2 MAY), llhttp refuses
        "odd-chunk-extension",  # h11 skips any text after ';', llhttp checks the extension's syntax
    }
)
DEFECTS = [
    *sorted(STRICTER),
    "fold",  # obsolete line folding: both replace each fold with a space (RFC 9112 5.2)
    "fold-content-length",
    "content-length-conflicting",
    "content-length-negative",
    "truncated",
    "surplus",
    "no-colon",
    "space-before-colon",
]

NAMES = st.from_regex(r"X-[A-Za-z0-9-]{1,10}", fullmatch=True)
VALUES = st.from_regex(r"[!-~]([ !-~]{0,20}[!-~])?", fullmatch=True)
HEADERS = st.lists(st.tuples(NAMES, VALUES), max_size=4)
REASONS = st.from_regex(r"([A-Za-z][A-Za-z ]{0,14}[A-Za-z])?", fullmatch=True)


@dataclass(frozen=True)
class Read:
    status: int
    reason: str
    body: bytes
    reusable: bool
    surplus: bool = False  # h11: bytes after the answer


def _head(version: str, status: int, reason: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"{version} {status} {reason}".rstrip(" ") if reason else f"{version} {status}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@st.composite
def chunked(draw: st.DrawFn, body: bytes, odd: bool) -> bytes:
    out, rest = b"", body
    while rest:
        size = draw(st.integers(1, len(rest)))
        extension = draw(st.sampled_from([b"", b";a=1", b';name="x y"', b";flag"]))
        out += b"%x%s\r\n%s\r\n" % (size, b";a b" if odd else extension, rest[:size])
        rest = rest[size:]
    trailers = draw(HEADERS)
    return out + b"0\r\n" + b"".join(f"{n}: {v}\r\n".encode() for n, v in trailers) + b"\r\n"


@st.composite
def answers(draw: st.DrawFn) -> tuple[bytes, str]:
    """The bytes of interim answers and a final one, and the defect put in (or "")."""
    out = b""
    for _ in range(draw(st.integers(0, 3))):
        out += _head("HTTP/1.1", draw(st.sampled_from([100, 102, 103])), draw(REASONS), draw(HEADERS))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0"]))
    status = draw(st.sampled_from([200, 201, 204, 304, 404, 409, 500]))
    headers = draw(HEADERS)
    connection = draw(st.sampled_from(["", "close", "keep-alive"]))
    if connection:
        headers.insert(draw(st.integers(0, len(headers))), ("Connection", connection))
    framing = draw(st.sampled_from(["length", "chunked", "close"]))
    body = draw(st.binary(max_size=120)) if status not in (204, 304) else b""
    defect = draw(st.sampled_from(["", "", "", *DEFECTS]))
    if defect.startswith("fold"):
        headers.append(("X-Folded", "a"))  # a field line for the fold to continue
    if defect == "odd-chunk-extension":
        framing, body = "chunked", body or b"x"
    length = str(len(body))
    if framing == "length" or defect.startswith("content-length"):
        headers.append(("Content-Length", length))
    if defect == "content-length-repeated":
        headers.append(("Content-Length", length))
    elif defect == "content-length-conflicting":
        headers.append(("Content-Length", str(len(body) + 1)))
    elif defect == "content-length-negative":
        headers[-1] = ("Content-Length", "-1")
    if framing == "chunked" or defect == "content-length-and-chunked":
        headers.append(("Transfer-Encoding", "chunked"))
        framing = "chunked"
    head = _head(version, status, draw(REASONS), headers)
    encoded = draw(chunked(body, defect == "odd-chunk-extension")) if framing == "chunked" else body
    first_line_end = head.index(b"\r\n") + 2
    if defect in ("fold", "fold-content-length"):
        cut = head.index(b"\r\n", first_line_end) + 2  # after the first header line
        fold = b" Content-Length: 0\r\n" if defect == "fold-content-length" else b"\tfolded value\r\n"
        head = head[:cut] + fold + head[cut:]
    elif defect == "bare-lf":
        head = head.replace(b"\r\n", b"\n")
    elif defect == "no-colon":
        head = head[:first_line_end] + b"broken\r\n" + head[first_line_end:]
    elif defect == "space-before-colon":
        head = head[:first_line_end] + b"X-Space : 1\r\n" + head[first_line_end:]
    out += head + encoded
    if defect == "truncated":
        out = out[: draw(st.integers(0, len(out) - 1))]
    elif defect == "surplus":
        out += draw(st.sampled_from([b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b"NEXT", b"\x00"]))
    return out, defect if defect in STRICTER else ""


def ours(raw: bytes, piece: int) -> Read | None:
    stream = io.BytesIO(raw)
    try:
        answer, reusable = exchange.receive(lambda n: stream.read(min(n, piece)), POOL, 1.0)
    except (HTTPException, HTTPError):
        return None
    return Read(answer.status, answer.reason, answer.body, reusable)


def theirs(raw: bytes) -> Read | None:
    """h11's reading of `raw` as the answer to a GET, the connection then closed."""
    connection = h11.Connection(h11.CLIENT)
    connection.send(h11.Request(method="GET", target="/", headers=[("Host", "api")]))
    connection.send(h11.EndOfMessage())
    connection.receive_data(raw)
    final, parts, closed = None, [], False
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError:
            return None
        if event is h11.NEED_DATA and not closed:
            connection.receive_data(b"")
            closed = True
        elif isinstance(event, h11.Response):
            final = event
        elif isinstance(event, h11.Data):
            parts.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage) and final is not None:
            done = connection.their_state is h11.DONE and connection.our_state is h11.DONE
            reusable = done and not closed  # closed: the body ran to the end of the connection
            reason = str(final.reason, "latin-1").strip()
            return Read(
                final.status_code, reason, b"".join(parts), reusable, bool(connection.trailing_data[0])
            )
        elif not isinstance(event, h11.InformationalResponse):
            return None  # the connection closed, or h11 wants more after the end


@settings(max_examples=400, deadline=None)
@given(answers(), st.sampled_from([1, 2, 7, 64, 1 << 20]))
def test_the_exchange_reads_what_h11_reads_and_refuses_what_h11_refuses(
    answer: tuple[bytes, str], piece: int
) -> None:
    raw, stricter = answer
    mine, reference = ours(raw, piece), theirs(raw)
    if mine is not None:
        assert reference is not None, "accepted an answer h11 refuses"
        assert (mine.status, mine.reason, mine.body) == (reference.status, reference.reason, reference.body)
        assert reference.reusable or not mine.reusable, "reused a connection h11 would close"
        assert mine.reusable or not reference.reusable or reference.surplus, "closed a sound connection"
    elif reference is not None:
        assert stricter, "refused an answer h11 reads, for no stricter rule"
