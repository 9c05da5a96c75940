"""Building the API client from KUBECONFIG or the in-cluster service account, after fork, per process.

Each process says who it is in its User-Agent (`hami-scheduler-worker/0.1.0 (hami-scheduler-0)`), as
kube-scheduler and the kubelet do: the API server's audit log and its request metrics then tell the
registration worker from the extender and one replica from another (and the chaos storm aims its long
watch faults at the leader's worker alone, docs/chaos.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from kubernetes import client, config

DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds for ordinary calls


@dataclass(frozen=True)
class Kube:
    """The typed API groups this project uses, sharing one connection pool."""

    api: client.ApiClient
    core: client.CoreV1Api
    coordination: client.CoordinationV1Api
    events: client.EventsV1Api

    def close(self) -> None:
        self.api.close()


def user_agent(component: str, identity: str) -> str:
    """`hami-scheduler-<component>/<version> (<identity>)`."""
    try:
        version = metadata.version("hami-scheduler-py")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"hami-scheduler-{component}/{version} ({identity})"


def connect(kubeconfig: str = "", *, pool_size: int = 16, agent: str = "") -> Kube:
    """KUBECONFIG (or ~/.kube/config) when present, else in-cluster configuration; `agent` is the
    User-Agent (see `user_agent`; the client's default when empty)."""
    configuration = client.Configuration()
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException:
        config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = pool_size
    configuration.retries = False
    api = client.ApiClient(configuration)
    if agent:
        api.user_agent = agent
    return Kube(api, client.CoreV1Api(api), client.CoordinationV1Api(api), client.EventsV1Api(api))
