"""API errors as the real API server reports them.

Every failure path raises one exception type that carries a v1 ``Status``; the HTTP layer turns it into the
same JSON body, HTTP status and reason phrase kube-apiserver sends, so ``ApiException.status``/``.reason`` and
the ``reason`` field that client code switches on (``Conflict``, ``AlreadyExists``, ``Expired`` ...) behave as
in a real cluster. Message texts follow k8s.io/apimachinery/pkg/api/errors.
"""

from __future__ import annotations

from typing import Any

REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """A failed request: HTTP code, Status reason, message and the details the real server fills in."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        name: str = "",
        kind: str = "",
        group: str = "",
        retry_after: int | None = None,
        causes: tuple[dict[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.causes = causes
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else REASONS.get(code, "Unknown")
        self.name = name
        self.kind = kind
        self.group = group
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        """The v1 Status body."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [dict(c) for c in self.causes]
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        if details:
            body["details"] = details
        return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, f'{_qualified(plural, group)} "{name}" not found', name=name, kind=plural, group=group
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{_qualified(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        name=name,
        kind=plural,
        group=group,
    )


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        name=name,
        kind=plural,
        group=group,
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, name: str, cause: str, field: str = "") -> ApiError:
    """422 Invalid; with `field`, the cause is also listed in details.causes (FieldValueInvalid)."""
    causes = (
        ({"reason": "FieldValueInvalid", "message": cause.split(": ", 1)[-1], "field": field},)
        if field
        else ()
    )
    return ApiError(422, f'{kind} "{name}" is invalid: {cause}', name=name, kind=kind, causes=causes)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def expired(message: str) -> ApiError:
    return ApiError(410, message)


def page_not_found() -> ApiError:
    return ApiError(404, "the server could not find the requested resource")


def method_not_allowed() -> ApiError:
    return ApiError(405, "the server does not allow this method on the requested resource")
