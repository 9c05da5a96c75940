"""HAMI_LEADER_ELECT_RESOURCE_NAME/NAMESPACE must be names kube-apiserver accepts for a Lease: a bad one
fails at start with one line (the API emulator used to accept any name, the real API server answers 422 to
every election attempt)."""

from __future__ import annotations

import pytest

from config.envvars import SettingsError
from config.settings import load_settings


@pytest.mark.parametrize(
    ("env", "name", "namespace"),
    [
        ({}, "hami-scheduler", "default"),
        ({"POD_NAMESPACE": "hami-system"}, "hami-scheduler", "hami-system"),
        ({"HAMI_LEADER_ELECT_RESOURCE_NAME": "a.b-c"}, "a.b-c", "default"),
    ],
    ids=["defaults", "pod-namespace", "dotted"],
)
def test_valid_lease_names(env: dict[str, str], name: str, namespace: str) -> None:
    leader = load_settings(env).leader
    assert (leader.resource_name, leader.resource_namespace) == (name, namespace)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("HAMI_LEADER_ELECT_RESOURCE_NAME", "ends-with-dash-"),
        ("HAMI_LEADER_ELECT_RESOURCE_NAME", "Upper"),
        ("HAMI_LEADER_ELECT_RESOURCE_NAME", "under_score"),
        ("HAMI_LEADER_ELECT_RESOURCE_NAMESPACE", "dotted.namespace"),
        ("HAMI_LEADER_ELECT_RESOURCE_NAMESPACE", "x" * 64),
    ],
    ids=["trailing-dash", "upper-case", "underscore", "namespace-dot", "namespace-too-long"],
)
def test_invalid_lease_names_fail_at_start(variable: str, value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({variable: value})
    assert str(caught.value).startswith(f"{variable}={value!r}: not a valid")
