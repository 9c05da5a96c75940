"""Who can reach what (issue 11): kube-scheduler's verbs only where kube-scheduler calls them, the rest on
the Service, and a NetworkPolicy on by default."""

from __future__ import annotations

from typing import Any

import pytest

PUBLIC = {"ports": [{"port": "https", "protocol": "TCP"}]}
METRICS_PORTS = [{"port": 9395, "protocol": "TCP"}, {"port": 10259, "protocol": "TCP"}]


def test_the_main_service_exposes_kube_schedulers_verbs_only_in_acquire_mode(render: Any) -> None:
    follow = render("ha").one("Service", "hami-scheduler")["spec"]["ports"]
    assert [p["name"] for p in follow] == ["https"]
    acquire = render("acquire").one("Service", "hami-scheduler")["spec"]["ports"]
    assert acquire[1] == {"name": "extender", "port": 8444, "targetPort": "extender", "protocol": "TCP"}
    webhook = render("acquire").one("Service", "hami-scheduler-webhook")["spec"]["ports"]
    assert [p["targetPort"] for p in webhook] == ["https"], "admission never reaches kube-scheduler's verbs"


@pytest.mark.parametrize(
    ("value_set", "overrides", "ingress"),
    [
        pytest.param("default", {}, [PUBLIC], id="follow"),
        pytest.param(
            "acquire",
            {},
            [
                PUBLIC,
                {
                    "ports": [{"port": "extender", "protocol": "TCP"}],
                    "from": [
                        {
                            "podSelector": {
                                "matchLabels": {
                                    "app.kubernetes.io/name": "hami-scheduler",
                                    "app.kubernetes.io/instance": "hami-scheduler",
                                    "app.kubernetes.io/component": "hami-scheduler",
                                }
                            }
                        }
                    ],
                },
            ],
            id="acquire",
        ),
        pytest.param(
            "default",
            {"networkPolicy.metricsFrom": [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}]},
            [
                PUBLIC,
                {
                    "ports": METRICS_PORTS,
                    "from": [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}],
                },
            ],
            id="scraping-allowed",
        ),
        pytest.param(
            "default",
            {"serviceMonitor.enabled": True},
            [PUBLIC, {"ports": METRICS_PORTS}],
            id="service-monitor",
        ),
        pytest.param(
            "default",
            {"networkPolicy.publicFrom": [{"ipBlock": {"cidr": "10.0.0.0/24"}}]},
            [{**PUBLIC, "from": [{"ipBlock": {"cidr": "10.0.0.0/24"}}]}],
            id="public-restricted",
        ),
    ],
)
def test_network_policy(render: Any, value_set: str, overrides: dict[str, Any], ingress: Any) -> None:
    manifests = render(value_set, overrides)
    policy = manifests.one("NetworkPolicy", "hami-scheduler")["spec"]
    assert policy["podSelector"]["matchLabels"] == manifests.deployment["spec"]["selector"]["matchLabels"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == ingress


def test_network_policy_can_be_left_out(render: Any) -> None:
    assert not render("default", {"networkPolicy.enabled": False}).has("NetworkPolicy")


@pytest.mark.parametrize(
    ("value_set", "bind"),
    [("default", "127.0.0.1:8444"), ("ha", "127.0.0.1:8444"), ("acquire", "0.0.0.0:8444")],
)
def test_kube_schedulers_verbs_listen_only_where_it_calls_them(
    render: Any, value_set: str, bind: str
) -> None:
    manifests = render(value_set)
    extender, webhook = manifests.env("extender"), manifests.env("webhook")
    assert (extender["HAMI_ROUTES"], extender["HAMI_BIND"]) == ("scheduler", bind)
    assert extender["HAMI_TLS_CLIENT_CA_FILE"] == "/etc/hami/kube-scheduler-client/ca.crt"
    assert (webhook["HAMI_ROUTES"], webhook["HAMI_BIND"]) == ("public", "0.0.0.0:8443")


def test_the_two_servers_need_two_ports(render_error: Any) -> None:
    message = render_error("default", {"extender.schedulerPort": 8443})
    assert "extender.port and extender.schedulerPort must differ" in message


def test_update_protection_is_on_by_default(render: Any) -> None:
    rules = render().one("MutatingWebhookConfiguration")["webhooks"][0]["rules"]
    assert [(r["operations"], r["resources"]) for r in rules] == [
        (["CREATE"], ["pods"]),
        (["UPDATE"], ["pods", "pods/status"]),
        (["CREATE"], ["pods/binding", "bindings"]),  # a Binding lands on the pod at both endpoints (19, 28)
    ]
