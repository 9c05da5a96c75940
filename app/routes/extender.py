"""POST /filter, /bind and /preempt: kube-scheduler's extender verbs (reference §1.2, docs/preemption.md).

HTTP contract: no body -> 400 with a text message; anything else -> 200 with the result, errors in the
`Error` field (bad JSON, missing pod, a decision error). Never a 5xx: an unexpected exception is logged and
answered as an Error too.
"""

from __future__ import annotations

import logging
import time

from flask import Blueprint, Response, request

from app import decisions
from app.bind.outcome import BOUND_OK
from app.bind.usecase import bind_pod
from app.core import pods
from app.core.inventory import node_name
from app.filter.dra import filter_pod
from app.filter.outcome import FilterOutcome
from app.metrics import (
    BIND_PHASE_SECONDS,
    BIND_RESULTS,
    BIND_SECONDS,
    FILTER_DENIALS,
    FILTER_PHASE_SECONDS,
    FILTER_RESULTS,
    FILTER_SECONDS,
    GANG_PLANS,
    LOCK_CONTENTION,
    LOCK_TAKEOVERS,
    LOCK_WAIT,
    PREEMPT_RESULTS,
    observe_phases,
)
from app.preempt.extender import preempt_pod
from app.routes.common import BodyError, context, json_body, json_response, text_response
from app.routes.wire import (
    BindingArgs,
    ExtenderArgs,
    PreemptionArgs,
    WireError,
    binding_result,
    filter_result,
    preemption_result,
)

logger = logging.getLogger(__name__)
BAD_REQUEST, INTERNAL = "bad-request", "internal"  # bind reasons decided here (the rest: app.bind.usecase)
blueprint = Blueprint("extender", __name__)


def _chosen(outcome: FilterOutcome) -> str:
    names = outcome.node_names or [node_name(n) for n in outcome.nodes or ()]
    return names[0] if names else ""


@blueprint.post("/filter")
def filter_route() -> Response:
    started = time.perf_counter()
    ctx = context()
    try:
        args = ExtenderArgs.parse(json_body(ctx.settings.http.body_cap(request.path)))
    except BodyError as exc:
        if exc.missing:
            return text_response(exc.message, 400)
        FILTER_RESULTS.labels("error").inc()
        return json_response(filter_result(error=exc.message))
    except WireError as exc:
        FILTER_RESULTS.labels("error").inc()
        return json_response(filter_result(error=str(exc)))
    decoded = time.perf_counter() - started
    try:
        outcome = filter_pod(ctx, args.pod, args.node_names, args.nodes)
    except Exception as exc:  # the HTTP contract: never a 5xx
        logger.exception("filter failed unexpectedly")
        FILTER_RESULTS.labels("error").inc()
        return json_response(filter_result(error=f"internal error: {type(exc).__name__}: {exc}"))
    if outcome.error:
        result = "error"
    elif outcome.passthrough:
        result = "passthrough"
    else:
        result = "placed" if (outcome.node_names or outcome.nodes) else "unschedulable"
    FILTER_RESULTS.labels(result).inc()
    if outcome.denial:
        FILTER_DENIALS.labels(outcome.denial).inc()
    if outcome.gang:
        GANG_PLANS.labels(outcome.gang).inc()
    phases, seconds = {"decode": decoded, **outcome.phases}, time.perf_counter() - started
    observe_phases(FILTER_SECONDS, FILTER_PHASE_SECONDS, phases, seconds)
    decisions.filter_decision(
        ctx.settings.decision_log,
        args.pod,
        result=result,
        candidates=len(args.node_names if args.node_names is not None else args.nodes or ()),
        node=_chosen(outcome) if result == "placed" else "",
        score=outcome.score,
        devices=outcome.devices,
        reason=outcome.denial,
        failed={**(outcome.failed or {}), **(outcome.unresolvable or {})}
        if result == "unschedulable"
        else None,
        error=outcome.error,
        phases=phases,
        seconds=seconds,
    )
    return json_response(
        filter_result(
            node_names=outcome.node_names,
            nodes=outcome.nodes,
            failed=outcome.failed,
            unresolvable=outcome.unresolvable,
            error=outcome.error,
        )
    )


