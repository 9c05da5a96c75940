"""POST /webhook: the mutating admission webhook (AdmissionReview v1 and v1beta1, reference §1.2).

As controller-runtime does for HAMi: a body that is not an AdmissionReview, or a Content-Type other than
application/json, is answered with HTTP 200 and `allowed: false, status.code: 400` in the review.
"""

from __future__ import annotations

import logging
import time

from flask import Blueprint, Response, request

from app import decisions
from app.admit.usecase import review
from app.core.review import V1, ReviewError, errored, parse_review, review_response
from app.metrics import WEBHOOK_RESULTS, WEBHOOK_SECONDS
from app.routes.common import MAX_DEPTH, BodyError, context, json_body, json_response, nested_deeper

logger = logging.getLogger(__name__)
blueprint = Blueprint("webhook", __name__)


def _bad_request(message: str, api_version: str = V1, uid: str = "") -> Response:
    WEBHOOK_RESULTS.labels("bad-request").inc()
    return json_response(review_response(errored(400, message), uid, api_version))


def _copied(body: object) -> bool:
    """Does the review reach the path that copies and diffs the pod (recursively)? Every body but a
    well-formed UPDATE or Binding request (either endpoint), which read annotations and labels only: their
    (larger: old and new pod) bodies are not walked for the nesting limit (app/routes/common.py)."""
    review = body.get("request") if isinstance(body, dict) else None
    if not isinstance(review, dict):
        return True
    kind = review.get("kind")
    binding = review.get("subResource") == "binding" or (
        isinstance(kind, dict) and kind.get("kind") == "Binding"
    )
    return review.get("operation") != "UPDATE" and not binding


@blueprint.post("/webhook")
def webhook() -> Response:
    started = time.perf_counter()
    ctx = context()
    content_type = (request.mimetype or "").lower()
    if content_type != "application/json":
        return _bad_request(f"contentType={request.content_type}, expected application/json")
    try:
        body = json_body(ctx.settings.http.body_cap(request.path))
        if _copied(body) and nested_deeper(body, MAX_DEPTH):
            raise BodyError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels")
        admission = parse_review(body)
    except BodyError as exc:
        return _bad_request("request body is empty" if exc.missing else exc.message)
    except ReviewError as exc:
        return _bad_request(str(exc))
    try:
        outcome = review(ctx, admission)
    except Exception as exc:  # never a 5xx, never a hang: answer and log
        logger.exception("admission failed unexpectedly")
        outcome = errored(500, f"internal error: {type(exc).__name__}: {exc}")
    result = "allowed" if outcome.allowed else "error" if outcome.code >= 500 else "denied"
    WEBHOOK_RESULTS.labels(result).inc()
    seconds = time.perf_counter() - started
    WEBHOOK_SECONDS.observe(seconds)
    decisions.admission_decision(
        ctx.settings.decision_log,
        request_uid=admission.uid,
        operation=admission.operation,
        pod=admission.pod,
        namespace=admission.namespace,
        allowed=outcome.allowed,
        code=outcome.code,
        reason=outcome.reason,
        message=outcome.message,
        patched=len(outcome.patch),
        seconds=seconds,
    )
    return json_response(review_response(outcome, admission.uid, admission.api_version))
