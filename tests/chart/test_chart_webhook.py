"""The MutatingWebhookConfiguration and the Service the API server calls."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from cryptography import x509

from app.core.podkeys import CORE_KEYS
from app.core.vendor import ALLOCATION


def webhook(manifests: Any) -> dict[str, Any]:
    config = manifests.one("MutatingWebhookConfiguration", "hami-scheduler-hami-system")
    assert len(config["webhooks"]) == 1
    result: dict[str, Any] = config["webhooks"][0]
    return result


@pytest.mark.parametrize("value_set", ["default", "ha", "acquire", "crds"])
def test_fixed_fields(render: Any, value_set: str) -> None:
    hook = webhook(render(value_set))
    assert hook["name"] == "vgpu.hami.io"
    assert hook["admissionReviewVersions"] == ["v1", "v1beta1"]
    assert hook["sideEffects"] == "None"
    assert hook["reinvocationPolicy"] == "Never"
    assert hook["matchPolicy"] == "Equivalent"
    assert 1 <= hook["timeoutSeconds"] <= 5
    assert hook["clientConfig"]["service"]["path"] == "/webhook"  # customURL is off by default


@pytest.mark.parametrize(
    ("overrides", "policy"),
    [
        pytest.param({}, "Fail", id="default-fail-closed"),
        pytest.param({"webhook.failurePolicy": "Ignore"}, "Ignore", id="fail-open-opt-in"),
    ],
)
def test_failure_policy(render: Any, overrides: dict[str, str], policy: str) -> None:
    assert webhook(render("default", overrides))["failurePolicy"] == policy


@pytest.mark.parametrize(
    ("overrides", "timeout"),
    [pytest.param({}, 5, id="default"), pytest.param({"webhook.timeoutSeconds": 2}, 2, id="two-seconds")],
)
def test_timeout(render: Any, overrides: dict[str, int], timeout: int) -> None:
    assert webhook(render("default", overrides))["timeoutSeconds"] == timeout


@pytest.mark.parametrize(
    ("overrides", "rules"),
    [
        pytest.param(
            {},
            [
                ("CREATE", ["pods"]),
                ("UPDATE", ["pods", "pods/status"]),
                ("CREATE", ["pods/binding", "bindings"]),
            ],
            id="default",
        ),
        pytest.param({"webhook.protectAnnotationsOnUpdate": False}, [("CREATE", ["pods"])], id="create-only"),
    ],
)
def test_rules(render: Any, overrides: dict[str, bool], rules: list[tuple[str, list[str]]]) -> None:
    rendered = webhook(render("default", overrides))["rules"]
    assert [(r["operations"][0], r["resources"]) for r in rendered] == rules
    for rule in rendered:
        assert len(rule["operations"]) == 1
        assert rule["apiGroups"] == [""]
        assert rule["apiVersions"] == ["v1"]
        assert rule["scope"] == "Namespaced"


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({}, id="default"),
        pytest.param({"webhook.trustedUsers": ["system:serviceaccount:ops:auditor"]}, id="extra-user"),
        pytest.param({"webhook.devicePluginServiceAccount.name": ""}, id="no-device-plugin"),
    ],
)
def test_calls_that_cannot_be_refused_are_skipped_for_the_trusted_users(
    render: Any, overrides: dict[str, object]
) -> None:
    """The matchCondition names exactly the users the webhook process trusts (issue 20): a trusted user's
    update of an unbound pod is then skipped by the API server only where the webhook would allow it."""
    manifests = render("default", overrides)
    [condition] = webhook(manifests)["matchConditions"]
    trusted = manifests.env("webhook")["HAMI_WEBHOOK_TRUSTED_USERS"].split(",")
    listed = re.search(r"request\.userInfo\.username in (\[[^\]]*\])", condition["expression"])
    assert listed is not None and json.loads(listed.group(1)) == trusted
    assert condition["expression"].startswith("request.kind.kind == 'Binding'")


def test_the_skipped_bound_pod_keys_are_the_cores_keys_outside_any_allocation(render: Any) -> None:
    """A trusted user's update of a bound pod is skipped only when it changes these keys alone: the core
    declares them first (no vendor can redeclare them), none with the role ALLOCATION."""
    [condition] = webhook(render("default"))["matchConditions"]
    lists = {tuple(json.loads(m)) for m in re.findall(r"k in (\[[^\]]*\])", condition["expression"])}
    assert lists == {tuple(sorted(key.name for key in CORE_KEYS if key.role != ALLOCATION))}
    # and NVIDIA's to-allocate list only emptied whole (tests/devices/test_registry.py: always allowed)
    assert "k == 'hami.io/vgpu-devices-to-allocate' && " in condition["expression"]
    assert ".matches('^;*$')" in condition["expression"]


def test_match_conditions_without_update_protection_too(render: Any) -> None:
    """The pod CREATE condition keeps plain pods off the webhook whatever else is registered (issue 28)."""
    hook = webhook(render("default", {"webhook.protectAnnotationsOnUpdate": False}))
    [condition] = hook["matchConditions"]
    assert condition == webhook(render("default"))["matchConditions"][0]


def test_ha_example_protects_updates(render: Any) -> None:
    assert [r["operations"] for r in webhook(render("ha"))["rules"]] == [["CREATE"], ["UPDATE"], ["CREATE"]]
    assert webhook(render("ha"))["rules"][2]["resources"] == ["pods/binding", "bindings"]


def expressions(selector: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(e["key"], e["operator"], e.get("values", [])) for e in selector.get("matchExpressions", [])]


@pytest.mark.parametrize(
    ("overrides", "excluded"),
    [
        pytest.param({}, ["kube-system", "hami-system"], id="system-and-release"),
        pytest.param(
            {"webhook.excludeNamespaces": ["gpu-operator", "kube-system"]},
            ["kube-system", "hami-system", "gpu-operator"],
            id="extra-namespaces",
        ),
    ],
)
def test_namespace_selector(render: Any, overrides: dict[str, list[str]], excluded: list[str]) -> None:
    selector = webhook(render("default", overrides))["namespaceSelector"]
    assert expressions(selector)[:2] == [
        ("kubernetes.io/metadata.name", "NotIn", excluded),
        ("hami.io/webhook", "NotIn", ["ignore"]),
    ]


def test_user_selector_terms_are_added(render: Any) -> None:
    term = {"key": "team", "operator": "In", "values": ["ml"]}
    hook = webhook(
        render(
            "default",
            {
                "webhook.namespaceSelector.matchExpressions": [term],
                "webhook.namespaceSelector.matchLabels": {"gpu": "yes"},
                "webhook.objectSelector.matchExpressions": [term],
                "webhook.podOptOut": True,
            },
        )
    )
    assert hook["namespaceSelector"]["matchLabels"] == {"gpu": "yes"}
    assert expressions(hook["namespaceSelector"])[-1] == ("team", "In", ["ml"])
    assert expressions(hook["objectSelector"]) == [
        ("hami.io/webhook", "NotIn", ["ignore"]),
        ("team", "In", ["ml"]),
    ]


@pytest.mark.parametrize(
    ("overrides", "object_selector"),
    [
        pytest.param(
            {"webhook.podOptOut": True},
            {"matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]},
            id="pod-opt-out",
        ),
        pytest.param({}, None, id="no-pod-opt-out-by-default"),
    ],
)
def test_object_selector(render: Any, overrides: dict[str, bool], object_selector: object) -> None:
    assert webhook(render("default", overrides)).get("objectSelector") == object_selector


def test_own_pods_and_namespace_never_reach_the_webhook(render: Any) -> None:
    manifests = render("ha")
    labels = manifests.deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["hami.io/webhook"] == "ignore"
    assert "hami-system" in webhook(manifests)["namespaceSelector"]["matchExpressions"][0]["values"]


@pytest.mark.parametrize("value_set", ["default", "ha", "acquire"])
def test_admission_goes_to_every_replica(render: Any, value_set: str) -> None:
    manifests = render(value_set)
    target = webhook(manifests)["clientConfig"]["service"]
    assert target == {
        "name": "hami-scheduler-webhook",
        "namespace": "hami-system",
        "path": "/webhook",
        "port": 443,
    }
    service = manifests.one("Service", "hami-scheduler-webhook")
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == manifests.deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]


def test_admission_through_the_leader_only(render: Any) -> None:
    manifests = render("default", {"webhook.allReplicasService": False, "service.port": 8443})
    target = webhook(manifests)["clientConfig"]["service"]
    assert (target["name"], target["port"]) == ("hami-scheduler", 8443)
    assert not manifests.has("Service", "hami-scheduler-webhook")


def test_webhook_disabled(render: Any) -> None:
    manifests = render("default", {"webhook.enabled": False})
    assert not manifests.has("MutatingWebhookConfiguration")
    assert not manifests.has("Service", "hami-scheduler-webhook")


@pytest.mark.parametrize(
    ("host", "port", "url"),
    [
        pytest.param("10.0.0.7", 31998, "https://10.0.0.7:31998/webhook", id="ip"),
        pytest.param("hami.gpu.example.com", 443, "https://hami.gpu.example.com:443/webhook", id="name"),
        pytest.param("fd00::7", 8443, "https://[fd00::7]:8443/webhook", id="ipv6"),
    ],
)
def test_custom_url_replaces_the_service(render: Any, host: str, port: int, url: str) -> None:
    """HAMi's admissionWebhook.customURL: managed control planes that cannot reach Services."""
    custom = {"enabled": True, "host": host, "port": port, "path": "/webhook"}
    hook = webhook(render("default", {"webhook.customURL": custom}))
    assert set(hook["clientConfig"]) == {"url", "caBundle"}
    assert hook["clientConfig"]["url"] == url


