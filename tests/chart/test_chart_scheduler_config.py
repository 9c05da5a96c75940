"""kube-scheduler's KubeSchedulerConfiguration: our profile, the extender, leader election."""

from __future__ import annotations

from typing import Any

import pytest

MANAGED = [
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
    "nvidia.com/priority",
]


def extender(manifests: Any) -> dict[str, Any]:
    extenders = manifests.scheduler_config()["extenders"]
    assert len(extenders) == 1
    result: dict[str, Any] = extenders[0]
    return result


def test_configuration_kind_and_profile(render: Any) -> None:
    config = render().scheduler_config()
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["profiles"] == [{"schedulerName": "hami-scheduler"}]


def test_extender_verbs_and_flags(render: Any) -> None:
    ext = extender(render())
    assert ext["filterVerb"] == "filter"
    assert ext["bindVerb"] == "bind"
    assert ext["preemptVerb"] == "preempt"  # device-aware victims (docs/preemption.md)
    assert "prioritizeVerb" not in ext
    assert ext["nodeCacheCapable"] is True
    assert ext["enableHTTPS"] is True
    assert ext["ignorable"] is False  # an extender error must fail the pod's cycle, not skip GPU accounting
    assert ext["managedResources"] == [{"name": name, "ignoredByScheduler": True} for name in MANAGED]


def test_http_timeout_covers_the_bind_lock_budget(render: Any) -> None:
    # /bind waits up to bindLockWait (<= 25 s) for a node lock, then patches and binds: 30 s by default.
    assert extender(render())["httpTimeout"] == "30s"
    assert render().env("extender")["HAMI_BIND_LOCK_WAIT"] == "10s"


@pytest.mark.parametrize(
    ("value_set", "url"),
    [
        pytest.param("default", "https://127.0.0.1:8444", id="follow-own-pod"),
        pytest.param("ha", "https://127.0.0.1:8444", id="ha-follow-own-pod"),
        pytest.param("acquire", "https://hami-scheduler.hami-system.svc:8444", id="acquire-through-service"),
    ],
)
def test_extender_url(render: Any, value_set: str, url: str) -> None:
    assert extender(render(value_set))["urlPrefix"] == url


@pytest.mark.parametrize("value_set", ["default", "ha", "acquire"])
def test_tls_is_verified_against_the_chart_ca(render: Any, value_set: str) -> None:
    manifests = render(value_set)
    tls = extender(manifests)["tlsConfig"]
    assert tls == {
        "insecure": False,
        "caFile": "/etc/hami/tls/ca.crt",
        "serverName": "hami-scheduler.hami-system.svc",
        "certFile": "/etc/hami/kube-scheduler-client/tls.crt",
        "keyFile": "/etc/hami/kube-scheduler-client/tls.key",
    }
    # The CA file is the TLS Secret mounted into kube-scheduler; its client certificate another Secret,
    # whose CA the extender requires (issue 11).
    volumes = {v["name"]: v for v in manifests.pod_spec["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "hami-scheduler-tls"
    assert volumes["kube-scheduler-client"]["secret"]["secretName"] == "hami-scheduler-kube-scheduler-client"


def test_insecure_tls_is_opt_in(render: Any) -> None:
    assert extender(render("default", {"kubeScheduler.tlsInsecure": True}))["tlsConfig"] == {
        "insecure": True,
        "certFile": "/etc/hami/kube-scheduler-client/tls.crt",
        "keyFile": "/etc/hami/kube-scheduler-client/tls.key",
    }


@pytest.mark.parametrize(
    ("value_set", "scheduler_lease", "worker_lease"),
    [
        pytest.param("default", "hami-scheduler", "hami-scheduler", id="follow-same-lease"),
        pytest.param("ha", "hami-scheduler", "hami-scheduler", id="ha-follow-same-lease"),
        pytest.param("acquire", "hami-scheduler", "hami-scheduler-extender", id="acquire-own-lease"),
    ],
)
def test_leases(render: Any, value_set: str, scheduler_lease: str, worker_lease: str) -> None:
    manifests = render(value_set)
    election = manifests.scheduler_config()["leaderElection"]
    assert election["leaderElect"] is True
    assert election["resourceLock"] == "leases"
    assert election["resourceName"] == scheduler_lease
    assert election["resourceNamespace"] == "hami-system"
    assert manifests.env("worker")["HAMI_LEADER_ELECT_RESOURCE_NAME"] == worker_lease
    assert manifests.env("worker")["HAMI_LEADER_ELECT_RESOURCE_NAMESPACE"] == "hami-system"
    # kube-scheduler and the worker use the same timings.
    for key, variable in (
        ("leaseDuration", "HAMI_LEASE_DURATION"),
        ("renewDeadline", "HAMI_RENEW_DEADLINE"),
        ("retryPeriod", "HAMI_RETRY_PERIOD"),
    ):
        assert election[key] == manifests.env("worker")[variable]


def test_acquire_lease_must_differ_from_kube_schedulers(render_error: Any) -> None:
    message = render_error("acquire", {"leaderElection.acquireLeaseName": "hami-scheduler"})
    assert "acquireLeaseName must differ" in message


def test_custom_lease_names(render: Any) -> None:
    manifests = render(
        "acquire", {"leaderElection.leaseName": "ks", "leaderElection.acquireLeaseName": "ext"}
    )
    assert manifests.scheduler_config()["leaderElection"]["resourceName"] == "ks"
    assert manifests.env("extender")["HAMI_LEADER_ELECT_RESOURCE_NAME"] == "ext"


def test_managed_resources_follow_values(render: Any) -> None:
    names = [*MANAGED, "nvidia.com/gpu-extra"]
    ext = extender(render("default", {"kubeScheduler.managedResources": names}))
    assert [r["name"] for r in ext["managedResources"]] == names


@pytest.mark.parametrize(
    ("overrides", "missing"),
    [
        pytest.param(
            {"deviceConfig.nvidia.resourceCountName": "example.com/vgpu"}, "example.com/vgpu", id="count"
        ),
        pytest.param(
            {"deviceConfig.nvidia.resourceCoreName": "example.com/cores"}, "example.com/cores", id="cores"
        ),
        pytest.param(
            {"deviceConfig.content": "nvidia:\n  resourceMemoryName: example.com/mem\n"},
            "example.com/mem",
            id="content",
        ),
    ],
)
def test_device_resource_names_must_be_managed(
    render_error: Any, overrides: dict[str, str], missing: str
) -> None:
    assert f"kubeScheduler.managedResources must include {missing}" in render_error("default", overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            {"kubeScheduler.httpTimeout": "12s", "extender.filterSyncWait": "2s"},
            "must be at least extender.bindLockWait",
            id="http-timeout-vs-bind",
        ),
        pytest.param(
            {"extender.filterSyncWait": "28s"},
            "must be at least extender.filterSyncWait",
            id="http-timeout-vs-sync",
        ),
        pytest.param(
            {"leaderElection.renewDeadline": "20s"}, "leaseDuration must be greater", id="lease-renew"
        ),
        pytest.param(
            {"leaderElection.retryPeriod": "9s"}, "renewDeadline must be greater than 1.2", id="renew-retry"
        ),
        pytest.param(
            {
                "leaderElection.retryPeriod": "12s",
                "leaderElection.renewDeadline": "20s",
                "leaderElection.leaseDuration": "1m",
            },
            "below 10s",
            id="heartbeat",
        ),
    ],
)
def test_timing_values_are_checked_at_render_time(
    render_error: Any, overrides: dict[str, str], message: str
) -> None:
    assert message in render_error("default", overrides)


