"""The environment the chart gives both processes, checked against config/settings.py (the only reader)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from config.settings import load_settings

REPO = Path(__file__).resolve().parents[2]
SETTINGS_SOURCE = (REPO / "config" / "settings.py").read_text(encoding="utf-8")
READ_BY_SETTINGS = set(re.findall(r'"(HAMI_[A-Z_]+)"', SETTINGS_SOURCE))
# Read by config/settings.py but deliberately not set by the chart (docs/install.md):
# HAMI_BENCH_NOOP registers the benchmark-only floor route (python -m bench), never wanted in a cluster.
# HAMI_FILTER_WRITE / HAMI_BIND_WRITE_WAIT: their defaults fit the chart (auto: deferred behind the client CA)
NOT_SET_BY_CHART = {"HAMI_BENCH_NOOP", "HAMI_FILTER_WRITE", "HAMI_BIND_WRITE_WAIT"}
# Set by the chart but read by a library, not by config/settings.py.
LIBRARY = {"PROMETHEUS_MULTIPROC_DIR"}
DOWNWARD = {"POD_NAME": ("fieldRef", "metadata.name"), "POD_NAMESPACE": ("fieldRef", "metadata.namespace")}
NODE = {"NODE_NAME": ("fieldRef", "spec.nodeName")}  # the worker's own node: the drain hand-over

COMMON = {
    "HAMI_SCHEDULER_NAME": "hami-scheduler",
    "HAMI_ADOPT_SCHEDULER_NAMES": "hami-scheduler",
    "HAMI_NODE_SCHEDULER_POLICY": "binpack",
    "HAMI_GPU_SCHEDULER_POLICY": "spread",
    "HAMI_FORCE_OVERWRITE_DEFAULT_SCHEDULER": "true",
    "HAMI_NODELOCK_EXPIRE": "5m",
    "HAMI_GANG_TTL": "15s",
    "HAMI_NODE_LABEL_SELECTOR": "",
    "HAMI_DEVICE_CONFIG_FILE": "/etc/hami/device-config.yaml",
    "HAMI_STATE_DIR": "/var/run/hami",
    "HAMI_LEADER_ELECT": "true",
    "HAMI_LEADER_ELECT_MODE": "follow",
    "HAMI_LEADER_ELECT_RESOURCE_NAME": "hami-scheduler",
    "HAMI_LEADER_ELECT_RESOURCE_NAMESPACE": "hami-system",
    "HAMI_LEASE_DURATION": "15s",
    "HAMI_RENEW_DEADLINE": "10s",
    "HAMI_RETRY_PERIOD": "2s",
    "HAMI_LOG_LEVEL": "INFO",
    "HAMI_EVENTS": "true",
    "HAMI_STATE_METRICS_INTERVAL": "10s",
    "HAMI_LOCK_SWEEP_INTERVAL": "30s",
    "HAMI_ENABLE_ASCEND": "false",  # devices.ascend.enabled (HAMi --enable-ascend)
    "HAMI_ENABLE_ILUVATAR": "false",
    **DOWNWARD,
}
EXTENDER_ONLY = {  # kube-scheduler's verbs, for kube-scheduler alone (issue 11)
    "HAMI_ROUTES": "scheduler",
    "HAMI_BIND": "127.0.0.1:8444",
    "HAMI_WORKERS": "2",
    "HAMI_THREADS": "4",
    "HAMI_TLS_CERT_FILE": "/etc/hami/tls/tls.crt",
    "HAMI_TLS_KEY_FILE": "/etc/hami/tls/tls.key",
    "HAMI_TLS_CLIENT_CA_FILE": "/etc/hami/kube-scheduler-client/ca.crt",
    "HAMI_MAX_BODY_BYTES": "4194304",
    "HAMI_FILTER_SYNC_WAIT": "10s",
    "HAMI_BIND_LOCK_WAIT": "10s",
    "HAMI_DECISION_LOG": "INFO",
    "PROMETHEUS_MULTIPROC_DIR": "/var/run/hami/metrics-extender",
}
WEBHOOK_ONLY = {  # the public server
    "HAMI_ROUTES": "public",
    "HAMI_BIND": "0.0.0.0:8443",
    "HAMI_WORKERS": "2",
    "HAMI_THREADS": "4",
    "HAMI_TLS_CERT_FILE": "/etc/hami/tls/tls.crt",
    "HAMI_TLS_KEY_FILE": "/etc/hami/tls/tls.key",
    "HAMI_MAX_BODY_BYTES": "4194304",
    "HAMI_DECISION_LOG": "INFO",
    "HAMI_WEBHOOK_TRUSTED_USERS": (
        "system:serviceaccount:hami-system:hami-scheduler,system:serviceaccount:kube-system:hami-device-plugin"
    ),
    "HAMI_EXTENDER_ADDRESS": "127.0.0.1:8444",
    "HAMI_EXTENDER_METRICS_DIR": "/var/run/hami/metrics-extender",
    "PROMETHEUS_MULTIPROC_DIR": "/var/run/hami/metrics",
}
WORKER_ONLY = {
    "HAMI_WORKER_METRICS_BIND": "127.0.0.1:9395",
    "HAMI_REGISTRATION_INTERVAL": "15s",
    "HAMI_INFLIGHT_TTL": "60s",
    "HAMI_SCHEDULER_ROLE_LABEL": "true",
    "HAMI_PUBLISH_CAPACITY": "false",
    "HAMI_LEGACY_METRICS": "false",
    **NODE,
    "PROMETHEUS_MULTIPROC_DIR": "/tmp",
}


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        pytest.param("extender", {**COMMON, **EXTENDER_ONLY}, id="extender"),
        pytest.param("webhook", {**COMMON, **WEBHOOK_ONLY}, id="webhook"),
        pytest.param("worker", {**COMMON, **WORKER_ONLY}, id="worker"),
    ],
)
def test_default_environment(render: Any, container: str, expected: dict[str, object]) -> None:
    assert render().env(container) == expected


def test_worker_metrics_stay_out_of_the_extenders_multiprocess_dir(render: Any) -> None:
    # Each Gunicorn has its own multiprocess dir (two containers' PIDs may coincide); the worker gets /tmp.
    manifests = render()
    dirs = [manifests.env(c)["PROMETHEUS_MULTIPROC_DIR"] for c in ("extender", "webhook", "worker")]
    assert dirs == ["/var/run/hami/metrics-extender", "/var/run/hami/metrics", "/tmp"]
    assert manifests.env("webhook")["HAMI_EXTENDER_METRICS_DIR"] == dirs[0]
    mounts = {m["mountPath"]: m["name"] for m in manifests.container("worker")["volumeMounts"]}
    assert mounts["/tmp"] == "worker-tmp"


def test_kube_scheduler_gets_no_hami_settings(render: Any) -> None:
    assert "env" not in render().container("kube-scheduler")


@pytest.mark.parametrize(
    ("value_set", "overrides", "variable", "value"),
    [
        pytest.param("acquire", {}, "HAMI_LEADER_ELECT_MODE", "acquire", id="acquire-mode"),
        pytest.param(
            "acquire", {}, "HAMI_LEADER_ELECT_RESOURCE_NAME", "hami-scheduler-extender", id="acquire-lease"
        ),
        pytest.param("acquire", {}, "HAMI_LEASE_DURATION", "20s", id="acquire-lease-duration"),
        pytest.param("ha", {}, "HAMI_LEADER_ELECT", "true", id="ha-elect"),
        pytest.param(
            "default", {"schedulerName": "gpu-sched"}, "HAMI_SCHEDULER_NAME", "gpu-sched", id="name"
        ),
        pytest.param(
            "default",
            {"adoptSchedulerNames": ["hami-scheduler", "vgpu.example"]},
            "HAMI_ADOPT_SCHEDULER_NAMES",
            "hami-scheduler,vgpu.example",
            id="adopted-names",
        ),
        pytest.param(
            "default", {"adoptSchedulerNames": []}, "HAMI_ADOPT_SCHEDULER_NAMES", "", id="adopt-none"
        ),
        pytest.param(
            "default",
            {"schedulerName": "gpu-sched"},
            "HAMI_LEADER_ELECT_RESOURCE_NAME",
            "gpu-sched",
            id="lease-name",
        ),
        pytest.param(
            "default",
            {"defaultSchedulerPolicy.gpuSchedulerPolicy": "binpack,topology-aware"},
            "HAMI_GPU_SCHEDULER_POLICY",
            "binpack,topology-aware",
            id="gpu-policy",
        ),
        pytest.param(
            "default",
            {"defaultSchedulerPolicy.nodeSchedulerPolicy": "spread"},
            "HAMI_NODE_SCHEDULER_POLICY",
            "spread",
            id="node-policy",
        ),
        pytest.param("default", {"nodeLockExpire": "90s"}, "HAMI_NODELOCK_EXPIRE", "90s", id="nodelock"),
        pytest.param(
            "default",
            {"nodeLabelSelector": {"gpu": "on", "pool": "a100"}},
            "HAMI_NODE_LABEL_SELECTOR",
            "gpu=on,pool=a100",
            id="node-labels",
        ),
        pytest.param(
            "default",
            {"forceOverwriteDefaultScheduler": False},
            "HAMI_FORCE_OVERWRITE_DEFAULT_SCHEDULER",
            "false",
            id="force-overwrite",
        ),
        pytest.param("default", {"events": False}, "HAMI_EVENTS", "false", id="events"),
        pytest.param("default", {"logLevel": "DEBUG"}, "HAMI_LOG_LEVEL", "DEBUG", id="log-level"),
        pytest.param(
            "default", {"leaderElection.enabled": False}, "HAMI_LEADER_ELECT", "false", id="no-election"
        ),
    ],
)
def test_common_setting_reaches_both_processes(
    render: Any, value_set: str, overrides: dict[str, object], variable: str, value: str
) -> None:
    manifests = render(value_set, overrides)
    for container in ("extender", "webhook", "worker"):
        assert manifests.env(container)[variable] == value, container


@pytest.mark.parametrize(
    ("overrides", "container", "variable", "value"),
    [
        pytest.param({"extender.port": 9443}, "webhook", "HAMI_BIND", "0.0.0.0:9443", id="bind"),
        pytest.param(
            {"extender.schedulerPort": 9444}, "extender", "HAMI_BIND", "127.0.0.1:9444", id="scheduler-bind"
        ),
        pytest.param(
            {"extender.schedulerPort": 9444},
            "webhook",
            "HAMI_EXTENDER_ADDRESS",
            "127.0.0.1:9444",
            id="extender-address",
        ),
        pytest.param(
            {"leaderElection.mode": "acquire"}, "extender", "HAMI_BIND", "0.0.0.0:8444", id="acquire-bind"
        ),
        pytest.param({"extender.public.workers": 3}, "webhook", "HAMI_WORKERS", "3", id="public-workers"),
        pytest.param({"extender.public.threads": 8}, "webhook", "HAMI_THREADS", "8", id="public-threads"),
        pytest.param({"extender.workers": 6}, "extender", "HAMI_WORKERS", "6", id="workers"),
        pytest.param({"extender.threads": 16}, "extender", "HAMI_THREADS", "16", id="threads"),
        pytest.param(
            {"extender.maxBodyBytes": 1048576}, "extender", "HAMI_MAX_BODY_BYTES", "1048576", id="body"
        ),
        pytest.param(
            {"extender.filterSyncWait": "3s"}, "extender", "HAMI_FILTER_SYNC_WAIT", "3s", id="sync-wait"
        ),
        pytest.param(
            {"extender.bindLockWait": "20s"}, "extender", "HAMI_BIND_LOCK_WAIT", "20s", id="lock-wait"
        ),
        pytest.param(
            {"worker.metricsPort": 9500}, "worker", "HAMI_WORKER_METRICS_BIND", "127.0.0.1:9500", id="metrics"
        ),
        pytest.param(
            {"worker.registrationInterval": "30s"},
            "worker",
            "HAMI_REGISTRATION_INTERVAL",
            "30s",
            id="interval",
        ),
        pytest.param({"worker.inflightTTL": "2m"}, "worker", "HAMI_INFLIGHT_TTL", "2m", id="inflight-ttl"),
        pytest.param(
            {"worker.schedulerRoleLabel": False},
            "worker",
            "HAMI_SCHEDULER_ROLE_LABEL",
            "false",
            id="role-label",
        ),
        pytest.param(
            {"worker.publishCapacity": True}, "worker", "HAMI_PUBLISH_CAPACITY", "true", id="publish-capacity"
        ),
        pytest.param(
            {
                "webhook.trustedUsers": ["system:serviceaccount:ops:auditor"],
                "webhook.devicePluginServiceAccount.name": "",
            },
            "webhook",
            "HAMI_WEBHOOK_TRUSTED_USERS",
            "system:serviceaccount:hami-system:hami-scheduler,system:serviceaccount:ops:auditor",
            id="trusted-users",
        ),
        pytest.param(
            {"webhook.devicePluginServiceAccount.namespace": ""},
            "webhook",
            "HAMI_WEBHOOK_TRUSTED_USERS",
            "system:serviceaccount:hami-system:hami-scheduler,system:serviceaccount:hami-system:hami-device-plugin",
            id="device-plugin-in-release-namespace",
        ),
    ],
)
def test_process_setting(
    render: Any, overrides: dict[str, object], container: str, variable: str, value: str
) -> None:
    assert render("default", overrides).env(container)[variable] == value


def test_extra_env_is_appended(render: Any) -> None:
    manifests = render(
        "default", {"extender.extraEnv": [{"name": "KUBECONFIG", "value": "/etc/kube/config"}]}
    )
    assert manifests.env("extender")["KUBECONFIG"] == "/etc/kube/config"
    assert manifests.env("webhook")["KUBECONFIG"] == "/etc/kube/config"
    assert "KUBECONFIG" not in manifests.env("worker")


def test_every_variable_the_chart_sets_is_read_by_settings(render: Any) -> None:
    for value_set in ("default", "ha", "acquire", "crds"):
        for container in ("extender", "webhook", "worker"):
            names = set(render(value_set).env(container))
            assert names - READ_BY_SETTINGS - set(DOWNWARD) - set(NODE) - LIBRARY == set(), (
                value_set,
                container,
            )


def test_every_setting_is_set_by_the_chart(render: Any) -> None:
    manifests = render()
    set_somewhere = set().union(*(manifests.env(c) for c in ("extender", "webhook", "worker")))
    assert READ_BY_SETTINGS - set_somewhere == NOT_SET_BY_CHART


@pytest.mark.parametrize("value_set", ["default", "ha", "acquire", "crds"])
@pytest.mark.parametrize("container", ["extender", "webhook", "worker"])
def test_settings_loader_accepts_the_rendered_environment(
    render: Any, tmp_path: Path, value_set: str, container: str
) -> None:
    """config.settings.load_settings (what both processes run first) accepts what the chart renders."""
    manifests = render(value_set)
    env = manifests.env(container)
    device_config = tmp_path / "device-config.yaml"
    device_config.write_text(
        manifests.one("ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"]
    )
    files = {"HAMI_DEVICE_CONFIG_FILE": device_config}
    for name in ("HAMI_TLS_CERT_FILE", "HAMI_TLS_KEY_FILE", "HAMI_TLS_CLIENT_CA_FILE"):
        if name in env:
            files[name] = tmp_path / Path(env[name]).name
            files[name].write_text("placeholder")
    resolved = {"POD_NAME": "hami-scheduler-7d9c-x2k4f", "POD_NAMESPACE": "hami-system"}
    for name, value in env.items():
        if isinstance(value, str):
            resolved[name] = str(files.get(name, value))
    settings = load_settings(resolved)
    assert settings.scheduler_name == "hami-scheduler"
    assert settings.leader.enabled is True
    assert settings.leader.resource_namespace == "hami-system"
    assert settings.leader.identity == "hami-scheduler-7d9c-x2k4f"
    assert settings.vendors, "the rendered device config yields the NVIDIA vendor"
    if container == "webhook":
        assert (settings.http.bind, settings.http.routes) == ("0.0.0.0:8443", "public")
        assert settings.http.cert_file.endswith("tls.crt")
        assert "system:serviceaccount:kube-system:hami-device-plugin" in settings.webhook_trusted_users
    if container == "extender":
        assert settings.http.routes == "scheduler" and settings.http.client_ca_file
        assert settings.http.bind.endswith(":8444")
        assert settings.deferred_write, "behind kube-scheduler's client certificate /filter defers its write"
