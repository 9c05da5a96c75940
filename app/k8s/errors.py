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


def from_exception(exc: BaseException) -> ApiError:
    """Translate client exceptions; the message is the server's Status message when there is one."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        reason = str(exc.reason or "")
        message = f"{status} {reason}".strip()
        try:
            body = orjson.loads(exc.body or b"")
            if isinstance(body, dict):
                reason = str(body.get("reason") or reason)
                message = str(body.get("message") or message)
        except (orjson.JSONDecodeError, TypeError):
            pass
        return ApiError(status, reason, message)
    if isinstance(exc, HTTPError | OSError):
        return ApiError(0, "ConnectionError", f"{type(exc).__name__}: {exc}")
    raise exc
