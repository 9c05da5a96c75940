"""The webhook's matchConditions select every request the webhook could change or refuse, and nothing a
plain pod sends (issue 28, findings 1 and 3); their lists come from the vendors' declarations.

One source of truth: generated/admission-scope.json is `python -m app.cli keys --chart` (checked equal
here), and the chart builds the CEL from it and its own device config. For each value set below the
service's own vendors are built from what the chart renders (its device-config.yaml and --enable flags), and
every resource name they read and every pod key they declare must pass the rendered name tests, while the
names of ordinary pods must not. A property test then holds the webhook itself to the rendered data: a pod
the conditions leave out is admitted untouched.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import chartscope
from app.core import podkeys, quota
from app.core.admission import SKIPPED, AdmissionSettings, admit
from app.core.review import AdmissionInput
from app.devices import build_vendors

REPO = Path(__file__).resolve().parents[2]
GENERATED = REPO / chartscope.GENERATED
ASCEND_CHIP = {"commonWord": "MyNPU", "chipName": "x", "memoryAllocatable": 1, "memoryCapacity": 1}


def condition(manifests: Any) -> str:
    config = manifests.one("MutatingWebhookConfiguration")
    [match] = config["webhooks"][0]["matchConditions"]
    expression: str = match["expression"]
    return expression


def name_test(expression: str, var: str) -> tuple[set[str], list[tuple[str, str]]]:
    """The first `(var in {...} || var.startsWith(..) || (var.startsWith(..) && var.endsWith(..)))` of the
    expression: its names and its (prefix, suffix) pairs."""
    start = expression.index(f"({var} in {{")
    depth, end = 0, start
    while True:
        depth += {"(": 1, ")": -1}.get(expression[end], 0)
        if depth == 0:
            break
        end += 1
    names: set[str] = set()
    pairs: list[tuple[str, str]] = []
    for term in expression[start + 1 : end].split(" || "):
        if term.startswith(f"{var} in "):
            names |= set(json.loads(term.removeprefix(f"{var} in ")))
            continue
        found = re.fullmatch(
            rf'\(?{var}\.startsWith\(("[^"]*")\)(?: && {var}\.endsWith\(("[^"]*")\)\))?', term
        )
        assert found, f"unexpected term {term!r}"
        pairs.append((json.loads(found[1]), json.loads(found[2] or '""')))
    return names, pairs


def passes(name: str, test: tuple[set[str], list[tuple[str, str]]]) -> bool:
    names, pairs = test
    return name in names or any(name.startswith(p) and name.endswith(s) for p, s in pairs)


def service_vendors(manifests: Any) -> tuple[Any, ...]:
    """The vendors the service builds from what the chart renders (HAMI_DEVICE_CONFIG_FILE, HAMI_ENABLE_*)."""
    config = yaml.safe_load(manifests.one("ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"])
    env = manifests.env("webhook")
    flags = frozenset(f for f in ("ascend", "iluvatar") if env.get(f"HAMI_ENABLE_{f.upper()}") == "true")
    return build_vendors(config, flags)


def resource_names(vendors: tuple[Any, ...]) -> set[str]:
    return {name for v in vendors for name in chartscope.resource_names(v.resources) if name}


def test_the_chart_carries_what_the_command_prints() -> None:
    assert json.loads(GENERATED.read_text()) == chartscope.scope(), (
        f"{chartscope.GENERATED} is stale: run `python -m app.cli keys --chart > {chartscope.GENERATED}`"
    )


VALUE_SETS = [
    pytest.param({}, id="default"),
    pytest.param({"devices.hygon.enabled": True, "devices.amd.enabled": True}, id="hygon-amd"),
    pytest.param({"devices.metax.enabled": True, "devices.kunlun.enabled": True}, id="metax-kunlun"),
    pytest.param({"devices.cambricon.enabled": True, "devices.mthreads.enabled": True}, id="mlu-mthreads"),
    pytest.param({"devices.awsneuron.enabled": True, "devices.vastai.enabled": True}, id="neuron-vastai"),
    pytest.param({"devices.biren.enabled": True, "devices.enflame.enabled": True}, id="biren-enflame"),
    pytest.param({"devices.ascend.enabled": True, "devices.iluvatar.enabled": True}, id="ascend-iluvatar"),
    pytest.param({"devices.ascend.enabled": True, "devices.ascend.configs": [ASCEND_CHIP]}, id="ascend-chip"),
    pytest.param(
        {
            "deviceConfig.nvidia.resourceCountName": "example.com/vgpu",
            "kubeScheduler.managedResources": [
                "example.com/vgpu",
                "nvidia.com/gpumem",
                "nvidia.com/gpumem-percentage",
                "nvidia.com/gpucores",
                "nvidia.com/priority",
            ],
        },
        id="renamed-count",
    ),
    pytest.param(
        {
            "deviceConfig.content": "nvidia:\n  resourceCountName: acme.io/gpu\n",
            "kubeScheduler.managedResources": ["acme.io/gpu"],
        },
        id="content",
    ),
]


@pytest.mark.parametrize("overrides", VALUE_SETS)
def test_every_name_the_service_reads_is_sent(render: Any, overrides: dict[str, Any]) -> None:
    manifests = render("default", overrides)
    expression = condition(manifests)
    vendors = service_vendors(manifests)
    managed, owned = name_test(expression, "r"), name_test(expression, "k")
    assert {n for n in resource_names(vendors) if not passes(n, managed)} == set()
    declared = podkeys.declared(vendors)
    assert {k for k in declared if not passes(k, owned)} == set()
    for plain in ("cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "example.com/fpga"):
        assert not passes(plain, managed), plain
    for plain in ("kubectl.kubernetes.io/restartedAt", "example.com/note", "hami.io/gpu-scheduler-policy"):
        assert not passes(plain, owned), plain
    assert "request.operation == 'CREATE' ? true " not in expression  # no vendor mutates every pod


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"deviceConfig.nvidia.overwriteEnv": True}, id="nvidia-overwrite-env"),
        pytest.param({"deviceConfig.nvidia.gpuCorePolicy": "force"}, id="gpu-core-policy"),
        pytest.param(
            {
                "devices.ascend.enabled": True,
                "devices.ascend.configs": [{**ASCEND_CHIP, "overwriteEnv": True}],
            },
            id="ascend-overwrite-env",
        ),
        pytest.param({"webhook.everyPod": True}, id="asked"),
    ],
)
def test_a_mutation_of_every_pod_sends_every_pod(render: Any, overrides: dict[str, Any]) -> None:
    assert "request.operation == 'CREATE' ? true " in condition(render("default", overrides))


def test_an_existing_config_map_counts_every_family(render: Any) -> None:
    """Its names are not known at render time: every family's chart names, and managedResources."""
    managed = name_test(condition(render("default", {"deviceConfig.existingConfigMap": "hami-device"})), "r")
    for family in json.loads(GENERATED.read_text())["families"]:
        if not family["flag"]:
            assert all(passes(name, managed) for name in family["resources"]), family["section"]


