"""Gunicorn config for `python -m bench --control-plane real`: the service's own config plus one line per
request with its server-side duration, so /filter and the no-op floor (/bench/noop) are timed at the same
point and exactly (the service's histograms have coarse buckets and /bench/noop has none).

    gunicorn -c bench/gunicorn_timing.py wsgi:app      (HAMI_BENCH_TIMING_DIR=<dir>)

Everything of `config/gunicorn.conf.py` applies unchanged (executed here first), or of
`bench/gunicorn_profile.py` when HAMI_BENCH_PROFILE_DIR is set (pyinstrument per request: a profiled run's
figures are not results). The `pre_request`/`post_request` hooks run in the thread serving the request,
after Gunicorn parsed the request line and headers and until the response is written, so the duration
covers reading and decoding the body, the route and writing the answer — not the TLS handshake (kube-
scheduler keeps its connection alive). Each worker appends `<unix time>\t<path>\t<ms>` lines to
`<dir>/<pid>.tsv`, line-buffered, so the benchmark reads them per phase while the service keeps running.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

_TIMING_BASE = (
    Path(__file__).resolve().parent / "gunicorn_profile.py"
    if os.environ.get("HAMI_BENCH_PROFILE_DIR")
    else Path(__file__).resolve().parents[1] / "config" / "gunicorn.conf.py"
)
exec(compile(_TIMING_BASE.read_text(), str(_TIMING_BASE), "exec"))  # the real settings and hooks
_timing_hooks: dict[str, Any] = {name: globals().get(name) for name in ("pre_request", "post_request")}
_timing_local = threading.local()
_timing_lock = threading.Lock()
_timing_files: dict[int, Any] = {}


def _timing_file() -> Any:
    pid = os.getpid()
    with _timing_lock:
        if pid not in _timing_files:
            folder = Path(os.environ.get("HAMI_BENCH_TIMING_DIR") or ".")
            folder.mkdir(parents=True, exist_ok=True)
            _timing_files[pid] = (folder / f"{pid}.tsv").open("a", buffering=1, encoding="utf-8")
        return _timing_files[pid]


def pre_request(worker: Any, req: Any) -> None:
    _timing_local.started = time.perf_counter()
    if _timing_hooks["pre_request"] is not None:
        _timing_hooks["pre_request"](worker, req)


def post_request(worker: Any, req: Any, environ: Any, resp: Any) -> None:
    if _timing_hooks["post_request"] is not None:
        _timing_hooks["post_request"](worker, req, environ, resp)
    started = getattr(_timing_local, "started", None)
    if started is None:
        return
    millis = (time.perf_counter() - started) * 1000.0
    line = f"{time.time():.6f}\t{req.path}\t{millis:.3f}\n"
    handle = _timing_file()
    with _timing_lock:
        handle.write(line)
