"""The Deployment: the four containers and their commands, probes, shared state, security, strategy."""

from __future__ import annotations

from typing import Any

import pytest

VALUE_SETS = ["default", "ha", "acquire", "crds"]


@pytest.mark.parametrize("value_set", VALUE_SETS)
@pytest.mark.parametrize(
    ("container", "command"),
    [
        pytest.param(
            "kube-scheduler",
            ["kube-scheduler", "--config=/etc/kubernetes/hami-scheduler/config.yaml", "--v=2"],
            id="kube-scheduler",
        ),
        pytest.param("extender", ["gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"], id="extender"),
        pytest.param("webhook", ["gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"], id="webhook"),
        pytest.param("worker", ["python", "-m", "workers"], id="worker"),
    ],
)
def test_containers_and_commands(render: Any, value_set: str, container: str, command: list[str]) -> None:
    manifests = render(value_set)
    names = [c["name"] for c in manifests.pod_spec["containers"]]
    assert names == ["kube-scheduler", "extender", "webhook", "worker"]
    spec = manifests.container(container)
    assert spec["command"] == command
    assert "args" not in spec
    if container != "kube-scheduler":
        assert spec["image"] == "hami-scheduler-py:0.1.0"
        assert spec["workingDir"] == "/app"


def test_kube_scheduler_image_follows_the_cluster_version(render: Any) -> None:
    assert render().container("kube-scheduler")["image"] == "registry.k8s.io/kube-scheduler:v1.35.0"
    pinned = render("default", {"kubeScheduler.image.tag": "v1.34.2"})
    assert pinned.container("kube-scheduler")["image"] == "registry.k8s.io/kube-scheduler:v1.34.2"


def test_image_digest_wins_over_tag(render: Any) -> None:
    digest = "sha256:" + "a" * 64
    manifests = render("default", {"image.digest": digest, "image.repository": "registry.example/hami"})
    for container in ("extender", "webhook", "worker"):
        assert manifests.container(container)["image"] == f"registry.example/hami@{digest}"


@pytest.mark.parametrize(
    ("container", "probe", "path", "port", "scheme"),
    [
        pytest.param("webhook", "livenessProbe", "/healthz", "https", "HTTPS", id="webhook-liveness"),
        pytest.param("webhook", "readinessProbe", "/readyz", "https", "HTTPS", id="webhook-readiness"),
        pytest.param("webhook", "startupProbe", "/healthz", "https", "HTTPS", id="webhook-startup"),
        pytest.param("worker", "livenessProbe", "/healthz", "worker-metrics", "HTTP", id="worker-liveness"),
        pytest.param("worker", "startupProbe", "/healthz", "worker-metrics", "HTTP", id="worker-startup"),
        pytest.param(
            "kube-scheduler", "livenessProbe", "/livez", "kube-sched", "HTTPS", id="kube-sched-liveness"
        ),
    ],
)
def test_probes(render: Any, container: str, probe: str, path: str, port: str, scheme: str) -> None:
    spec = render("ha", {"serviceMonitor.enabled": True}).container(container)
    assert spec[probe]["httpGet"] == {"path": path, "port": port, "scheme": scheme}
    assert spec[probe]["timeoutSeconds"] < spec[probe]["periodSeconds"]
    declared = {p["name"] for p in spec["ports"]}
    assert port in declared


@pytest.mark.parametrize(
    ("container", "probe"),
    [
        pytest.param("worker", "readinessProbe", id="worker-has-no-readiness"),
        pytest.param("kube-scheduler", "readinessProbe", id="kube-scheduler-has-no-readiness"),
        pytest.param("extender", "readinessProbe", id="extender-has-no-readiness"),
        pytest.param("extender", "livenessProbe", id="extender-has-no-liveness"),
    ],
)
def test_only_the_public_server_gates_readiness(render: Any, container: str, probe: str) -> None:
    # Pod readiness = the public server's /readyz (leader, synced, fresh heartbeat, the extender's verbs
    # accepting connections), nothing else. No kubelet probe reaches the extender's verbs (issue 11).
    assert probe not in render("ha").container(container)