# --- the webhook itself, held to the rendered data --------------------------------------------------------

VENDORS = build_vendors(None)  # the chart's default config: NVIDIA and Enflame's DRS names
NAMES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores",
                         "nvidia.com/gpumem-percentage", "nvidia.com/priority", "enflame.com/drs-gcu",
                         "enflame.com/gcu-memory", "amd.com/gpu", "example.com/x"])  # fmt: skip
KEYS = st.sampled_from(["a", "hami.io/vgpu-node", "hami.io/bind-phase", "hami.io/gpu-scheduler-policy",
                        "hami.io/x-devices-allocated", "enflame.com/gcu-assigned-id",
                        "nvidia.com/use-gputype"])  # fmt: skip
RESOURCES = st.dictionaries(NAMES, st.sampled_from(["1", "2", "50", "100", "16Gi", "-1"]), max_size=3)
CONTAINER = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b"]), "image": st.just("i")},
    optional={"resources": st.fixed_dictionaries({}, optional={"limits": RESOURCES, "requests": RESOURCES})},
)
POD = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("Pod"),
        "metadata": st.fixed_dictionaries(
            {"name": st.just("p")}, optional={"annotations": st.dictionaries(KEYS, st.just("v"), max_size=2)}
        ),
        "spec": st.fixed_dictionaries(
            {
                "containers": st.lists(CONTAINER, min_size=1, max_size=2),
                "schedulerName": st.sampled_from(["default-scheduler", "hami-scheduler", "other"]),
            },
            optional={"initContainers": st.lists(CONTAINER, max_size=1)},
        ),
    }
)


def sent(pod: dict[str, Any], owned: Any, managed: Any) -> bool:
    """The rendered CREATE condition on `pod`, in Python (the CEL's structure, the CEL's lists)."""
    if any(passes(key, owned) for key in pod["metadata"].get("annotations") or {}):
        return True
    containers = [*pod["spec"]["containers"], *(pod["spec"].get("initContainers") or [])]
    return any(
        passes(name, managed)
        for c in containers
        for section in ("limits", "requests")
        for name in (c.get("resources") or {}).get(section) or {}
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pod=POD)
def test_a_pod_the_conditions_leave_out_is_admitted_untouched(render: Any, pod: dict[str, Any]) -> None:
    expression = condition(render("default"))
    if sent(pod, name_test(expression, "k"), name_test(expression, "r")):
        return
    outcome = admit(
        AdmissionInput("u", "CREATE", pod, namespace="default"),
        AdmissionSettings(),
        VENDORS,
        quota.build_view({}, {}),
    )
    assert (outcome.allowed, outcome.patch, outcome.warnings) == (True, (), ()), outcome
    assert outcome.message in ("", SKIPPED), outcome  # HAMi's skip rule says why, and changes nothing
