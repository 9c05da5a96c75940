"""Request helpers shared by the blueprints: the size cap, JSON decoding, the per-process context."""

from __future__ import annotations

from typing import Any, cast

import orjson
from flask import Response, current_app, request

from app.context import Context

CONTEXT_KEY = "hami"


class BodyError(Exception):
    """The body is missing (`missing`), too large, or not JSON; the message says which."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing


def context() -> Context:
    return cast(Context, current_app.extensions[CONTEXT_KEY])


def json_body(limit: int) -> Any:
    """The request body as JSON, read through a cap (HAMi reads through a 1 MiB LimitReader)."""
    data = request.stream.read(limit + 1)
    if not data:
        raise BodyError("Please send a request body", missing=True)
    if len(data) > limit:
        raise BodyError(f"request body larger than {limit} bytes")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"invalid JSON: {exc}") from None


def json_response(payload: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status=status, mimetype="application/json")


def text_response(text: str, status: int) -> Response:
    return Response(text, status=status, mimetype="text/plain")
