"""Building the API client from KUBECONFIG or the in-cluster service account, after fork, per process."""

from __future__ import annotations

from dataclasses import dataclass

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


def connect(kubeconfig: str = "", *, pool_size: int = 16) -> Kube:
    """KUBECONFIG (or ~/.kube/config) when present, else in-cluster configuration."""
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
    return Kube(api, client.CoreV1Api(api), client.CoordinationV1Api(api), client.EventsV1Api(api))
