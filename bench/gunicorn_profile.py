"""Gunicorn config for `python -m bench --profile`: the service's own config plus pyinstrument per request.

    gunicorn -c bench/gunicorn_profile.py wsgi:app      (HAMI_BENCH_PROFILE_DIR=<dir>)

Everything of `config/gunicorn.conf.py` applies unchanged (it is executed here first); on top, the
`pre_request`/`post_request` hooks, which Gunicorn's gthread worker runs in the thread serving the request,
wrap every request in a wall-clock pyinstrument profiler (after the service's own `pre_request`, which is
kept). At exit each worker writes, per path, the profile of its median-duration request ("one filter
call") and of ~50 requests spread over the duration range combined, to
`<dir>/<pid>-<path>-median.txt` and `-all.txt`. Profiling slows the service down: a profiled run's figures
are not benchmark results.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

_CONFIG = Path(__file__).resolve().parents[1] / "config" / "gunicorn.conf.py"
exec(compile(_CONFIG.read_text(), str(_CONFIG), "exec"))  # the real settings and hooks
_hooks: dict[str, Any] = {
    name: globals().get(name) for name in ("pre_request", "post_request", "worker_exit")
}

_local = threading.local()
_lock = threading.Lock()
_sessions: dict[str, list[Any]] = {}


def pre_request(worker: Any, req: Any) -> None:
    from pyinstrument import Profiler

    if _hooks["pre_request"] is not None:  # the service's own hook runs first, unchanged
        _hooks["pre_request"](worker, req)

    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()
    _local.profiler = profiler


def post_request(worker: Any, req: Any, environ: Any, resp: Any) -> None:
    if _hooks["post_request"] is not None:
        _hooks["post_request"](worker, req, environ, resp)
    profiler = getattr(_local, "profiler", None)
    if profiler is None:
        return
    _local.profiler = None
    session = profiler.stop()
    with _lock:
        _sessions.setdefault(str(req.path), []).append(session)


def worker_exit(server: Any, worker: Any) -> None:
    from pyinstrument.renderers import ConsoleRenderer
    from pyinstrument.session import Session

    if _hooks["worker_exit"] is not None:
        _hooks["worker_exit"](server, worker)
    folder = Path(os.environ.get("HAMI_BENCH_PROFILE_DIR") or ".")
    folder.mkdir(parents=True, exist_ok=True)
    renderer = ConsoleRenderer(unicode=False, color=False, show_all=False)
    with _lock:
        collected = {path: list(sessions) for path, sessions in _sessions.items()}
    for path, sessions in collected.items():
        if path not in ("/filter", "/bind", "/bench/noop", "/webhook"):
            continue
        name = path.strip("/").replace("/", "-")
        ordered = sorted(sessions, key=lambda s: s.duration)
        median = ordered[len(ordered) // 2]
        (folder / f"{worker.pid}-{name}-median.txt").write_text(renderer.render(median))
        sample = ordered[:: max(1, len(ordered) // 50)]  # combining thousands would outlast the stop
        combined = sample[0]
        for session in sample[1:]:
            combined = Session.combine(combined, session)
        (folder / f"{worker.pid}-{name}-all.txt").write_text(renderer.render(combined))