def test_kube_scheduler_flags(render: Any) -> None:
    command = render(
        "default", {"kubeScheduler.verbosity": 4, "kubeScheduler.extraArgs": ["--kube-api-qps=100"]}
    )
    assert command.container("kube-scheduler")["command"][2:] == ["--v=4", "--kube-api-qps=100"]


# Field names of kubescheduler.config.k8s.io/v1 (KubeSchedulerConfiguration, Extender, ExtenderTLSConfig,
# LeaderElectionConfiguration): kube-scheduler rejects unknown fields, and kubernetes-validate has no schema
# for this file, so a typo would only show when the pod starts.
CONFIG_FIELDS = {
    "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "healthzBindAddress",
    "metricsBindAddress", "enableProfiling", "enableContentionProfiling", "percentageOfNodesToScore",
    "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive",
    "percentageOfPlacementsToScore",
}  # fmt: skip
EXTENDER_FIELDS = {
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
    "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable",
}  # fmt: skip
TLS_FIELDS = {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"}
ELECTION_FIELDS = {
    "leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock", "resourceName",
    "resourceNamespace",
}  # fmt: skip


@pytest.mark.parametrize("value_set", ["default", "ha", "acquire"])
def test_only_known_configuration_fields(render: Any, value_set: str) -> None:
    config = render(value_set).scheduler_config()
    assert set(config) <= CONFIG_FIELDS
    assert set(config["leaderElection"]) <= ELECTION_FIELDS
    for ext in config["extenders"]:
        assert set(ext) <= EXTENDER_FIELDS
        assert set(ext["tlsConfig"]) <= TLS_FIELDS
        for resource in ext["managedResources"]:
            assert set(resource) == {"name", "ignoredByScheduler"}


@pytest.mark.parametrize(("value", "expected"), [(None, None), (100, 100), (30, 30)])
def test_percentage_of_nodes_to_score_of_our_profile(
    render: Any, value: int | None, expected: int | None
) -> None:
    """Unset by default (kube-scheduler's adaptive sample); set, on our profile only (docs/gangs.md)."""
    config = render("default", {"kubeScheduler.percentageOfNodesToScore": value}).scheduler_config()
    assert config["profiles"][0].get("percentageOfNodesToScore") == expected
    assert "percentageOfNodesToScore" not in config
