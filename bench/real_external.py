"""`python -m bench --control-plane real --extender-url URL`: measure an extender this harness did not start.

Any HAMi-compatible extender (HAMi's own Go scheduler, another build of ours) is measured in exactly the
harness our service is: the same control plane, simulated nodes and kubelets, pod stream and
kube-scheduler configuration (the chart's, pointed at `URL`). The harness starts only the control plane,
the nodes and the driver; it prints the admin kubeconfig before the run, so the outside extender can be
started against it, or starts it itself with `--external-start CMD` (a shell command run with
KUBECONFIG set, stopped with its process group at the end). With `--webhook-url` (and `--webhook-ca`)
the chart's MutatingWebhookConfiguration points at the outside webhook, which then sets the pods'
scheduler name; without it the harness sets `--scheduler-name` on the pods itself.

The run waits until the extender is ready: `GET URL/readyz` answering 200, or any answer other than 200
and 503 for an extender without that route (HAMi's scheduler has none). Our service's no-op floor is
not available for an outside extender, so only the run without an extender and the extender's run are
measured (`bench.real.phases_of`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from bench import procs
from sim.cluster.realcluster import ChartSetup, start_external
from sim.cluster.spec import ExternalExtender
from sim.cluster.stack import DemoFailure, Stack, wait_until
from sim.kit.kube import pool_manager

PROCESS = "external"  # the name of what --external-start started, in the stack
NOT_READY = (200, 503)  # /readyz answers that mean "this extender has readiness": wait for the 200


def ready(url: str) -> bool:
    """The extender at `url` is ready (see the module docstring)."""
    http = pool_manager(1, insecure=True, timeout=2.0)
    try:
        status = http.request("GET", f"{url.rstrip('/')}/readyz", retries=False).status
    except Exception:  # not listening yet, or TLS not ready: keep waiting
        return False
    finally:
        http.clear()
    return status == 200 or status not in NOT_READY


def start(
    stack: Stack,
    setup: ChartSetup,
    external: ExternalExtender,
    command: str,
    wait: float,
    say: Callable[[str], None],
) -> None:
    """Start (or wait for) the outside extender, then register its webhook; kube-scheduler is each run's."""
    assert stack.control_plane is not None
    kubeconfig = stack.control_plane.kubeconfig
    say(f"  admin kubeconfig: {kubeconfig}")
    if command:
        process = stack.start(
            PROCESS, ["/bin/sh", "-c", command], {**os.environ, "KUBECONFIG": str(kubeconfig)}
        )
        process.term_group = True  # the shell does not pass SIGTERM on: the whole group gets it
        say(f"  started the outside extender: {command}")
    else:
        say(f"  waiting up to {wait:g}s for the outside extender at {external.url}")
    wait_until(f"the outside extender at {external.url}", lambda: ready(external.url), wait, stack, 0.5)
    if command:  # what it started too, so the report's children_left sees any it left behind
        started = stack.processes[PROCESS].pid
        stack.pids[PROCESS] = sorted({*stack.pids[PROCESS], *procs.descendants(started)})
    try:
        start_external(stack, setup, external, scheduler=False, qps=0)
    except DemoFailure as exc:
        raise DemoFailure(f"{exc} (outside extender at {external.url})") from None
