"""API failures as one exception type carrying the HTTP status and the server's message."""

from __future__ import annotations

import orjson
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError


class ApiError(Exception):
    """A failed API call: `status` 0 means no HTTP answer (connection refused, reset, timeout)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def refused(self) -> bool:
        """The server answered that it did not apply the request (a 4xx other than a 408 timeout)."""
        return 400 <= self.status < 500 and self.status != 408


def from_response(status: int, reason: str, body: bytes | str | None) -> ApiError:
    """A non-2xx answer; the reason and message are the server's Status fields when there are some."""
    message = f"{status} {reason}".strip()
    try:
        decoded = orjson.loads(body or b"")
        if isinstance(decoded, dict):
            reason = str(decoded.get("reason") or reason)
            message = str(decoded.get("message") or message)
    except (orjson.JSONDecodeError, TypeError):
        pass
    return ApiError(status, reason, message)


def from_exception(exc: BaseException) -> ApiError:
    """Translate client exceptions; the message is the server's Status message when there is one."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ApiException):
        return from_response(int(exc.status or 0), str(exc.reason or ""), exc.body)
    if isinstance(exc, HTTPError | OSError):
        return ApiError(0, "ConnectionError", f"{type(exc).__name__}: {exc}")
    raise exc
