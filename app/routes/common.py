"""Request helpers shared by the blueprints: the size caps, JSON decoding, the per-process context.

Every route has a body cap sized to what its callers send (`HttpSettings.body_cap`, issue 11): /filter,
/preempt and /webhook HAMI_MAX_BODY_BYTES (4 MiB: the API server sends at most ~3 MiB, a 5,000-name filter
~200 KB), /bind and everything else 64 KiB. A declared length over the cap is refused before a byte is read;
the body is then read and dropped in small chunks (at most DRAIN_BYTES for DRAIN_SECONDS) so the client sees
the answer instead of a reset, and Gunicorn closes the connection (`pre_request`). A chunked body is read
through the cap. A body within the cap that holds more than MAX_CONTAINERS JSON objects and lists is refused
before it is parsed: parsing is what costs memory (a 16 MiB body of nested empty lists once took a worker
from 83 to 872 MiB), and no Kubernetes object comes near that count.

The webhook's bodies must also nest at most MAX_DEPTH levels: orjson accepts 1024, but copying and diffing
a few hundred levels (the pod's copy and JSON Patch on CREATE) exhausts Python's recursion limit, and no
Kubernetes object nests beyond a few dozen; the extender verbs never recurse into a body, so they skip that
walk (1-2 ms for 5,000 NodeNames), and so do the webhook's UPDATE and pods/binding reviews, which read
annotations only (app/routes/webhook.py). `finish_body` reads what a handler left of a body within the cap:
Gunicorn otherwise drops the kept-alive connection after answering, failing the client's next request on it.
Both hooks run on every request, so they return at once when there is nothing to do (issue 20): a request
without a body (no length or length 0, no Transfer-Encoding), a body a handler read whole (BODY_DONE), or
one whose reading failed (BODY_BROKEN).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, cast

import orjson
from flask import Response, current_app, request

from app.context import Context

JSON_ENDPOINTS = (
    "extender.filter_route",
    "extender.bind_route",
    "extender.preempt_route",
    "webhook.webhook",
    "bench.noop",
)
CONTEXT_KEY = "hami"
MAX_DEPTH = 100  # JSON nesting levels accepted in a webhook request body
MAX_CONTAINERS = 200_000  # JSON objects and lists accepted in one body (a large real pod has thousands)
BODY_BROKEN = "hami.body_broken"  # environ key: reading the body failed, do not try again
BODY_DONE = "hami.body_done"  # environ key: the body was read to its end, nothing is left to drain
CHUNK = 64 * 1024
DRAIN_BYTES = 64 * 1024 * 1024  # of a refused body, read and dropped so that the client sees the answer
DRAIN_SECONDS = 5.0


class BodyError(Exception):
    """The body is missing (`missing`), too large, or not JSON; the message says which."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing


def context() -> Context:
    return cast(Context, current_app.extensions[CONTEXT_KEY])


def too_large(limit: int) -> BodyError:
    return BodyError(f"request body larger than {limit} bytes")


def too_many() -> BodyError:
    return BodyError(f"invalid JSON: more than {MAX_CONTAINERS} objects and lists")


def _drop(budget: int) -> None:
    """Read and drop up to `budget` bytes of the body (for at most DRAIN_SECONDS), a chunk at a time, so
    that a client still sending a refused body reads the answer instead of a reset."""
    deadline = time.monotonic() + DRAIN_SECONDS
    with contextlib.suppress(Exception):  # a stall or a disconnect: Gunicorn closes the connection
        while budget > 0 and time.monotonic() < deadline:
            chunk = request.stream.read(min(budget, CHUNK))
            if not chunk:
                break
            budget -= len(chunk)


def refuse_declared(limit: int) -> bool:
    """Is the declared body over `limit`? Then it is dropped unread (within the drain budget) and the
    request is marked so that nothing reads it again."""
    declared = request.content_length
    if declared is None or declared <= limit:
        return False
    request.environ[BODY_BROKEN] = True
    if declared <= DRAIN_BYTES:
        _drop(declared)
    return True


