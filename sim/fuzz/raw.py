"""The fuzzer's raw-HTTP inputs: whole requests as bytes, for what an HTTP client library will not send.

Broken framing (a Content-Length longer than the body, invalid or duplicated Content-Lengths, a bad chunk
size, a chunked body over the size cap), HTTP/1.0, oversized header lines and header counts, `Expect:
100-continue`, non-ASCII request targets, a TLS hello on the plain port, random bytes. The fuzzer writes
them on a new connection, half-closes it and judges the status line, if any (sim.fuzz.run).
"""

from __future__ import annotations

import random
from collections.abc import Callable


def raw_request(rng: random.Random, path: str, data: bytes, max_body: int) -> bytes:
    """One raw request for `path`, built around the JSON body `data`."""
    cut = rng.randint(0, len(data))
    start = f"POST {path} HTTP/1.1\r\nHost: hami\r\nContent-Type: application/json\r\n"
    chunked = "Transfer-Encoding: chunked\r\n\r\n"
    big = b"[" + b"1," * (max_body // 2 + 50_000) + b"1]"
    bad_length = rng.choice(["-1", "abc", "1, 2", "1e3", " "])
    many_headers = "".join(f"X-{i}: {i}\r\n" for i in range(200))
    variants: list[Callable[[], bytes]] = [
        lambda: f"{start}Content-Length: {len(data) + 1000}\r\n\r\n".encode() + data[:cut],
        lambda: f"{start}Content-Length: {bad_length}\r\n\r\n".encode(),
        lambda: f"{start}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{{}}".encode(),
        lambda: f"{start}{chunked}zz\r\n{{}}\r\n0\r\n\r\n".encode(),
        lambda: f"{start}{chunked}".encode() + f"{len(big):x}\r\n".encode() + big + b"\r\n0\r\n\r\n",
        lambda: f"{start}{chunked}{len(data):x}\r\n".encode() + data + b"\r\n0\r\n\r\n",
        lambda: f"POST {path} HTTP/1.0\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data,
        lambda: f"{start}X-Long: {'a' * 10_000}\r\nContent-Length: 2\r\n\r\n{{}}".encode(),
        lambda: f"{start}{many_headers}Content-Length: 0\r\n\r\n".encode(),
        lambda: f"{start}Expect: 100-continue\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data,
        lambda: b"POST /filter?\xff\xfe%%%00 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        lambda: b"GET /" + b"a" * 8000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        lambda: b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + rng.randbytes(64),  # a TLS hello
        lambda: rng.randbytes(rng.randint(1, 300)),
    ]
    return rng.choice(variants)()
