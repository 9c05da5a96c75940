"""The optional ServiceMonitor and the headless metrics Service that publishes every replica."""

from __future__ import annotations

from typing import Any

# Top-level spec fields of the CRDs these objects use (cert-manager.io/v1, monitoring.coreos.com/v1); the
# custom resources have no schema in kubernetes-validate, so their shape is pinned here.
SERVICE_MONITOR_SPEC = {
    "selector",
    "namespaceSelector",
    "endpoints",
    "jobLabel",
    "targetLabels",
    "podTargetLabels",
}
ENDPOINT_FIELDS = {
    "port",
    "scheme",
    "path",
    "interval",
    "scrapeTimeout",
    "tlsConfig",
    "relabelings",
    "honorLabels",
    "params",
}
CERTIFICATE_SPEC = {
    "secretName", "commonName", "dnsNames", "ipAddresses", "duration", "renewBefore", "usages", "privateKey",
    "issuerRef", "isCA",
}  # fmt: skip


def test_not_rendered_by_default(render: Any) -> None:
    manifests = render()
    assert not manifests.has("ServiceMonitor")
    assert not manifests.has("Service", "hami-scheduler-metrics")


def test_service_monitor_scrapes_both_processes(render: Any) -> None:
    manifests = render("crds")
    monitor = manifests.one("ServiceMonitor", "hami-scheduler")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = monitor["spec"]
    assert set(spec) <= SERVICE_MONITOR_SPEC
    assert spec["namespaceSelector"] == {"matchNames": ["hami-system"]}
    extender, worker = spec["endpoints"]
    assert set(extender) <= ENDPOINT_FIELDS and set(worker) <= ENDPOINT_FIELDS
    assert (extender["port"], extender["scheme"], extender["path"]) == ("https", "https", "/metrics")
    assert extender["tlsConfig"] == {
        "serverName": "hami-scheduler-metrics.hami-system.svc",
        "ca": {"secret": {"name": "hami-scheduler-tls", "key": "ca.crt"}},
    }
    assert (worker["port"], worker["scheme"], worker["path"]) == ("worker-metrics", "http", "/metrics")
    # HAMi's gauges come from the worker's port only: the extender is asked without them.
    assert extender["params"] == {"hami_gauges": ["0"]} and "params" not in worker

    service = manifests.one("Service", "hami-scheduler-metrics")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True  # standbys are scraped too
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {
        "https": "https",
        "worker-metrics": "worker-metrics",
    }
    # Only the metrics Service carries the label the ServiceMonitor selects.
    assert [
        s["metadata"]["name"]
        for s in manifests.all("Service")
        if "hami.io/metrics" in s["metadata"]["labels"]
    ] == ["hami-scheduler-metrics"]


def test_insecure_scrape_is_opt_in(render: Any) -> None:
    monitor = render("crds", {"serviceMonitor.insecureSkipVerify": True}).one("ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["tlsConfig"] == {"insecureSkipVerify": True}


def test_certificate_fields_exist_in_cert_manager_v1(render: Any) -> None:
    for certificate in render("crds").all("Certificate"):
        assert certificate["apiVersion"] == "cert-manager.io/v1"
        assert set(certificate["spec"]) <= CERTIFICATE_SPEC, certificate["metadata"]["name"]
