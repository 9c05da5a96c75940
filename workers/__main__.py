"""`python -m workers`: the registration worker (one per replica, its own container).

Settings errors print one line on stderr and exit 2; SIGTERM/SIGINT stop every thread, write the last
status rows (leader=False, synced=False) and exit 0. Logs are JSON lines on stderr.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from types import FrameType

from app import logs
from app.k8s.client import connect, user_agent
from config.envvars import SettingsError
from config.settings import load_settings

logger = logging.getLogger("workers")


def main() -> int:
    # prometheus_client stores every metric of the process in multiprocess files as soon as this variable
    # exists (read when it is imported); the image sets it for Gunicorn. Our registry is plain: drop it
    # before workers.worker imports prometheus_client.
    for name in ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"):
        os.environ.pop(name, None)
    from workers.worker import Worker

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"hami-worker: {exc}", file=sys.stderr)
        return 2
    logs.setup(settings.log_level)
    logging.getLogger("leaderelection").setLevel(logging.WARNING)  # it logs every retry at INFO
    try:
        kube = connect(settings.kubeconfig, agent=user_agent("worker", settings.leader.identity))
    except Exception as exc:
        logger.error("cannot build the Kubernetes client", extra={"error": str(exc)})
        return 1
    try:
        try:
            worker = Worker(settings, kube)
        except (ValueError, OSError) as exc:  # HAMI_WORKER_METRICS_BIND unusable
            print(f"hami-worker: {exc}", file=sys.stderr)
            return 2

        def on_signal(signum: int, frame: FrameType | None) -> None:
            logger.info("stopping", extra={"signal": signal.Signals(signum).name})
            worker.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        logger.info(
            "registration worker starting",
            extra={
                "identity": settings.leader.identity,
                "leader_elect": settings.leader.enabled,
                "mode": settings.leader.mode,
                "state_dir": str(settings.state_dir),
            },
        )
        worker.run()
    finally:
        kube.close()
    logger.info("registration worker stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
