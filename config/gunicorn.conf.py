"""Gunicorn settings and hooks for the extender service (`gunicorn -c config/gunicorn.conf.py wsgi:app`).

Everything comes from the validated settings (HAMI_* environment): an invalid value stops the master at
start with one readable line and exit status 2. Workers are gthread (keep-alive matters: kube-scheduler and
the API server reuse connections). No application code runs in the master: each worker builds its own API
client, ledger connection and caches after fork (no preload). TLS is optional; Gunicorn builds a new
SSLContext per connection, so rotated certificate files are picked up without a restart.
"""

from __future__ import annotations

import logging
import os
import shutil
import ssl
import sys
from pathlib import Path
from typing import Any

from gunicorn.glogging import Logger

from config.envvars import SettingsError
from config.settings import load_settings

try:
    _settings = load_settings()
except SettingsError as exc:
    print(f"hami-scheduler: invalid setting: {exc}", file=sys.stderr)
    sys.exit(2)
if not (
    os.environ.get("KUBERNETES_SERVICE_HOST")
    or (_settings.kubeconfig and Path(_settings.kubeconfig).is_file())
    or Path("~/.kube/config").expanduser().is_file()
):
    print("hami-scheduler: no Kubernetes configuration: run in a cluster or set KUBECONFIG", file=sys.stderr)
    sys.exit(2)

bind = [_settings.http.bind]
workers = _settings.http.workers
threads = _settings.http.threads
worker_class = "gthread"
keepalive = 75
timeout = 60
graceful_timeout = 15
control_socket_disable = True
BODY_STALL_SECONDS = 10.0  # the longest pause allowed while a request body arrives (see pre_request)
accesslog = None
errorlog = "-"
loglevel = _settings.log_level.lower()
_JSON_HANDLER = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "app.logs.JsonFormatter"}},
    "handlers": {"console": _JSON_HANDLER, "error_console": _JSON_HANDLER},
    "root": {"level": _settings.log_level, "handlers": ["console"]},
    "loggers": {
        "gunicorn.error": {"handlers": ["error_console"], "level": _settings.log_level, "propagate": False},
        "gunicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
    },
}


class QuietAccessLogger(Logger):
    """Gunicorn's logger, skipping the access log's per-request work while its logger would drop the line.

    With `logconfig_dict` set, Gunicorn builds every request's access-log atoms (a dict of ~30 entries and
    a wrapper) and formats them, and only then does the `gunicorn.access` logger, which has no handler,
    drop them: a measurable share of a webhook call's CPU (issue 20)."""

    def access(self, resp: Any, req: Any, environ: Any, request_time: Any) -> None:
        if self.access_log.isEnabledFor(logging.INFO):
            super().access(resp, req, environ, request_time)


logger_class = QuietAccessLogger
if _settings.http.cert_file:
    certfile = _settings.http.cert_file
    keyfile = _settings.http.key_file
    if _settings.http.client_ca_file:
        ca_certs = _settings.http.client_ca_file
        cert_reqs = ssl.CERT_REQUIRED


def ssl_context(config: Any, default_ssl_context_factory: Any) -> ssl.SSLContext:
    context: ssl.SSLContext = default_ssl_context_factory()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def pre_request(worker: Any, req: Any) -> None:
    """Worker, before each request: bound the body's read stalls; close after a body over the cap.

    gthread reads a request body on a blocking socket without a timeout, so a client that stops sending
    (a slow POST) would hold a worker thread for good: with the timeout the app answers an Error instead
    (the read raises TimeoutError, an OSError). A declared body over HAMI_MAX_BODY_BYTES gets `Connection:
    close`: the app refuses it before reading it (app/routes/common.py), and Gunicorn would otherwise try to
    read the rest as the next request on a connection it had announced as kept alive. The cap is the
    route's (`HttpSettings.body_cap`).
    """
    worker.log.debug("%s %s", req.method, req.path)  # Gunicorn's default pre_request
    sock = getattr(req.unreader, "sock", None)
    if sock is not None:
        sock.settimeout(BODY_STALL_SECONDS)  # until the next request: Gunicorn sets it blocking again
    length = next((value for name, value in req.headers if name == "CONTENT-LENGTH"), "")
    if length.isdigit() and int(length) > _settings.http.body_cap(req.path):
        req.force_close()


def on_starting(server: Any) -> None:
    """Master, before forking: a clean Prometheus multiprocess directory and the ledger schema."""
    metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if metrics_dir:
        shutil.rmtree(metrics_dir, ignore_errors=True)
        Path(metrics_dir).mkdir(parents=True, exist_ok=True)
    _settings.state_dir.mkdir(parents=True, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    """Master: drop the dead worker's live-gauge files so /metrics stays correct."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
