"""`python -m bench.outside --port P --workdir D`: our scheduler run as an *outside* extender, for
`python -m bench --control-plane real --extender-url ... --external-start ...`.

It is what a user measuring another HAMi-compatible extender does with theirs: started against the
harness's cluster (KUBECONFIG, the admin user), on its own, in one process group. Here that is our
registration worker and one Gunicorn serving every route (HAMI_ROUTES=all: kube-scheduler's verbs and the
webhook on one loopback port, no client certificate, leader election off), configured from the chart's
rendered Deployment environment and serving the chart's TLS certificate, whose CA it writes to
`D/tls/ca.crt` (for `--extender-ca` and `--webhook-ca`). The webhook protects the allocation annotations
from every user but the trusted ones (issue 11), so the user KUBECONFIG authenticates as (who writes them
here) joins the chart's trusted users. It runs in the foreground until SIGTERM or
SIGINT and then stops both processes. Bad arguments: one line and exit 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from sim.controlplane import chart
from sim.controlplane.base import RELEASE_NAMESPACE
from sim.emulator.testing import REPO_ROOT
from sim.kit.kube import Kube, KubeError
from sim.kit.processes import ChildProcess, start_process

PY = sys.executable
POD_NAME = "hami-scheduler-outside"


def own_user(kube: Kube) -> str:
    """The user KUBECONFIG authenticates as (a SelfSubjectReview): it writes the allocation annotations, so
    the webhook's annotation protection must trust it as it trusts the chart's ServiceAccount."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answer = kube.create("/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
    return str(answer["status"]["userInfo"]["username"])


def environment(
    objects: list[dict[str, object]], workdir: Path, port: int, workers: int, user: str
) -> dict[str, str]:
    """The chart's extender container environment, changed to one all-routes server on loopback that runs
    as `user`."""
    tls = chart.write_tls(objects, workdir / "tls")
    config = workdir / "device-config.yaml"
    config.write_text(chart.device_config(objects))
    env = {
        **os.environ,
        # one server in both containers' roles: the webhook's settings (its trusted users) and the extender's
        **chart.container_env(objects, "webhook", POD_NAME, RELEASE_NAMESPACE),
        **chart.container_env(objects, "extender", POD_NAME, RELEASE_NAMESPACE),
        "HAMI_BIND": f"127.0.0.1:{port}",
        "HAMI_ROUTES": "all",
        "HAMI_WORKERS": str(workers),
        "HAMI_LEADER_ELECT": "false",
        "HAMI_DEVICE_CONFIG_FILE": str(config),
        "HAMI_STATE_DIR": str(workdir / "state"),
        "HAMI_REGISTRATION_INTERVAL": "2s",
        "HAMI_WORKER_METRICS_BIND": "127.0.0.1:0",  # HAMi's gauges: not what the benchmark reads
        "HAMI_LOG_LEVEL": "WARNING",
        "HAMI_TLS_CERT_FILE": str(tls.cert),
        "HAMI_TLS_KEY_FILE": str(tls.key),
        "PROMETHEUS_MULTIPROC_DIR": str(workdir / "prometheus"),
    }
    env["HAMI_WEBHOOK_TRUSTED_USERS"] = ",".join(filter(None, [env.get("HAMI_WEBHOOK_TRUSTED_USERS"), user]))
    for name in ("HAMI_TLS_CLIENT_CA_FILE", "HAMI_EXTENDER_ADDRESS", "HAMI_EXTENDER_METRICS_DIR"):
        env.pop(name, None)
    Path(env["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
    return env


def serve(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        kube = Kube.from_kubeconfig(Path(os.environ["KUBECONFIG"]))
        env = environment(chart.render({}), workdir, args.port, args.workers, own_user(kube))
    except (chart.ChartError, KubeError, OSError, KeyError) as exc:
        print(f"bench.outside: could not prepare: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    gunicorn = [PY, "-m", "gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"]
    children: list[ChildProcess] = []
    try:
        # in this process's group: whoever stops the group (the benchmark harness) stops them too
        for argv, log in (([PY, "-m", "workers"], "worker.log"), (gunicorn, "service.log")):
            child = start_process(argv, log_path=workdir / log, env=env, cwd=REPO_ROOT, new_session=False)
            children.append(child)
        print(
            f"outside extender at https://127.0.0.1:{args.port} (CA {workdir / 'tls' / 'ca.crt'})", flush=True
        )
        while not stop.wait(0.5):
            for child in children:
                if not child.alive():
                    print(f"bench.outside: pid {child.pid} exited with {child.returncode}", file=sys.stderr)
                    return 1
    finally:
        for child in children:
            child.stop(timeout=10.0)
    return 0


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.outside",
        description="Our scheduler as an outside extender for the benchmark (KUBECONFIG: the cluster).",
        epilog="example: python -m bench.outside --port 9443 --workdir /tmp/outside",
    )
    parser.add_argument("--port", type=int, required=True, help="loopback port for every route (HTTPS)")
    parser.add_argument("--workdir", required=True, help="TLS files, device config, state and logs")
    parser.add_argument("--workers", type=int, default=2, help="Gunicorn workers (default 2)")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"argument --port: {args.port} is not a TCP port")
    if "KUBECONFIG" not in os.environ:
        parser.error("KUBECONFIG is not set: the cluster to serve")
    return args


def main(argv: list[str] | None = None) -> int:
    return serve(parse(argv))


if __name__ == "__main__":
    sys.exit(main())
