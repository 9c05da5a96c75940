"""`python -m workers.probe`: the registration worker's liveness check from inside its container.

Why it exists: the worker's plain-HTTP `/metrics` and `/healthz` listen only where scraping needs them
(issue 11): on 127.0.0.1 unless something scrapes the worker, where the kubelet's httpGet probe (which
connects to the pod IP) cannot reach them. The chart then runs this instead: GET `/healthz` on the
address of HAMI_WORKER_METRICS_BIND, exit 0 on 200 and 1 otherwise. It imports nothing of the worker,
so a probe costs a Python start-up and one local request.
"""

from __future__ import annotations

import os
import sys
import urllib.request

TIMEOUT = 3.0


def url(bind: str) -> str:
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}/healthz"


def main() -> int:
    target = url(os.environ.get("HAMI_WORKER_METRICS_BIND") or "127.0.0.1:9395")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(target, timeout=TIMEOUT) as response:
            if response.status == 200:
                return 0
            print(f"hami-worker probe: {target} answered {response.status}", file=sys.stderr)
    except OSError as exc:  # URLError and HTTPError (a 503 while the loop is stuck) are OSErrors
        print(f"hami-worker probe: {target}: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