def test_custom_url_host_is_in_the_certificate(render: Any) -> None:
    custom = {"enabled": True, "host": "hami.gpu.example.com", "port": 443, "path": "/webhook"}
    serving = render("crds", {"webhook.customURL": custom}).one("Certificate", "hami-scheduler-serving")
    assert "hami.gpu.example.com" in serving["spec"]["dnsNames"]
    custom["host"] = "10.0.0.7"
    serving = render("crds", {"webhook.customURL": custom}).one("Certificate", "hami-scheduler-serving")
    assert serving["spec"]["ipAddresses"] == ["127.0.0.1", "10.0.0.7"]


def test_namespace_selector_can_be_left_to_the_platform(render: Any) -> None:
    """HAMi's manageNamespaceSelector: false for AKS's Admissions Enforcer, which rewrites the field."""
    hook = webhook(render("default", {"webhook.manageNamespaceSelector": False}))
    assert "namespaceSelector" not in hook
    assert hook["rules"] and hook["failurePolicy"] == "Fail"
    assert "namespaceSelector" in webhook(render("default"))


def test_custom_url_address_is_in_the_generated_certificate(render: Any) -> None:
    custom = {"enabled": True, "host": "10.0.0.7", "port": 31998, "path": "/webhook"}
    secret = render("default", {"webhook.customURL": custom}).one("Secret", "hami-scheduler-tls")
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "10.0.0.7"]
    assert secret["metadata"]["annotations"]["hami.io/tls-sans"].endswith(
        ",10.0.0.7"
    )  # a change re-issues it