def read_body(limit: int) -> bytes | bytearray:
    """The body, read through `limit`; raises BodyError when it is over the limit or cannot be read.

    Memory: a body of declared length is read into one buffer of that length; a chunked one as a list of
    chunks joined once it is complete, and dropped as soon as it passes the limit or MAX_CONTAINERS (the
    rest is read and dropped within the drain budget, never kept)."""
    if refuse_declared(limit):
        raise too_large(limit)
    try:
        declared = request.content_length
        if declared is not None:
            data = _read_exactly(declared)
            if len(data) == declared:
                request.environ[BODY_DONE] = True
            return data
        parts: list[bytes] = []
        size = containers = 0
        while size <= limit and containers <= MAX_CONTAINERS:
            chunk = request.stream.read(min(limit + 1 - size, CHUNK))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
            containers += chunk.count(b"[") + chunk.count(b"{")
    except Exception as exc:  # the server's own errors: a stall (TimeoutError), broken chunked framing
        # (Gunicorn's ParseException, not an OSError), a disconnect; the app cannot name them all
        request.environ[BODY_BROKEN] = True
        raise BodyError(f"could not read the request body: {exc}") from None
    if size > limit or containers > MAX_CONTAINERS:
        request.environ[BODY_BROKEN] = True
        parts.clear()
        _drop(DRAIN_BYTES)
        raise too_large(limit) if size > limit else too_many()
    request.environ[BODY_DONE] = True  # the loop ended at the body's end
    return b"".join(parts)


def _read_exactly(length: int) -> bytearray:
    """A body of declared `length` (within the cap), into one buffer; shorter when the client sent less."""
    data = bytearray(length)
    filled = 0
    with memoryview(data) as view:
        while filled < length and (chunk := request.stream.read(min(length - filled, CHUNK))):
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
    del data[filled:]
    return data


def json_body(limit: int, max_depth: int | None = None) -> Any:
    """The request body as JSON, read through a cap (HAMi reads through a 1 MiB LimitReader), holding at
    most MAX_CONTAINERS objects and lists, nesting at most `max_depth` levels when given."""
    data = read_body(limit)
    if not data:
        raise BodyError("Please send a request body", missing=True)
    if data.count(b"[") + data.count(b"{") > MAX_CONTAINERS:  # counts brackets in strings too: an upper bound
        raise too_many()
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"invalid JSON: {exc}") from None
    if max_depth is not None and nested_deeper(body, max_depth):
        raise BodyError(f"invalid JSON: nested deeper than {max_depth} levels")
    return body


def nested_deeper(value: Any, limit: int) -> bool:
    """Does the parsed JSON `value` nest objects and lists more than `limit` levels deep? (Iterative.)"""
    if not isinstance(value, (dict, list)):
        return False
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth >= limit:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def _bodiless(environ: dict[str, Any]) -> bool:
    """Does the request declare no body at all (no length or length 0, no Transfer-Encoding)?"""
    return environ.get("CONTENT_LENGTH") in (None, "", "0") and "HTTP_TRANSFER_ENCODING" not in environ


def guard_body() -> Response | None:
    """Before every request that is not a JSON verb (those read through `json_body` and answer in their
    own format): refuse a body over the route's cap with 413, reading and dropping it within the cap."""
    if _bodiless(request.environ) or request.endpoint in JSON_ENDPOINTS:
        return None
    limit = context().settings.http.body_cap(request.path)
    try:
        if refuse_declared(limit):
            return text_response(f"request body larger than {limit} bytes", 413)
        if request.content_length is None and request.headers.get("Transfer-Encoding"):
            read_body(limit)  # a chunked body: within the cap it is dropped here, over it refused
    except BodyError as exc:
        return text_response(exc.message, 413)
    return None


def finish_body(response: Response) -> Response:
    """After a request: read (and drop) what the handler left of a body within the cap.

    A body over the cap, or one whose reading failed, is not read further: Gunicorn closes the connection
    (the hook `pre_request` makes it answer `Connection: close` for a declared length over the cap).
    """
    environ = request.environ
    if _bodiless(environ) or environ.get(BODY_DONE) or environ.get(BODY_BROKEN):
        return response
    limit = context().settings.http.body_cap(request.path)
    if (request.content_length or 0) <= limit:
        budget = limit
        with contextlib.suppress(Exception):  # broken framing or a stall: Gunicorn closes the connection
            while budget > 0 and (chunk := request.stream.read(min(budget, CHUNK))):
                budget -= len(chunk)
    return response


def json_response(payload: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status=status, mimetype="application/json")


def text_response(text: str, status: int) -> Response:
    return Response(text, status=status, mimetype="text/plain")