@blueprint.post("/bind")
def bind_route() -> Response:
    started = time.perf_counter()
    ctx = context()
    try:
        args = BindingArgs.parse(json_body(ctx.settings.http.body_cap(request.path)))
    except BodyError as exc:
        if exc.missing:
            return text_response(exc.message, 400)
        BIND_RESULTS.labels("error", BAD_REQUEST).inc()
        return json_response(binding_result(exc.message))
    except WireError as exc:
        BIND_RESULTS.labels("error", BAD_REQUEST).inc()
        return json_response(binding_result(str(exc)))
    if not args.pod_name or not args.node:
        BIND_RESULTS.labels("error", BAD_REQUEST).inc()
        return json_response(binding_result("extender binding args need PodName and Node"))
    try:
        outcome = bind_pod(ctx, args.pod_namespace or "default", args.pod_name, args.pod_uid, args.node)
    except Exception as exc:  # the HTTP contract: never a 5xx
        logger.exception("bind failed unexpectedly")
        BIND_RESULTS.labels("error", INTERNAL).inc()
        return json_response(binding_result(f"internal error: {type(exc).__name__}: {exc}"))
    BIND_RESULTS.labels("error" if outcome.error else "bound", outcome.reason).inc()
    if outcome.lock_contended:
        LOCK_CONTENTION.inc()
    if "lock" in outcome.phases:
        LOCK_WAIT.observe(outcome.lock_waited)
    if outcome.took_over:
        LOCK_TAKEOVERS.labels(outcome.took_over.split(" ")[0]).inc()
    seconds = time.perf_counter() - started
    observe_phases(BIND_SECONDS, BIND_PHASE_SECONDS, outcome.phases, seconds)
    decisions.bind_decision(
        ctx.settings.decision_log,
        namespace=args.pod_namespace or "default",
        name=args.pod_name,
        uid=args.pod_uid,
        node=args.node,
        reason=outcome.reason if outcome.error else BOUND_OK,
        error=outcome.error,
        lock_waited=outcome.lock_waited,
        took_over=outcome.took_over,
        phases=outcome.phases,
        seconds=seconds,
    )
    return json_response(binding_result(outcome.error))


@blueprint.post("/preempt")
def preempt_route() -> Response:
    """ExtenderPreemptionResult: per candidate node the victims' UIDs; no node at all (and an `Error`)
    when the request cannot be served, which makes kube-scheduler preempt nothing in this cycle."""
    ctx = context()
    try:
        args = PreemptionArgs.parse(json_body(ctx.settings.http.body_cap(request.path)))
    except BodyError as exc:
        if exc.missing:
            return text_response(exc.message, 400)
        PREEMPT_RESULTS.labels("error").inc()
        return json_response(preemption_result({}, exc.message))
    except WireError as exc:
        PREEMPT_RESULTS.labels("error").inc()
        return json_response(preemption_result({}, str(exc)))
    try:
        outcome = preempt_pod(ctx, args.pod, args.victims)
    except Exception as exc:  # the HTTP contract: never a 5xx
        logger.exception("preempt failed unexpectedly")
        PREEMPT_RESULTS.labels("error").inc()
        return json_response(preemption_result({}, f"internal error: {type(exc).__name__}: {exc}"))
    PREEMPT_RESULTS.labels("error" if outcome.error else ("victims" if outcome.victims else "none")).inc()
    logger.info(
        "preempt %s: %d of %d candidate nodes kept%s",
        f"{pods.namespace(args.pod)}/{pods.name(args.pod)}" if args.pod else "(no pod)",
        len(outcome.victims),
        len(args.victims),
        f"; dropped {outcome.dropped}"
        if outcome.dropped
        else (f"; {outcome.error}" if outcome.error else ""),
    )
    return json_response(preemption_result(outcome.victims, outcome.error))
