"""kube-scheduler's HTTP extender client (`k8s.io/kubernetes/pkg/scheduler/extender.go`), as the HAMi chart
configures it (reference §10.1): `urlPrefix`, `filterVerb: filter`, `bindVerb: bind`, `nodeCacheCapable`,
`httpTimeout` (30 s), `enableHTTPS` with `tlsConfig` (a CA, or `insecure: true`), `managedResources`.

Payloads use the Go field names of `k8s.io/kube-scheduler/extender/v1` (no JSON tags): `ExtenderArgs`
`{"Pod", "Nodes", "NodeNames"}` and `ExtenderBindingArgs` `{"PodName", "PodNamespace", "PodUID", "Node"}`.
A non-200 answer, a timeout or an undecodable body is an error, like `extender.send` treats it.
`url_prefix` may list several replicas separated by commas: calls then go through
`sim.kubescheduler.service.Service` (the Ready replica, connection refused when there is none).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import urllib3

from app.devices.ascend import CHART_CHIPS
from sim.kit import podutil
from sim.kit.kube import pool_manager, warnings_quiet
from sim.kubescheduler.service import NoEndpoints, Service

MANAGED_RESOURCES = (  # as the chart lists them (helm/hami-scheduler values: kubeScheduler.managedResources)
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpucores",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/priority",
    "cambricon.com/vmlu",  # HAMi's chart manages only the MLU count (vendors §3.3 #6)
    "hygon.com/dcunum",
    "hygon.com/dcumem",
    "hygon.com/dcucores",
    "mthreads.com/vgpu",  # only the count, as HAMi's chart
    "aws.amazon.com/neuron",  # AWS Neuron, AMD, Vastai, Biren: every name, as HAMi's chart (vendors §1.3)
    "aws.amazon.com/neuroncore",
    "amd.com/gpu",
    "amd.com/gpumem",
    "amd.com/gpucores",
    "vastaitech.com/va",
    "birentech.com/gpu",
    # Metax, Enflame, Kunlunxin, Iluvatar: every name, as HAMi's chart (vendors §1.3)
    "metax-tech.com/gpu",
    "metax-tech.com/sgpu",
    "metax-tech.com/vcore",
    "metax-tech.com/vmemory",
    "enflame.com/drs-gcu",
    "enflame.com/gcu-memory",
    "enflame.com/gcu-core",
    "enflame.com/gcu",
    "kunlunxin.com/xpu",
    "kunlunxin.com/vxpu",
    "kunlunxin.com/vxpu-memory",
    *(
        f"iluvatar.ai/{chip}{s}"
        for chip in ("MR-V100", "MR-V50", "BI-V150", "BI-V100")
        for s in ("-vgpu", ".vMem", ".vCore")
    ),
    *(name for c in CHART_CHIPS for name in (c.resource_name, c.resource_memory_name, c.resource_core_name)),
)


class ExtenderError(Exception):
    """The call failed (transport, timeout, HTTP status or body); the pod's scheduling attempt errors."""


@dataclass(frozen=True)
class ExtenderConfig:
    url_prefix: str
    filter_verb: str = "filter"
    bind_verb: str = "bind"
    node_cache_capable: bool = True
    http_timeout: float = 30.0
    ca_file: str = ""
    insecure: bool = False
    cert_file: str = ""  # tlsConfig.certFile/keyFile: a client certificate, when the extender requires one
    key_file: str = ""
    managed_resources: tuple[str, ...] = field(default=MANAGED_RESOURCES)


@dataclass(frozen=True)
class FilterAnswer:
    node_names: list[str]
    failed: dict[str, str]
    error: str
    millis: float


class Extender:
    def __init__(self, config: ExtenderConfig, pool_size: int = 32) -> None:
        self.config = config
        ca = Path(config.ca_file).read_bytes() if config.ca_file else None
        client = (config.cert_file, config.key_file) if config.cert_file else None
        self._pool = pool_manager(pool_size, ca, config.insecure, client_cert=client)
        self.service = Service([u for u in config.url_prefix.split(",") if u.strip()], self._pool)

    def close(self) -> None:
        self.service.close()
        self._pool.clear()

    def interested(self, pod: Mapping[str, Any]) -> bool:
        """IsInterested: some container (init or regular) names a managed resource."""
        for container in podutil.containers(pod, init=True) + podutil.containers(pod):
            resources = container.get("resources") or {}
            for section in ("limits", "requests"):
                values = resources.get(section) or {}
                if any(r in values for r in self.config.managed_resources):
                    return True
        return False

    def _send(self, verb: str, payload: Any) -> tuple[Any, float]:
        try:
            base = self.service.endpoint()
        except NoEndpoints as exc:
            raise ExtenderError(f"Post {verb}: {exc}") from None
        url = f"{base}/{verb}"
        started = time.perf_counter()
        try:
            with warnings_quiet():
                response = self._pool.request(
                    "POST",
                    url,
                    body=orjson.dumps(payload),
                    headers={"Content-Type": "application/json"},
                    timeout=urllib3.Timeout(total=self.config.http_timeout),
                )
        except urllib3.exceptions.HTTPError as exc:
            self.service.failed(base)
            raise ExtenderError(f"Post {url}: {exc}") from None
        millis = (time.perf_counter() - started) * 1000.0
        if response.status != 200:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, code {response.status}")
        try:
            return orjson.loads(response.data), millis
        except orjson.JSONDecodeError as exc:
            raise ExtenderError(f"decoding the {verb} answer: {exc}") from None

    def filter(
        self, pod: Mapping[str, Any], node_names: Sequence[str], nodes: Sequence[Any] = ()
    ) -> FilterAnswer:
        args: dict[str, Any] = {"Pod": pod, "Nodes": None, "NodeNames": list(node_names)}
        if not self.config.node_cache_capable:
            args = {"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}, "NodeNames": None}
        body, millis = self._send(self.config.filter_verb, args)
        if not isinstance(body, dict):
            raise ExtenderError("the filter answer is not an object")
        error = str(body.get("Error") or "")
        if self.config.node_cache_capable:
            names = [str(n) for n in body.get("NodeNames") or []]
        else:
            items = (body.get("Nodes") or {}).get("items") or []
            names = [podutil.name(n) for n in items if isinstance(n, dict)]
        failed = {**(body.get("FailedNodes") or {}), **(body.get("FailedAndUnresolvableNodes") or {})}
        return FilterAnswer(names, {str(k): str(v) for k, v in failed.items()}, error, millis)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> tuple[str, float]:
        """The bind answer's `Error` ("" on success) and the call's latency."""
        args = {"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node}
        body, millis = self._send(self.config.bind_verb, args)
        if not isinstance(body, dict):
            raise ExtenderError("the bind answer is not an object")
        return str(body.get("Error") or ""), millis
