"""The main Service, the PodDisruptionBudget, the ServiceAccount and RBAC."""

from __future__ import annotations

from typing import Any

import pytest


def test_main_service_routes_by_readiness(render: Any) -> None:
    manifests = render("ha")
    service = manifests.one("Service", "hami-scheduler")
    # No publishNotReadyAddresses: only Ready pods (the leader) are endpoints.
    assert "publishNotReadyAddresses" not in service["spec"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == manifests.deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]


@pytest.mark.parametrize(
    ("value_set", "overrides", "expected"),
    [
        pytest.param("default", {}, None, id="single-replica-no-pdb"),
        pytest.param(
            "ha",
            {},
            {"minAvailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow"},
            id="ha-protects-the-leader",
        ),
        pytest.param(
            "acquire", {}, {"minAvailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow"}, id="acquire"
        ),
        pytest.param(
            "ha",
            {
                "podDisruptionBudget.maxUnavailable": 1,
                "podDisruptionBudget.unhealthyPodEvictionPolicy": "IfHealthyBudget",
            },
            {"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "IfHealthyBudget"},
            id="max-unavailable",
        ),
        pytest.param("ha", {"podDisruptionBudget.enabled": False}, None, id="disabled"),
    ],
)
def test_pod_disruption_budget(
    render: Any, value_set: str, overrides: dict[str, object], expected: dict[str, object] | None
) -> None:
    manifests = render(value_set, overrides)
    if expected is None:
        assert not manifests.has("PodDisruptionBudget")
        return
    pdb = manifests.one("PodDisruptionBudget", "hami-scheduler")
    spec = dict(pdb["spec"])
    assert spec.pop("selector") == {"matchLabels": manifests.deployment["spec"]["selector"]["matchLabels"]}
    assert spec == expected


def test_selectors_never_match_the_test_pod(render: Any) -> None:
    manifests = render()
    test_pod = manifests.one("Pod")
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    selector = manifests.deployment["spec"]["selector"]["matchLabels"]
    assert not selector.items() <= test_pod["metadata"]["labels"].items()


def test_service_account(render: Any) -> None:
    manifests = render()
    account = manifests.one("ServiceAccount", "hami-scheduler")
    assert account["metadata"]["namespace"] == "hami-system"
    assert manifests.pod_spec["serviceAccountName"] == "hami-scheduler"


def rules(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_cluster_role_is_least_privilege(render: Any) -> None:
    granted = rules(render().one("ClusterRole", "hami-scheduler-hami-system"))
    expected = (
        {("", "pods", v) for v in ("get", "list", "watch", "patch")}
        | {("", "pods/binding", "create")}
        | {("", "nodes", v) for v in ("get", "list", "watch", "patch")}
        | {("", "events", v) for v in ("create", "patch")}
        | {("events.k8s.io", "events", v) for v in ("create", "patch")}
        | {("", "resourcequotas", v) for v in ("get", "list", "watch")}
        | {
            ("resource.k8s.io", r, v)
            for r in ("deviceclasses", "resourceslices")
            for v in ("get", "list", "watch")
        }
        | {("scheduling.k8s.io", "podgroups", v) for v in ("get", "list", "watch")}  # gangs, read only
    )
    assert granted == expected
    assert not any(resource in {"pods/status", "secrets", "configmaps"} for _, resource, _ in granted)
    assert not any("*" in item for entry in granted for item in entry)


def test_lease_role_in_the_release_namespace(render: Any) -> None:
    role = render().one("Role", "hami-scheduler")
    assert role["metadata"]["namespace"] == "hami-system"
    assert rules(role) == {
        ("coordination.k8s.io", "leases", v) for v in ("get", "list", "watch", "create", "update", "patch")
    } | {("", "pods", "list"), ("", "pods", "patch")}


@pytest.mark.parametrize(
    ("kind", "name", "role_kind", "role"),
    [
        pytest.param(
            "ClusterRoleBinding",
            "hami-scheduler-hami-system",
            "ClusterRole",
            "hami-scheduler-hami-system",
            id="own",
        ),
        pytest.param(
            "ClusterRoleBinding",
            "hami-scheduler-hami-system-kube-scheduler",
            "ClusterRole",
            "system:kube-scheduler",
            id="kube-scheduler",
        ),
        pytest.param(
            "ClusterRoleBinding",
            "hami-scheduler-hami-system-volume-scheduler",
            "ClusterRole",
            "system:volume-scheduler",
            id="volume-scheduler",
        ),
        pytest.param("RoleBinding", "hami-scheduler", "Role", "hami-scheduler", id="leases"),
        pytest.param(
            "RoleBinding",
            "hami-scheduler-hami-system-auth-reader",
            "Role",
            "extension-apiserver-authentication-reader",
            id="auth-reader",
        ),
    ],
)
def test_bindings(render: Any, kind: str, name: str, role_kind: str, role: str) -> None:
    binding = render().one(kind, name)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "hami-scheduler", "namespace": "hami-system"}
    ]


def test_auth_reader_binding_lives_in_kube_system(render: Any) -> None:
    manifests = render()
    assert manifests.one("RoleBinding", "hami-scheduler-hami-system-auth-reader")["metadata"][
        "namespace"
    ] == ("kube-system")
    assert not render("default", {"rbac.authenticationReader": False}).has(
        "RoleBinding", "hami-scheduler-hami-system-auth-reader"
    )


def test_cluster_scoped_names_carry_the_namespace(render: Any) -> None:
    """HAMi's chart owns ClusterRole/ClusterRoleBinding hami-scheduler; a second release must not collide."""
    manifests = render()
    for kind in ("ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"):
        for item in manifests.all(kind):
            assert item["metadata"]["name"].startswith("hami-scheduler-hami-system"), (
                kind,
                item["metadata"]["name"],
            )