@pytest.mark.parametrize(
    ("container", "port"),
    [
        pytest.param("webhook", 8443, id="webhook-https"),
        pytest.param("extender", 8444, id="extender-verbs"),
        pytest.param("kube-scheduler", 10259, id="kube-scheduler-secure-port"),
    ],
)
def test_container_ports(render: Any, container: str, port: int) -> None:
    assert [p["containerPort"] for p in render().container(container)["ports"]] == [port]


@pytest.mark.parametrize(
    ("overrides", "bind", "probe"),
    [
        pytest.param(
            {}, "127.0.0.1:9395", {"exec": {"command": ["python", "-m", "workers.probe"]}}, id="loopback"
        ),
        pytest.param(
            {"serviceMonitor.enabled": True},
            "0.0.0.0:9395",
            {"httpGet": {"path": "/healthz", "port": "worker-metrics", "scheme": "HTTP"}},
            id="scraped",
        ),
        pytest.param(
            {"networkPolicy.metricsFrom": [{"podSelector": {}}]},
            "0.0.0.0:9395",
            {"httpGet": {"path": "/healthz", "port": "worker-metrics", "scheme": "HTTP"}},
            id="scraping-allowed",
        ),
    ],
)
def test_the_workers_metrics_listen_only_where_scraping_needs_them(
    render: Any, overrides: dict[str, Any], bind: str, probe: dict[str, Any]
) -> None:
    """Issue 11: the worker's plain-HTTP metrics listened on 0.0.0.0 whether or not anything scraped them."""
    worker = render("default", overrides).container("worker")
    assert {e["name"]: e.get("value") for e in worker["env"]}["HAMI_WORKER_METRICS_BIND"] == bind
    for name in ("livenessProbe", "startupProbe"):
        assert {k: v for k, v in worker[name].items() if k in ("exec", "httpGet")} == probe
    assert bool(worker.get("ports")) == bind.startswith("0.0.0.0")


def test_state_dir_is_a_memory_emptydir_shared_by_extender_and_worker(render: Any) -> None:
    manifests = render("ha")
    volumes = {v["name"]: v for v in manifests.pod_spec["volumes"]}
    assert volumes["state"]["emptyDir"]["medium"] == "Memory"
    assert volumes["state"]["emptyDir"]["sizeLimit"] == "256Mi"
    for container in ("extender", "webhook", "worker"):
        mounts = {m["mountPath"]: m["name"] for m in manifests.container(container)["volumeMounts"]}
        assert mounts["/var/run/hami"] == "state", container
    assert all(m["name"] != "state" for m in manifests.container("kube-scheduler")["volumeMounts"])


@pytest.mark.parametrize(
    ("container", "mount_path", "volume", "read_only"),
    [
        pytest.param("extender", "/etc/hami/tls", "tls", True, id="extender-tls"),
        pytest.param("webhook", "/etc/hami/tls", "tls", True, id="webhook-tls"),
        pytest.param("kube-scheduler", "/etc/hami/tls", "tls", True, id="kube-scheduler-ca"),
        pytest.param(
            "kube-scheduler",
            "/etc/hami/kube-scheduler-client",
            "kube-scheduler-client",
            True,
            id="kube-scheduler-client-cert",
        ),
        pytest.param(
            "extender",
            "/etc/hami/kube-scheduler-client",
            "kube-scheduler-client",
            True,
            id="extender-client-ca",
        ),
        pytest.param(
            "extender", "/etc/hami/device-config.yaml", "device-config", True, id="extender-devices"
        ),
        pytest.param("worker", "/etc/hami/device-config.yaml", "device-config", True, id="worker-devices"),
        pytest.param(
            "kube-scheduler", "/etc/kubernetes/hami-scheduler", "scheduler-config", True, id="ks-config"
        ),
        pytest.param("extender", "/tmp", "extender-tmp", False, id="extender-tmp"),
        pytest.param("webhook", "/tmp", "webhook-tmp", False, id="webhook-tmp"),
        pytest.param("worker", "/tmp", "worker-tmp", False, id="worker-tmp"),
    ],
)
def test_mounts(render: Any, container: str, mount_path: str, volume: str, read_only: bool) -> None:
    mounts = {m["mountPath"]: m for m in render().container(container)["volumeMounts"]}
    assert mounts[mount_path]["name"] == volume
    assert mounts[mount_path].get("readOnly", False) is read_only


