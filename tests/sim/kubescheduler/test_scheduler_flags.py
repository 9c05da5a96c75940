"""The emulated control plane turns a KubeSchedulerConfiguration's extender into `python -m sim scheduler`
flags: the TLS settings must reach the simulated scheduler, or it cannot call an extender that requires
kube-scheduler's client certificate (issue 11)."""

from __future__ import annotations

from typing import Any

import pytest

from sim.controlplane.emulated import scheduler_flags


def config(tls: dict[str, Any]) -> dict[str, Any]:
    extender = {"urlPrefix": "https://127.0.0.1:8444", "httpTimeout": "30s", "tlsConfig": tls}
    return {"extenders": [extender], "profiles": [{"schedulerName": "hami-scheduler"}]}


@pytest.mark.parametrize(
    ("tls", "expected"),
    [
        pytest.param({"insecure": True}, ["--insecure"], id="insecure"),
        pytest.param({"caFile": "/ca.crt"}, ["--ca-file", "/ca.crt"], id="ca-only"),
        pytest.param(
            {"caFile": "/ca.crt", "certFile": "/c.crt", "keyFile": "/c.key"},
            ["--ca-file", "/ca.crt", "--cert-file", "/c.crt", "--key-file", "/c.key"],
            id="client-certificate",
        ),
    ],
)
def test_tls_settings_become_flags(tls: dict[str, Any], expected: list[str]) -> None:
    flags = scheduler_flags(config(tls))
    assert flags[:4] == ["--extender", "https://127.0.0.1:8444", "--scheduler-name", "hami-scheduler"]
    assert flags[4:-2] == expected
    assert flags[-2:] == ["--http-timeout", "30"]


@pytest.mark.parametrize(
    ("profiles", "default_profile"),
    [
        pytest.param(["hami-scheduler"], False, id="ours-only"),
        pytest.param(["hami-scheduler", "default-scheduler"], True, id="with-default-scheduler"),
    ],
)
def test_a_second_default_scheduler_profile_becomes_the_default_profile_flag(
    profiles: list[str], default_profile: bool
) -> None:
    """`sim up` and the demo add the cluster's default scheduler as a second profile (issue 22)."""
    flags = scheduler_flags({**config({}), "profiles": [{"schedulerName": name} for name in profiles]})
    assert flags[:4] == ["--extender", "https://127.0.0.1:8444", "--scheduler-name", "hami-scheduler"]
    assert ("--default-profile" in flags) is default_profile
