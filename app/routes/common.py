"""Request helpers shared by the blueprints: the size cap, JSON decoding, the per-process context.

Bodies are read through the cap (HAMI_MAX_BODY_BYTES). The webhook's must also nest at most MAX_DEPTH
levels: orjson accepts 1024, but copying and diffing a few hundred levels (its deepcopy and JSON Patch)
exhausts Python's recursion limit, and no Kubernetes object nests beyond a few dozen; the extender verbs
never recurse into a body, so they skip that walk (1-2 ms for 5,000 NodeNames). `finish_body` reads what a
handler left of a body within the cap: Gunicorn drains at most 64 KiB of an unread body and otherwise drops
the kept-alive connection after answering, failing the client's next request on it.
"""

from __future__ import annotations

import contextlib
from typing import Any, cast

import orjson
from flask import Response, current_app, request

from app.context import Context

CONTEXT_KEY = "hami"
MAX_DEPTH = 100  # JSON nesting levels accepted in a webhook request body
BODY_BROKEN = "hami.body_broken"  # environ key: reading the body failed, do not try again


class BodyError(Exception):
    """The body is missing (`missing`), too large, or not JSON; the message says which."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing


def context() -> Context:
    return cast(Context, current_app.extensions[CONTEXT_KEY])


def json_body(limit: int, max_depth: int | None = None) -> Any:
    """The request body as JSON, read through a cap (HAMi reads through a 1 MiB LimitReader), nesting at
    most `max_depth` levels when given."""
    try:
        data = request.stream.read(limit + 1)
    except Exception as exc:  # the server's own errors: a stall (TimeoutError), broken chunked framing
        # (Gunicorn's ParseException, not an OSError), a disconnect; the app cannot name them all
        request.environ[BODY_BROKEN] = True
        raise BodyError(f"could not read the request body: {exc}") from None
    if not data:
        raise BodyError("Please send a request body", missing=True)
    if len(data) > limit:
        raise BodyError(f"request body larger than {limit} bytes")
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


def finish_body(response: Response) -> Response:
    """After a request: read (and drop) what the handler left of a body within the cap.

    A body over the cap, or one whose reading failed, is not read further: Gunicorn closes the connection
    (the hook `pre_request` makes it answer `Connection: close` for a declared length over the cap).
    """
    limit = context().settings.http.max_body_bytes
    if (request.content_length or 0) <= limit and not request.environ.get(BODY_BROKEN):
        budget = limit
        with contextlib.suppress(Exception):  # broken framing or a stall: Gunicorn closes the connection
            while budget > 0 and (chunk := request.stream.read(min(budget, 65536))):
                budget -= len(chunk)
    return response


def json_response(payload: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status=status, mimetype="application/json")


def text_response(text: str, status: int) -> Response:
    return Response(text, status=status, mimetype="text/plain")
