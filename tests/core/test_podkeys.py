"""Every vendor declares its pod keys by role, and the webhook's rules come from those declarations
(app.core.podkeys, issue 19 finding 1): untrusted users change no declared key of any vendor — on CREATE
(stripped), on UPDATE of a pending pod and of a bound one — and on a bound pod nobody changes an allocation
key beyond what its declaration allows the device plugin, while trusted plugins keep their flags."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_builders import context
from hypothesis import HealthCheck, given, settings
from vendor_strategies import VENDORS, MixedScenario, scenarios

from app.core import podkeys
from app.core.admission import AdmissionSettings, admit
from app.core.decision import allocation_annotations, decide
from app.core.review import AdmissionInput, AdmissionOutcome
from app.core.vendor import ALLOCATION, FLAG, ROLES

TRUSTED = "system:serviceaccount:kube-system:hami-device-plugin"
SETTINGS = AdmissionSettings(trusted_users=(TRUSTED,))
EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pod(annotations: dict[str, str], node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {}}], "schedulerName": "hami-scheduler"}
    if node:
        spec["nodeName"] = node
    meta = {"name": "p", "namespace": "team", "uid": "u1", "annotations": dict(annotations)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def update(old: dict[str, str], new: dict[str, str], user: str, node: str = "") -> AdmissionOutcome:
    request = AdmissionInput("r", "UPDATE", pod(new, node), pod(old, node), user, "team")
    return admit(request, SETTINGS, VENDORS, {})


def create(annotations: dict[str, str]) -> AdmissionOutcome:
    return admit(
        AdmissionInput("r", "CREATE", pod(annotations), None, "alice", "team"), SETTINGS, VENDORS, {}
    )


# --- finding 1: the keys the non-NVIDIA device plugins allocate from -----------------------------------

PLUGIN_KEYS = [
    # (id, key, a value as the filter writes it, a forged one)
    ("kunlun-device-idx", "BAIDU_COM_DEVICE_IDX", "0", "0,1,2,3"),
    ("neuron-ids", "AWS_NEURON_IDS", "3", "0"),
    ("neuron-resource-type", "NEURON_RESOURCE_TYPE", "aws.amazon.com/neuroncore", ""),
    ("neuron-predicate-node", "aws.amazon.com/predicate-node", "n1", "n2"),
    ("mthreads-gpu-index", "mthreads.com/gpu-index", "0", "1"),
    ("cambricon-profile", "CAMBRICON_DSMLU_PROFILE", "0_10_4", "1_100_96"),
    ("enflame-assigned-index", "enflame.com/gcu-assigned-index", "0", "1"),
    ("enflame-request-size", "enflame.com/gcu-request-size", "1", "8"),
    (
        "enflame-containers",
        "assigned-containers",
        '{"c":{"allocated":false,"request":1}}',
        '{"c":{"request":8}}',
    ),
    ("metax-sgpu-devices", "metax-tech.com/gpu-devices-allocated", "[]", '[{"uuid":"x"}]'),
    ("ascend-runtime", "huawei.com/Ascend910B3", "[]", '[{"UUID":"x"}]'),
]


@pytest.mark.parametrize(
    ("key", "ours", "forged"), [c[1:] for c in PLUGIN_KEYS], ids=[c[0] for c in PLUGIN_KEYS]
)
@pytest.mark.parametrize("node", ["", "n1"], ids=["pending", "bound"])
def test_an_untrusted_user_may_not_rewrite_a_plugin_key(key: str, ours: str, forged: str, node: str) -> None:
    outcome = update({key: ours}, {key: forged}, "alice", node)
    assert not outcome.allowed and outcome.code == 403, outcome.message
    assert outcome.message == f"alice may not change scheduler-owned annotations: {key}"
    assert not update({}, {key: forged}, "alice", node).allowed  # nor add it
    assert not update({key: ours}, {}, "alice", node).allowed  # nor remove it
    assert create({key: forged}).stripped == (key,)


@pytest.mark.parametrize(
    ("key", "ours", "forged"), [c[1:] for c in PLUGIN_KEYS], ids=[c[0] for c in PLUGIN_KEYS]
)
def test_nobody_rewrites_a_bound_pods_plugin_key(key: str, ours: str, forged: str) -> None:
    outcome = update({key: ours}, {key: forged}, TRUSTED, "n1")
    assert not outcome.allowed, outcome.message
    assert outcome.message == f"the allocation of a bound pod is immutable: {TRUSTED} may not change {key}"
    assert update({key: ours}, {key: forged}, TRUSTED).allowed  # pending: the scheduler re-filters it


MARKED = {"c": {"allocated": True, "request": 1}, "d": {"allocated": False, "request": 2}}
PLUGIN_WRITES = [
    # (id, key, before, after): what the device plugins write on a bound pod
    ("neuron-allocated", "NEURON_ALLOCATED", "false", "true"),
    ("enflame-assigned", "enflame.com/gcu-assigned", "false", "true"),
    ("cambricon-assigned", "CAMBRICON_DSMLU_ASSIGNED", "false", "true"),
    ("bind-phase", "hami.io/bind-phase", "allocating", "success"),
    (
        "hygon-consumes",
        "hami.io/dcu-devices-to-allocate",
        "D-0,DCU,100,10:;D-1,DCU,100,10:;",
        ";D-1,DCU,100,10:;;",
    ),
    (
        "enflame-marks",
        "assigned-containers",
        json.dumps({"c": {"allocated": False, "request": 1}, "d": {"allocated": False, "request": 2}}),
        json.dumps(MARKED),
    ),
]


@pytest.mark.parametrize(
    ("key", "before", "after"), [c[1:] for c in PLUGIN_WRITES], ids=[c[0] for c in PLUGIN_WRITES]
)
def test_trusted_plugins_keep_their_writes_on_a_bound_pod(key: str, before: str, after: str) -> None:
    assert update({key: before}, {key: after}, TRUSTED, "n1").allowed
    assert not update({key: before}, {key: after}, "alice", "n1").allowed


AMEND_ABUSE = [
    # (id, key, before, after): a trusted write that looks like the plugin's but names other devices
    ("to-allocate-swapped", "hami.io/dcu-devices-to-allocate", "D-0,DCU,100,10:;", "D-1,DCU,100,10:;"),
    ("to-allocate-grows", "hami.io/dcu-devices-to-allocate", ";", "D-1,DCU,100,10:;"),
    (
        "enflame-request-grows",
        "assigned-containers",
        json.dumps({"c": {"allocated": False, "request": 1}}),
        json.dumps({"c": {"allocated": True, "request": 4}}),
    ),
    ("enflame-not-json", "assigned-containers", json.dumps({"c": {"request": 1}}), "{"),
]


@pytest.mark.parametrize(
    ("key", "before", "after"), [c[1:] for c in AMEND_ABUSE], ids=[c[0] for c in AMEND_ABUSE]
)
def test_a_plugins_amendment_may_not_name_other_devices(key: str, before: str, after: str) -> None:
    assert not update({key: before}, {key: after}, TRUSTED, "n1").allowed


CONSUMED = [
    ("same", "A:B:;C:;", "A:B:;C:;", True),
    ("first-emptied", "A:B:;C:;", ";C:;", True),
    ("all-emptied-and-grown", "A:;C:;", ";;;", True),
    ("removed", "A:;", None, True),
    ("group-changed", "A:B:;", "A:;", False),
    ("moved", "A:;;", ";A:;", False),
    ("added-after", "A:;", "A:;B:;", False),
]


@pytest.mark.parametrize(("old", "new", "ok"), [c[1:] for c in CONSUMED], ids=[c[0] for c in CONSUMED])
def test_consumed(old: str, new: str | None, ok: bool) -> None:
    assert podkeys.consumed(old, new) is ok


# --- every vendor, from real decisions --------------------------------------------------------------------


def test_every_vendor_declares_its_lists_and_known_roles() -> None:
    keys = podkeys.declared(VENDORS)
    for vendor in VENDORS:
        for name in (vendor.allocated_annotation, vendor.to_allocate_annotation):
            assert not name or keys[name].role == ALLOCATION, (vendor.key, name)
        for key in vendor.pod_keys:
            assert key.role in ROLES and (key.role != FLAG or key.plugin), (vendor.key, key)


def _written(scenario: MixedScenario) -> dict[str, str]:
    ctx = context(
        scenario.pod, gpu_policy=scenario.gpu_policy, node_policy=scenario.node_policy, vendors=VENDORS
    )
    nodes = {n.name: n for n in scenario.nodes}
    winner = decide(ctx, list(nodes), nodes, scenario.usage, VENDORS).winner
    if winner is None or winner.devices is None:
        return {}
    return allocation_annotations(winner.node, winner.devices, VENDORS, 1, scenario.pod, 7)


@EXAMPLES
@given(scenarios(max_nodes=2))
def test_every_written_key_is_declared_and_protected(scenario: MixedScenario) -> None:
    written = _written(scenario)
    keys = podkeys.declared(VENDORS)
    assert set(written) <= set(keys), set(written) - set(keys)
    assert set(create(written).stripped) == set(written)
    for name, value in written.items():
        for node in ("", "n1"):
            assert not update(written, {**written, name: value + "9"}, "alice", node).allowed, name
            assert not update(written, {k: v for k, v in written.items() if k != name}, "alice", node).allowed
        changed = update(written, {**written, name: value + "9"}, TRUSTED, "n1")
        assert changed.allowed is (keys[name].role != ALLOCATION), (name, changed.message)
    assert update(written, dict(written), "alice", "n1").allowed  # no change: nothing to deny


@EXAMPLES
@given(scenarios(max_nodes=2))
def test_a_decisions_keys_are_accounted_and_a_stray_one_is_not(scenario: MixedScenario) -> None:
    """What `inspect` checks on every pod: a key a plugin allocates from comes with the allocated list the
    ledger counts; without that list it is named."""
    written = _written(scenario)
    assert podkeys.unaccounted(written, VENDORS) == []
    for vendor in VENDORS:
        listed = vendor.allocated_annotation
        if listed in written:
            rest = {k: v for k, v in written.items() if k != listed}
            own = {k.name for k in vendor.pod_keys if k.role == "allocation"} - {listed}
            assert podkeys.unaccounted(rest, VENDORS) == sorted(own & set(rest)), vendor.key