def test_device_config_is_mounted_as_one_file(render: Any) -> None:
    manifests = render()
    mount = next(m for m in manifests.container("extender")["volumeMounts"] if m["name"] == "device-config")
    assert mount["subPath"] == "device-config.yaml"
    volume = next(v for v in manifests.pod_spec["volumes"] if v["name"] == "device-config")
    assert volume["configMap"]["name"] == "hami-scheduler-device"
    assert manifests.has("ConfigMap", "hami-scheduler-device")


def test_existing_device_configmap_is_used_and_none_rendered(render: Any) -> None:
    manifests = render("default", {"deviceConfig.existingConfigMap": "hami-scheduler-device-legacy"})
    volume = next(v for v in manifests.pod_spec["volumes"] if v["name"] == "device-config")
    assert volume["configMap"]["name"] == "hami-scheduler-device-legacy"
    assert not manifests.has("ConfigMap", "hami-scheduler-device")


@pytest.mark.parametrize("container", ["kube-scheduler", "extender", "webhook", "worker"])
def test_container_security_context(render: Any, container: str) -> None:
    context = render().container(container)["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}


def test_pod_security_context_is_non_root(render: Any) -> None:
    context = render().pod_spec["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == 10001  # the image's numeric user
    assert context["runAsGroup"] == 10001
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}


def test_pod_settings(render: Any) -> None:
    manifests = render("ha")
    spec = manifests.pod_spec
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["serviceAccountName"] == "hami-scheduler"
    # A Service named hami-scheduler would inject HAMI_SCHEDULER_* variables otherwise.
    assert spec["enableServiceLinks"] is False
    assert manifests.deployment["spec"]["replicas"] == 3
    labels = manifests.deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["hami.io/webhook"] == "ignore"
    term = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["weight"] == 100
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == manifests.deployment["spec"]["selector"]["matchLabels"]
    )


def test_the_webhook_keeps_serving_briefly_after_deletion(render: Any) -> None:
    manifests = render()
    assert manifests.container("webhook")["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    assert manifests.pod_spec["terminationGracePeriodSeconds"] > 5


@pytest.mark.parametrize(
    ("value_set", "overrides", "strategy"),
    [
        pytest.param(
            "default",
            {},
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "100%", "maxUnavailable": "100%"}},
            id="single-replica-elected",
        ),
        pytest.param(
            "ha",
            {},
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "100%", "maxUnavailable": "100%"}},
            id="ha",
        ),
        pytest.param("default", {"leaderElection.enabled": False}, {"type": "Recreate"}, id="no-election"),
        pytest.param(
            "ha",
            {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}},
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
            id="explicit",
        ),
    ],
)
def test_update_strategy(render: Any, value_set: str, overrides: dict[str, object], strategy: object) -> None:
    # Standbys are never Ready, so only maxUnavailable 100% lets a rollout finish; without election two pods
    # must never overlap.
    assert render(value_set, overrides).deployment["spec"]["strategy"] == strategy


def test_checksums_roll_the_pods_on_config_changes(render: Any) -> None:
    def annotations(overrides: dict[str, object]) -> dict[str, str]:
        result: dict[str, str] = render("default", overrides).deployment["spec"]["template"]["metadata"][
            "annotations"
        ]
        return result

    base = annotations({})
    assert {"checksum/scheduler-config", "checksum/device-config", "checksum/ca"} <= set(base)
    changed = annotations({"kubeScheduler.httpTimeout": "40s"})
    assert changed["checksum/scheduler-config"] != base["checksum/scheduler-config"]
    assert changed["checksum/device-config"] == base["checksum/device-config"]
    devices = annotations({"deviceConfig.nvidia.deviceSplitCount": 4})
    assert devices["checksum/device-config"] != base["checksum/device-config"]


def test_replicas_force_leader_election(render: Any) -> None:
    manifests = render("default", {"replicas": 2, "leaderElection.enabled": False})
    assert manifests.env("worker")["HAMI_LEADER_ELECT"] == "true"
    assert manifests.scheduler_config()["leaderElection"]["leaderElect"] is True


def test_single_replica_without_election(render: Any) -> None:
    manifests = render("default", {"leaderElection.enabled": False})
    assert manifests.env("worker")["HAMI_LEADER_ELECT"] == "false"
    assert manifests.scheduler_config()["leaderElection"]["leaderElect"] is False
    assert not manifests.has("PodDisruptionBudget")
