"""API calls per scheduled pod in `python -m bench --control-plane real`, counted by kube-apiserver itself.

kube-apiserver counts every request it served in `apiserver_request_total{verb,group,resource,subresource,
code,...}` on its /metrics (readable by the harness's admin user). The benchmark scrapes it before and after
each run and reports the difference per scheduled pod, keyed `"VERB resource[.group][/subresource]"` as
kube-apiserver labels the request (`"POST pods/binding"`, `"PATCH nodes"`, `"LIST pods"`, `"WATCH pods"`,
`"POST events.events.k8s.io"`; a request outside the resource API by its path: `"GET /readyz"`).
Responses of any code are counted; `errors` has those with a code >= 400 (`"PATCH nodes 409"`).

The metric carries no client (no user agent, no user), so what the harness sends itself is counted on its
side: every request of the run's driver goes through a `CountingKube`, keyed the way kube-apiserver keys it,
and is subtracted (`harness`: the pod creations, the watch that sees the binds, the lists waiting for the
pods to run; the scrapes themselves are not in the metric). What remains, `per_pod`, is every other
client: kube-scheduler, our extender and registration worker, the simulated kubelets and HAMi device
plugin (`sim nodes`: the kubelets' pod status writes, and in the extender run the device plugin's Allocate
reads and writes — a real cluster's kubelets and device plugin send them too), and kube-apiserver's own
loopback requests (its identity lease, admission's lookups). `by_flow_schema` (API Priority and Fairness:
`apiserver_flowcontrol_dispatched_requests_total`, counted when a request is dispatched, the scrapes
included) splits the requests by who sent them, coarsely: the chart's ServiceAccount (kube-scheduler, our
service and worker: `service-accounts`), the device plugin's (`kube-system-service-accounts`), and the
admin harness with kube-apiserver itself (`exempt`).

kube-apiserver counts a request when it is answered, a WATCH therefore when it ends; LIST and WATCH
entries are mostly kube-scheduler's informers starting (each run has a fresh kube-scheduler), not per-pod
work.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from bench import summary
from sim.kit.kube import JSON, Kube, pool_manager

Obj = dict[str, Any]
Counts = dict[str, float]
REQUESTS = "apiserver_request_total"
DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
WANTED = (REQUESTS, DISPATCHED)


def resource_key(verb: str, group: str, resource: str, subresource: str) -> str:
    """`"VERB resource[.group][/subresource]"`; a non-resource request by its path (kube-apiserver puts a
    known path such as /readyz in `subresource`)."""
    if not resource:
        return f"{verb} {subresource or '(non-resource)'}"
    name = f"{resource}.{group}" if group else resource
    return f"{verb} {name}/{subresource}" if subresource else f"{verb} {name}"


def request_counts(scrape: summary.Scrape) -> tuple[Counts, Counts]:
    """(requests by key, requests answered with a code >= 400 by "key code") of one scrape."""
    counts: Counts = {}
    errors: Counts = {}
    for (name, labels), value in scrape.items():
        if name != REQUESTS:
            continue
        label = dict(labels)
        key = resource_key(
            label.get("verb", ""),
            label.get("group", ""),
            label.get("resource", ""),
            label.get("subresource", ""),
        )
        counts[key] = counts.get(key, 0.0) + value
        code = label.get("code", "")
        if code.isdigit() and int(code) >= 400:
            errors[f"{key} {code}"] = errors.get(f"{key} {code}", 0.0) + value
    return counts, errors


def flow_schema_counts(scrape: summary.Scrape) -> Counts:
    """Requests dispatched by API Priority and Fairness, by flow schema."""
    counts: Counts = {}
    for (name, labels), value in scrape.items():
        if name == DISPATCHED:
            schema = dict(labels).get("flow_schema", "")
            counts[schema] = counts.get(schema, 0.0) + value
    return counts


def difference(before: Mapping[str, float], after: Mapping[str, float]) -> Counts:
    """`after - before` per key, the keys that grew only (counters: a key absent before counted 0)."""
    grown = {k: v - before.get(k, 0.0) for k, v in after.items()}
    return {k: v for k, v in grown.items() if v > 0}


def per_pod(counts: Mapping[str, float], pods: int) -> Counts:
    """Each count divided by `pods`, largest first ({} without pods)."""
    if pods <= 0:
        return {}
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return {k: round(v / pods, 3) for k, v in ordered}


def view(before: summary.Scrape, after: summary.Scrape, harness: Mapping[str, float], pods: int) -> Obj:
    """A run's API requests from two scrapes of kube-apiserver around it, `harness` the driver's own
    requests (counted on its side) and `pods` the pods it scheduled."""
    (total_before, errors_before), (total_after, errors_after) = request_counts(before), request_counts(after)
    total = difference(total_before, total_after)
    others = difference(harness, total)  # total - harness, what grew beyond the driver's own
    return {
        "pods": pods,
        "per_pod": per_pod(others, pods),
        "per_pod_total": round(sum(others.values()) / pods, 3) if pods > 0 else 0.0,
        "harness_per_pod": per_pod(harness, pods),
        "all_clients": dict(sorted(total.items())),
        "harness": dict(sorted(harness.items())),
        "errors": dict(sorted(difference(errors_before, errors_after).items())),
        "by_flow_schema": per_pod(difference(flow_schema_counts(before), flow_schema_counts(after)), pods),
    }


def path_key(method: str, path: str, params: Mapping[str, Any] | None) -> str:
    """The key kube-apiserver's metric gives a request of `method` to `path` (see `resource_key`)."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"]:
        group, rest = parts[1], parts[3:]
    else:
        return f"{method} {path}"
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]  # namespaced: namespaces/<ns>/<resource>/...
    resource, name, sub = [*rest, "", "", ""][:3]
    verb = method
    if method == "GET" and not name:
        verb = "WATCH" if str((params or {}).get("watch", "")).lower() == "true" else "LIST"
    elif method == "DELETE" and not name:
        verb = "DELETECOLLECTION"
    return resource_key(verb, group, resource, sub)


class CountingKube(Kube):
    """The harness's API client for one run, counting its requests as kube-apiserver's metric keys them."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube.config, pool_size=8, timeout=kube.timeout)
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def note(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> Any:
        self.note(path_key(method, path, params))
        return super().request(method, path, body, params=params, content_type=content_type, timeout=timeout)

    def watch(
        self,
        path: str,
        resource_version: str,
        stop: threading.Event,
        timeout_seconds: int = 60,
        on_open: Callable[[Callable[[], None]], None] | None = None,
        **params: Any,
    ) -> Iterator[Obj]:
        self.note(path_key("GET", path, {"watch": "true"}))
        return super().watch(path, resource_version, stop, timeout_seconds, on_open, **params)

    def scrape(self) -> summary.Scrape:
        """kube-apiserver's counters now (GET /metrics as the admin user: `apiserver_request_total` does
        not count /metrics itself, API Priority and Fairness does, as `exempt`)."""
        http = pool_manager(1, self.config.ca_pem, self.config.insecure, timeout=60.0)
        headers = {"Authorization": f"Bearer {self.config.token}"} if self.config.token else {}
        try:
            response = http.request("GET", f"{self.config.server}/metrics", headers=headers)
        finally:
            http.clear()
        if response.status != 200:
            raise RuntimeError(f"GET {self.config.server}/metrics: HTTP {response.status}")
        return summary.parse_metrics(response.data.decode(), WANTED)

    def harness_counts(self) -> Counts:
        with self._lock:
            return {k: float(v) for k, v in self.counts.items()}
