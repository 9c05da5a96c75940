"""POST /bench/noop: the benchmark's floor — BENCHMARK ONLY, registered only when HAMI_BENCH_NOOP=1.

`python -m bench` sends the same ExtenderArgs bodies here as to /filter, through the same Gunicorn workers,
so the difference between the two latencies is the cost of the filter decision itself. The body is read
and decoded exactly as /filter does (the size cap, orjson, `ExtenderArgs.parse`) and the answer is a
constant-shaped ExtenderFilterResult (the first node name), so HTTP, WSGI, Flask, the request metrics and
the JSON work are all in the floor. Production never sets the variable, so the route never exists there.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from app.routes.common import BodyError, context, json_body, json_response, text_response
from app.routes.wire import ExtenderArgs, WireError, filter_result

blueprint = Blueprint("bench", __name__)


@blueprint.post("/bench/noop")
def noop() -> Response:
    ctx = context()
    try:
        args = ExtenderArgs.parse(json_body(ctx.settings.http.body_cap(request.path)))
    except BodyError as exc:
        if exc.missing:
            return text_response(exc.message, 400)
        return json_response(filter_result(error=exc.message))
    except WireError as exc:
        return json_response(filter_result(error=str(exc)))
    return json_response(filter_result(node_names=(args.node_names or [])[:1]))
