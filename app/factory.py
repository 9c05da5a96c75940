"""The Flask app factory: settings, the per-process context, blueprints, metrics, error handling.

Called once in each Gunicorn worker after fork (no preload), so the API client, the ledger connection and
the caches it builds belong to that worker alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, Response
from werkzeug.exceptions import HTTPException

from app import logs
from app.context import Context
from app.filter.write import AllocationWriter
from app.k8s.client import connect, user_agent
from app.k8s.events import EventRecorder
from app.metrics import ALLOCATION_WRITE_SECONDS, ReplicaCollector, init_metrics
from app.routes import bench, debug, extender, health, webhook
from app.routes.common import CONTEXT_KEY, finish_body, guard_body, json_response
from app.state import gauges
from app.state.holdstore import Judge
from app.state.inventory import InventoryCache
from app.state.ledger import Ledger
from app.state.snapshot import Snapshot
from app.state.status import ReplicaStatus
from app.state.usage import UsageView
from config.settings import Settings, load_settings

logger = logging.getLogger(__name__)


def build_context(settings: Settings) -> Context:
    component = {"scheduler": "extender", "public": "webhook"}.get(settings.http.routes, "service")
    kube = connect(settings.kubeconfig, agent=user_agent(component, settings.leader.identity))
    ledger, events = (
        Ledger(settings.state_dir),
        EventRecorder(kube, settings.scheduler_name, settings.pod_name),
    )
    writer = None
    if settings.deferred_write:
        observe = ALLOCATION_WRITE_SECONDS.labels
        writer = AllocationWriter(
            kube, ledger, events, settings.events_enabled, observe=lambda o, s: observe(o).observe(s)
        )
    context = Context(
        settings=settings,
        kube=kube,
        ledger=ledger,
        inventory=InventoryCache(settings.state_dir),
        usage=UsageView(),
        events=events,
        writer=writer,
    )
    ledger.use_judge(Judge(context.node_devices, settings.vendors, context.clock))  # H1 on every write
    context.warm()  # before the worker accepts requests, so that no request pays for the first load
    return context


class _Flask(Flask):
    """Flask, asking once per function whether a view or hook is a coroutine function: Flask's
    `ensure_sync` asks `inspect` on every call, six times per request (issue 20); the answer never changes."""

    def __init__(self, import_name: str) -> None:
        super().__init__(import_name)
        self._synced: dict[Callable[..., Any], Callable[..., Any]] = {}

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        synced = self._synced.get(func)
        if synced is None:
            synced = self._synced[func] = super().ensure_sync(func)
        return synced


def create_app(settings: Settings | None = None, context: Context | None = None) -> Flask:
    settings = settings or load_settings()
    logs.setup(settings.log_level)
    ctx = context or build_context(settings)
    app = _Flask("hami-scheduler")
    app.extensions[CONTEXT_KEY] = ctx
    http = settings.http
    # Which routes this server has (HAMI_ROUTES, issue 11): kube-scheduler's verbs only where kube-scheduler
    # calls them (loopback or client certificates, checked in config.settings), the rest on the Service.
    app.register_blueprint(health.blueprint)
    if http.scheduler_verbs:
        app.register_blueprint(extender.blueprint)
        app.register_blueprint(debug.blueprint)
        if settings.bench_noop:  # benchmark-only floor route (python -m bench); never set in production
            app.register_blueprint(bench.blueprint)
    if http.public_routes:
        app.register_blueprint(webhook.blueprint)
    app.before_request(guard_body)
    app.after_request(finish_body)

    def read_state() -> tuple[Snapshot | None, UsageView, ReplicaStatus]:
        snapshot = ctx.refresh()
        return snapshot, ctx.usage, ctx.status()

    # File ages compare with the file's mtime, so they use the wall clock.
    state_dir, gauges_limit = settings.state_dir, gauges.max_age(settings.state_metrics_interval)
    init_metrics(
        app,
        ReplicaCollector(read_state, time.time, lambda: gauges.age(state_dir, time.time())),
        lambda: gauges.open_fresh(state_dir, time.time(), gauges_limit),
        expose=http.public_routes,
        also=http.extender_metrics_dir,
    )

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        return json_response({"Error": error.description or error.name}, error.code or 400)

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> Response:
        logger.exception("unexpected error")
        return json_response({"Error": f"internal error: {type(error).__name__}"}, 200)

    return app
