"""The webhook decision (reference §6, §1.2, quirks #31-#34) and our changes (HAMi #3041, quirk #5).

Expected values are written from the reference, not computed with the code under test.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.admission import (
    AdmissionInput,
    AdmissionOutcome,
    AdmissionSettings,
    ReviewError,
    admit,
    parse_review,
    review_response,
    scheduler_owned,
)
from app.core.model import QuotaEntry, QuotaView
from app.core.quota import build_view
from app.core.review import V1, V1BETA1
from app.devices.nvidia.config import NvidiaConfig
from app.devices.nvidia.device import Nvidia

SCHEDULER_SA = "system:serviceaccount:kube-system:hami-scheduler"
PLUGIN_SA = "system:serviceaccount:kube-system:hami-device-plugin"
FORGED = {
    "hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,80000,100:;",
    "hami.io/vgpu-devices-to-allocate": "GPU-0,NVIDIA,80000,100:;",
    "hami.io/vgpu-node": "gpu-node-1",
    "hami.io/vgpu-time": "1700000000",
    "hami.io/bind-phase": "allocating",
    "hami.io/bind-time": "1700000000",
    "hami.io/vgpu-mig-allocations": "x",
}
USER_ANNOTATIONS = {"hami.io/gpu-scheduler-policy": "binpack", "nvidia.com/use-gputype": "A100", "team": "ml"}


def vendors(**config: Any) -> tuple[Nvidia, ...]:
    return (Nvidia(NvidiaConfig(**config)),)


def ctr(name: str = "c", limits: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "cuda"}
    if limits is not None:
        container["resources"] = {"limits": limits}
    container.update(extra)
    return container


def make_pod(
    *containers: dict[str, Any],
    init: tuple[dict[str, Any], ...] = (),
    scheduler: str | None = "default-scheduler",
    annotations: dict[str, str] | None = None,
    namespace: str = "team",
    **spec: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": namespace, "uid": "uid-1"}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    body: dict[str, Any] = {"containers": list(containers), **spec}
    if init:
        body["initContainers"] = list(init)
    if scheduler is not None:
        body["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


GPU = ctr(limits={"nvidia.com/gpu": "1"})
CPU = ctr("side", limits={"cpu": "1"})


def run(
    pod: Any,
    *,
    config: dict[str, Any] | None = None,
    settings_: AdmissionSettings | None = None,
    quota: QuotaView | None = None,
    operation: str = "CREATE",
    old: Any = None,
    user: str = "",
) -> AdmissionOutcome:
    request = AdmissionInput(uid="uid-1", operation=operation, pod=pod, old_pod=old, username=user)
    return admit(request, settings_ or AdmissionSettings(), vendors(**(config or {})), quota or {})


def ops_of(outcome: AdmissionOutcome) -> list[str]:
    return sorted(json.dumps(op, sort_keys=True) for op in outcome.patch)


def ops(*items: tuple[str, str] | tuple[str, str, Any]) -> list[str]:
    result = []
    for item in items:
        op: dict[str, Any] = {"op": item[0], "path": item[1]}
        if len(item) == 3:
            op["value"] = item[2]
        result.append(json.dumps(op, sort_keys=True))
    return sorted(result)


SCHED = ("replace", "/spec/schedulerName", "hami-scheduler")
PCT_RULE = "must be an integer between 0 and 100"
CORES0 = ("add", "/spec/containers/0/resources/limits/nvidia.com~1gpucores", "100")


# --- §6.1 step 1: decoding -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(None, "there is no content to decode", id="no-object"),
        pytest.param(["not", "a", "pod"], "request.object must be a Pod object, got list", id="list"),
        pytest.param({"kind": "Deployment", "spec": {}}, "must be a v1 Pod", id="wrong-kind"),
        pytest.param(
            {"spec": {"containers": "c"}}, "request.object.spec.containers must be a list", id="ctrs"
        ),
        pytest.param({"spec": []}, "request.object.spec must be an object", id="spec"),
        pytest.param(
            {"spec": {"containers": [{"name": "c", "resources": {"limits": ["x"]}}]}},
            "request.object.spec.containers[0].resources.limits must be an object",
            id="limits",
        ),
        pytest.param(
            {"metadata": {"annotations": {"a": 1}}, "spec": {"containers": [{"name": "c"}]}},
            "request.object.metadata.annotations[a] must be a string",
            id="annotation-value",
        ),
        pytest.param(
            {"spec": {"initContainers": [{"name": "i", "securityContext": {"privileged": "yes"}}]}},
            "request.object.spec.initContainers[0].securityContext.privileged must be a boolean",
            id="privileged",
        ),
    ],
)
def test_undecodable_pod_is_errored_400(obj: Any, message: str) -> None:
    outcome = run(obj)
    assert (outcome.allowed, outcome.code, outcome.reason, outcome.patch) == (False, 400, "", ())
    assert message in outcome.message


# --- step 2: no containers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod(), id="empty-list"),
        pytest.param({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, id="no-spec"),
        pytest.param(make_pod(init=(GPU,)), id="only-init"),
    ],
)
def test_pod_without_regular_containers_is_denied(pod: dict[str, Any]) -> None:
    outcome = run(pod)
    assert (outcome.allowed, outcome.code, outcome.reason) == (False, 403, "Forbidden")
    assert outcome.message == "pod has no containers"


# --- step 3: the skip rule -------------------------------------------------------------------------

# (pod schedulerName, force overwrite, --scheduler-name, skipped?) - §6.1 step 3, all 16 combinations.
SKIP_TABLE = [
    ("", True, "hami-scheduler", False),
    ("", False, "hami-scheduler", False),
    ("", True, "", False),
    ("", False, "", False),
    ("default-scheduler", True, "hami-scheduler", False),
    ("default-scheduler", False, "hami-scheduler", True),
    ("default-scheduler", True, "", False),
    ("default-scheduler", False, "", True),
    ("hami-scheduler", True, "hami-scheduler", False),
    ("hami-scheduler", False, "hami-scheduler", False),
    ("hami-scheduler", True, "", True),
    ("hami-scheduler", False, "", True),
    ("volcano", True, "hami-scheduler", True),
    ("volcano", False, "hami-scheduler", True),
    ("volcano", True, "", True),
    ("volcano", False, "", True),
]


@pytest.mark.parametrize(
    ("pod_scheduler", "force", "name", "skipped"),
    SKIP_TABLE,
    ids=[f"{s or 'empty'}-force={f}-flag={n or 'empty'}" for s, f, n, _ in SKIP_TABLE],
)
def test_skip_rule(pod_scheduler: str, force: bool, name: str, skipped: bool) -> None:
    outcome = run(
        make_pod(GPU, scheduler=pod_scheduler),
        settings_=AdmissionSettings(scheduler_name=name, force_overwrite_default_scheduler=force),
    )
    assert outcome.allowed
    if skipped:
        assert outcome.message == "pod already has different scheduler assigned"
        assert outcome.patch == ()
    else:
        assert outcome.message == ""
        assert CORES0[1] in {op["path"] for op in outcome.patch}  # mutated


# --- steps 4-6: the NVIDIA mutation (§6.2) and schedulerName ----------------------------------------


@dataclass(frozen=True)
class MutationCase:
    id: str
    pod: dict[str, Any]
    expected: list[str]
    config: dict[str, Any] = field(default_factory=dict)


def env_add(path: str, *pairs: tuple[str, str]) -> tuple[str, str, Any]:
    return ("add", path, [{"name": n, "value": v} for n, v in pairs])


MUTATIONS = [
    MutationCase("worked-example", make_pod(GPU), ops(CORES0, SCHED)),
    MutationCase(
        "memory-implies-default-gpu-num",
        make_pod(ctr(limits={"nvidia.com/gpumem": "4000"})),
        ops(("add", "/spec/containers/0/resources/limits/nvidia.com~1gpu", "1"), SCHED),
    ),
    MutationCase(
        "cores-with-default-gpu-num-2",
        make_pod(ctr(limits={"nvidia.com/gpucores": "30"})),
        ops(("add", "/spec/containers/0/resources/limits/nvidia.com~1gpu", "2"), SCHED),
        {"default_gpu_num": 2},
    ),
    MutationCase(
        "default-gpu-num-0-means-no-gpu",
        make_pod(ctr(limits={"nvidia.com/gpumem": "4000"})),
        [],
        {"default_gpu_num": 0},
    ),
    MutationCase(
        "gpu-with-memory-is-shared",
        make_pod(ctr(limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"})),
        ops(SCHED),
    ),
    MutationCase(
        "percentage-100-is-exclusive",
        make_pod(ctr(limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"})),
        ops(CORES0, SCHED),
    ),
    MutationCase(
        "percentage-50-is-shared",
        make_pod(ctr(limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"})),
        ops(SCHED),
    ),
    MutationCase(
        "explicit-cores-kept",
        make_pod(ctr(limits={"nvidia.com/gpu": "1", "nvidia.com/gpucores": "20"})),
        ops(SCHED),
    ),
    MutationCase(
        "exclusive-ignores-default-memory",
        make_pod(GPU),
        ops(CORES0, SCHED),
        {"default_memory": 2048, "default_cores": 10},
    ),
    MutationCase(
        "gpu-in-requests-only-via-exclusive-path",
        make_pod(ctr(resources={"requests": {"nvidia.com/gpu": "1"}})),
        ops(("add", "/spec/containers/0/resources/limits", {"nvidia.com/gpucores": "100"}), SCHED),
    ),
    MutationCase(
        "init-container-first",
        make_pod(CPU, init=(ctr("init", limits={"nvidia.com/gpu": "1"}),)),
        ops(("add", "/spec/initContainers/0/resources/limits/nvidia.com~1gpucores", "100"), SCHED),
    ),
    MutationCase(
        "priority-env",
        make_pod(
            ctr(limits={"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50", "nvidia.com/priority": "1"})
        ),
        ops(env_add("/spec/containers/0/env", ("CUDA_TASK_PRIORITY", "1")), SCHED),
    ),
    MutationCase(
        "core-policy-env-on-every-container",
        make_pod(
            ctr(limits={"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50"}),
            CPU,
            init=(ctr("init"),),
        ),
        ops(
            env_add("/spec/initContainers/0/env", ("GPU_CORE_UTILIZATION_POLICY", "force")),
            env_add("/spec/containers/0/env", ("GPU_CORE_UTILIZATION_POLICY", "force")),
            env_add("/spec/containers/1/env", ("GPU_CORE_UTILIZATION_POLICY", "force")),
            SCHED,
        ),
        {"gpu_core_policy": "force"},
    ),
    MutationCase(
        "core-policy-env-on-non-gpu-pod",
        make_pod(CPU),
        ops(env_add("/spec/containers/0/env", ("GPU_CORE_UTILIZATION_POLICY", "disable"))),
        {"gpu_core_policy": "disable"},
    ),
    MutationCase(
        "overwrite-env-on-non-gpu-containers-only",
        make_pod(GPU, ctr("side", env=[{"name": "A", "value": "1"}])),
        ops(
            CORES0,
            ("add", "/spec/containers/1/env/1", {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}),
            SCHED,
        ),
        {"overwrite_env": True},
    ),
    MutationCase(
        "runtime-class-for-gpu-pod",
        make_pod(GPU),
        ops(CORES0, SCHED, ("add", "/spec/runtimeClassName", "nvidia")),
        {"runtime_class_name": "nvidia"},
    ),
    MutationCase(
        "runtime-class-kept-when-set",
        make_pod(GPU, runtimeClassName="kata"),
        ops(CORES0, SCHED),
        {"runtime_class_name": "nvidia"},
    ),
    MutationCase("runtime-class-not-for-cpu-pod", make_pod(CPU), [], {"runtime_class_name": "nvidia"}),
    MutationCase("cpu-pod-untouched", make_pod(CPU), []),
    MutationCase(
        "empty-scheduler-name-is-added",
        make_pod(GPU, scheduler=None),
        ops(CORES0, ("add", "/spec/schedulerName", "hami-scheduler")),
    ),
    MutationCase(
        "privileged-without-gpu-passes",
        make_pod(ctr("priv", securityContext={"privileged": True})),
        [],
    ),
    MutationCase("node-name-without-gpu-passes", make_pod(CPU, nodeName="n1"), []),
]


@pytest.mark.parametrize("case", MUTATIONS, ids=[c.id for c in MUTATIONS])
def test_mutation(case: MutationCase) -> None:
    outcome = run(case.pod, config=case.config)
    assert (outcome.allowed, outcome.code, outcome.message) == (True, 200, "")
    assert ops_of(outcome) == case.expected


def test_node_name_with_empty_scheduler_flag_is_not_denied() -> None:
    outcome = run(make_pod(GPU, nodeName="n1"), settings_=AdmissionSettings(scheduler_name=""))
    assert outcome.allowed
    assert ops_of(outcome) == ops(CORES0)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "150"},
            f"invalid nvidia.com/gpumem-percentage value 150 in container c: {PCT_RULE}",
            id="percentage-150",
        ),
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "-1"},
            f"invalid nvidia.com/gpumem-percentage value -1 in container c: {PCT_RULE}",
            id="percentage-negative",
        ),
    ],
)
def test_mutation_error_is_errored_500(limits: dict[str, str], message: str) -> None:
    outcome = run(make_pod(ctr(limits=limits)))
    assert (outcome.allowed, outcome.code, outcome.reason, outcome.message) == (False, 500, "", message)


@pytest.mark.parametrize(
    ("limits", "fragment"),
    [
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "16Gi"},
            "invalid nvidia.com/gpumem value 16Gi",
            id="16Gi",
        ),
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "-5"},
            "invalid nvidia.com/gpucores value -5",
            id="neg-cores",
        ),
        pytest.param({"nvidia.com/gpu": "-1"}, "invalid nvidia.com/gpu value -1", id="neg-count"),
    ],
)
def test_invalid_request_is_errored_400(limits: dict[str, str], fragment: str) -> None:
    outcome = run(make_pod(ctr(limits=limits)))
    assert (outcome.allowed, outcome.code, outcome.patch) == (False, 400, ())
    assert outcome.message.startswith(fragment)
    assert outcome.message.endswith("in container c")


# --- steps 5-7: denials ----------------------------------------------------------------------------


PRIV = {"privileged": True}
DENIALS = [
    pytest.param(
        make_pod(ctr(limits={"nvidia.com/gpu": "1"}, securityContext=PRIV)),
        "container c is privileged",
        id="gpu-ctr",
    ),
    pytest.param(
        make_pod(GPU, ctr("other", securityContext=PRIV)), "container other is privileged", id="other-ctr"
    ),
    pytest.param(
        make_pod(ctr("a", securityContext=PRIV), GPU, init=(ctr("i", securityContext=PRIV),)),
        "container i is privileged",
        id="init-first",
    ),
    pytest.param(make_pod(GPU, nodeName="n1"), "pod has node assigned", id="node-name"),
    pytest.param(
        make_pod(GPU, scheduler="hami-scheduler", nodeName="n1"), "pod has node assigned", id="node-name-ours"
    ),
]


@pytest.mark.parametrize(("pod", "message"), DENIALS)
def test_denied(pod: dict[str, Any], message: str) -> None:
    outcome = run(pod)
    assert (outcome.allowed, outcome.code, outcome.reason, outcome.message) == (
        False,
        403,
        "Forbidden",
        message,
    )
    assert outcome.patch == () and outcome.pod is None


def test_privileged_false_is_not_privileged() -> None:
    pod = make_pod(ctr(limits={"nvidia.com/gpu": "1"}, securityContext={"privileged": False}))
    assert run(pod).allowed


CORES = "nvidia.com/gpucores"
MEM = "nvidia.com/gpumem"


def _over(resource: str, used: int, limit: int, requested: int) -> str:
    """HAMi's denial, then the resource, the namespace's usage, the limit and the request."""
    return (
        f"exceeding resource quota: limits.{resource} in namespace team: used {used}, limit {limit}, "
        f"requested {requested}"
    )


@pytest.mark.parametrize(
    ("limits", "used", "pod", "denial"),
    [
        pytest.param(
            {CORES: 100},
            {CORES: 50},
            make_pod(GPU),
            _over(CORES, 50, 100, 100),
            id="exclusive-counts-100-cores",
        ),
        pytest.param({CORES: 150}, {CORES: 50}, make_pod(GPU), None, id="exactly-at-limit"),
        pytest.param({CORES: 0}, {}, make_pod(GPU), _over(CORES, 0, 0, 100), id="zero-limit-blocks"),
        pytest.param(
            {MEM: 8000},
            {MEM: 5000},
            make_pod(ctr(limits={"nvidia.com/gpu": "1", MEM: "4000"})),
            _over(MEM, 5000, 8000, 4000),
            id="memory",
        ),
        pytest.param(
            {MEM: 8000},
            {MEM: 4000},
            make_pod(ctr(limits={"nvidia.com/gpu": "1", MEM: "4000"})),
            None,
            id="memory-fits",
        ),
        pytest.param(
            {MEM: 8000},
            {MEM: 4000},
            make_pod(ctr(limits={"nvidia.com/gpu": "2", MEM: "4000"})),
            _over(MEM, 4000, 8000, 8000),
            id="memory-times-count",
        ),
        pytest.param(
            {MEM: 100},
            {},
            make_pod(ctr(limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"})),
            None,
            id="percentage-counts-zero",
        ),
        pytest.param({CORES: 10}, {}, make_pod(CPU), None, id="cpu-pod"),
        pytest.param({CORES: 10}, {}, make_pod(GPU, namespace="other"), None, id="other-namespace"),
    ],
)
def test_quota(limits: dict[str, int], used: dict[str, int], pod: dict[str, Any], denial: str | None) -> None:
    outcome = run(pod, quota=build_view({"team": limits}, {"team": used}))
    assert outcome.allowed is (denial is None)
    if denial is not None:
        assert (outcome.code, outcome.reason, outcome.message) == (403, "Forbidden", denial)


def test_quota_namespace_comes_from_the_request_when_the_object_has_none() -> None:
    pod = make_pod(GPU)
    del pod["metadata"]["namespace"]
    request = AdmissionInput(uid="u", operation="CREATE", pod=pod, namespace="team")
    view = build_view({"team": {CORES: 50}}, {})
    outcome = admit(request, AdmissionSettings(), vendors(), view)
    assert (outcome.allowed, outcome.message) == (
        False,
        "exceeding resource quota: limits.nvidia.com/gpucores in namespace team: used 0, limit 50, "
        "requested 100",
    )
    assert admit(dataclasses.replace(request, namespace=""), AdmissionSettings(), vendors(), view).allowed


def test_quota_uses_memory_factor() -> None:
    pod = make_pod(ctr(limits={"nvidia.com/gpu": "1", MEM: "3000"}))  # 6000 after factor 2
    view: QuotaView = {"team": {MEM: QuotaEntry(used=0, limit=3000, limit_set=True)}}
    assert run(pod, config={"memory_factor": 2}, quota=view).allowed
    assert not run(pod, config={"memory_factor": 2}, quota={"team": {MEM: QuotaEntry(0, 2999, True)}}).allowed


def test_worked_example_patch_has_exactly_two_ops() -> None:
    outcome = run(make_pod(ctr(limits={"nvidia.com/gpu": "1"})))
    assert len(outcome.patch) == 2
    assert ops_of(outcome) == ops(CORES0, SCHED)
    assert outcome.pod is not None and outcome.pod["spec"]["schedulerName"] == "hami-scheduler"


def test_admit_does_not_modify_its_input() -> None:
    pod = make_pod(GPU, annotations=FORGED)
    before = copy.deepcopy(pod)
    run(pod, config={"gpu_core_policy": "force", "runtime_class_name": "nvidia"})
    assert pod == before


# --- scheduler-owned annotations (HAMi #3041) --------------------------------------------------------


def test_owned_keys() -> None:
    nvidia = vendors()
    assert all(scheduler_owned(key, nvidia) for key in FORGED)
    assert not any(scheduler_owned(key, nvidia) for key in USER_ANNOTATIONS)
    assert not scheduler_owned("hami.io/node-handshake", nvidia)


@pytest.mark.parametrize(
    ("scheduler", "message", "extra_ops"),
    [
        pytest.param("default-scheduler", "", [CORES0, SCHED], id="ours"),
        pytest.param("volcano", "pod already has different scheduler assigned", [], id="foreign-skipped"),
    ],
)
def test_forged_annotations_are_stripped_on_create(
    scheduler: str, message: str, extra_ops: list[Any]
) -> None:
    pod = make_pod(GPU, scheduler=scheduler, annotations={**USER_ANNOTATIONS, **FORGED})
    outcome = run(pod)
    assert (outcome.allowed, outcome.message) == (True, message)
    assert outcome.stripped == tuple(FORGED)
    removals = [("remove", "/metadata/annotations/" + key.replace("/", "~1")) for key in FORGED]
    assert ops_of(outcome) == ops(*removals, *extra_ops)
    assert outcome.pod is not None and outcome.pod["metadata"]["annotations"] == USER_ANNOTATIONS
    assert len(outcome.warnings) == len(FORGED)
    assert all(key in warning for key, warning in zip(FORGED, outcome.warnings, strict=True))


def test_denied_pod_lists_forged_annotations_without_warning() -> None:
    """Nothing is created, so nothing is "removed": the keys are kept on the outcome for the log only."""
    outcome = run(make_pod(GPU, nodeName="n1", annotations=FORGED))
    assert not outcome.allowed and outcome.patch == ()
    assert outcome.stripped == tuple(FORGED) and outcome.warnings == ()


def test_no_warning_without_forged_annotations() -> None:
    outcome = run(make_pod(GPU, annotations=USER_ANNOTATIONS))
    assert outcome.stripped == () and outcome.warnings == ()


UPDATE_CASES = [
    # (id, old annotations, new annotations, user, allowed)
    ("untrusted-adds", {}, {"hami.io/vgpu-node": "n1"}, "alice", False),
    ("untrusted-changes", {"hami.io/vgpu-node": "n1"}, {"hami.io/vgpu-node": "n2"}, "alice", False),
    ("untrusted-removes", {"hami.io/vgpu-devices-allocated": "x"}, {}, "alice", False),
    ("anonymous-adds-bind-phase", {}, {"hami.io/bind-phase": "success"}, "", False),
    ("untrusted-unrelated-change", {**FORGED, "a": "1"}, {**FORGED, "a": "2"}, "alice", True),
    ("scheduler-writes-allocation", {}, FORGED, SCHEDULER_SA, True),
    (
        "device-plugin-sets-phase",
        {"hami.io/bind-phase": "allocating"},
        {"hami.io/bind-phase": "success"},
        PLUGIN_SA,
        True,
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "user", "allowed"), [c[1:] for c in UPDATE_CASES], ids=[c[0] for c in UPDATE_CASES]
)
def test_update_of_owned_annotations(
    old: dict[str, str], new: dict[str, str], user: str, allowed: bool
) -> None:
    outcome = run(
        make_pod(GPU, annotations=new), operation="UPDATE", old=make_pod(GPU, annotations=old), user=user
    )
    assert outcome.allowed is allowed
    assert outcome.patch == ()  # UPDATE never mutates (HAMi's webhook is CREATE-only)
    if not allowed:
        assert (outcome.code, outcome.reason) == (403, "Forbidden")
        assert "may not change scheduler-owned annotations" in outcome.message


MIG_OLD = (
    '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.10gb",'
    '"placement":{"start":0,"size":1}}]'
)
MIG_IDENTIFIED = MIG_OLD.replace(
    '"size":1}}', '"size":1},"migUUID":"MIG-1","gpuInstanceID":1,"computeInstanceID":0}'
)
MIG_MOVED = MIG_OLD.replace('"start":0', '"start":1')
ALLOCATED = {"hami.io/vgpu-node": "n1", "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,1000,0:;"}
BOUND_CASES = [
    # (id, old annotations, new annotations, user, allowed) on a pod bound to n1
    ("scheduler-moves-node", ALLOCATED, {**ALLOCATED, "hami.io/vgpu-node": "n2"}, SCHEDULER_SA, False),
    (
        "scheduler-rewrites-devices",
        ALLOCATED,
        {**ALLOCATED, "hami.io/vgpu-devices-allocated": "GPU-b,NVIDIA,1000,0:;"},
        SCHEDULER_SA,
        False,
    ),
    ("plugin-removes-allocation", ALLOCATED, {"hami.io/vgpu-node": "n1"}, PLUGIN_SA, False),
    ("plugin-sets-phase", ALLOCATED, {**ALLOCATED, "hami.io/bind-phase": "success"}, PLUGIN_SA, True),
    (
        "plugin-pops-to-allocate",
        {**ALLOCATED, "hami.io/vgpu-devices-to-allocate": "GPU-a,NVIDIA,1000,0:;"},
        {**ALLOCATED, "hami.io/vgpu-devices-to-allocate": ";"},
        PLUGIN_SA,
        True,
    ),
    (
        "plugin-adds-mig-identity",
        {**ALLOCATED, "hami.io/vgpu-mig-allocations": MIG_OLD},
        {**ALLOCATED, "hami.io/vgpu-mig-allocations": MIG_IDENTIFIED},
        PLUGIN_SA,
        True,
    ),
    (
        "scheduler-moves-mig-slice",
        {**ALLOCATED, "hami.io/vgpu-mig-allocations": MIG_OLD},
        {**ALLOCATED, "hami.io/vgpu-mig-allocations": MIG_MOVED},
        SCHEDULER_SA,
        False,
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "user", "allowed"), [c[1:] for c in BOUND_CASES], ids=[c[0] for c in BOUND_CASES]
)
def test_a_bound_pods_allocation_is_immutable(
    old: dict[str, str], new: dict[str, str], user: str, allowed: bool
) -> None:
    """Issue 11: even a trusted user may not move a bound pod's allocation (the devices were handed to
    its containers); the device plugin's own writes stay allowed."""
    outcome = run(
        make_pod(GPU, annotations=new, nodeName="n1"),
        operation="UPDATE",
        old=make_pod(GPU, annotations=old, nodeName="n1"),
        user=user,
    )
    assert outcome.allowed is allowed, outcome.message
    if not allowed:
        assert outcome.message.startswith("the allocation of a bound pod is immutable: ")


def test_update_denial_names_user_and_keys() -> None:
    old = make_pod(GPU)
    new = make_pod(GPU, annotations={"hami.io/vgpu-time": "1", "hami.io/vgpu-node": "n"})
    outcome = run(new, operation="UPDATE", old=old, user="alice")
    assert (
        outcome.message
        == "alice may not change scheduler-owned annotations: hami.io/vgpu-node, hami.io/vgpu-time"
    )


def test_trusted_users_are_configurable() -> None:
    settings_ = AdmissionSettings(trusted_users=("system:serviceaccount:gpu:my-scheduler",))
    old, new = make_pod(GPU), make_pod(GPU, annotations={"hami.io/vgpu-node": "n"})
    assert run(
        new, operation="UPDATE", old=old, user="system:serviceaccount:gpu:my-scheduler", settings_=settings_
    ).allowed
    assert not run(new, operation="UPDATE", old=old, user=SCHEDULER_SA, settings_=settings_).allowed


def test_update_without_old_object_is_errored_400() -> None:
    outcome = run(make_pod(GPU), operation="UPDATE", old=None, user="alice")
    assert (outcome.allowed, outcome.code) == (False, 400)
    assert outcome.message == "request.oldObject: there is no content to decode"


def test_delete_is_allowed_untouched() -> None:
    outcome = run(None, operation="DELETE", old=make_pod(GPU, annotations=FORGED))
    assert (outcome.allowed, outcome.patch, outcome.message) == (True, (), "")


# --- the AdmissionReview envelope (§1.2) --------------------------------------------------------------


def review(api_version: str, pod: Any, **request: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "team",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": pod,
            **request,
        },
    }


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
def test_review_round_trip_with_patch(api_version: str) -> None:
    request = parse_review(review(api_version, make_pod(GPU, annotations={"hami.io/vgpu-node": "n"})))
    assert (request.operation, request.username, request.namespace) == ("CREATE", "alice", "team")
    outcome = admit(request, AdmissionSettings(), vendors(), {})
    body = review_response(outcome, request.uid, request.api_version)
    assert set(body) == {"apiVersion", "kind", "response"}
    assert (body["apiVersion"], body["kind"]) == (api_version, "AdmissionReview")
    response = body["response"]
    assert set(response) == {"uid", "allowed", "status", "patchType", "patch", "warnings"}
    assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert (response["allowed"], response["status"], response["patchType"]) == (
        True,
        {"code": 200},
        "JSONPatch",
    )
    patch = json.loads(base64.b64decode(response["patch"]))
    assert sorted(json.dumps(op, sort_keys=True) for op in patch) == ops(
        ("remove", "/metadata/annotations/hami.io~1vgpu-node"), CORES0, SCHED
    )
    assert response["warnings"] == list(outcome.warnings)


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
@pytest.mark.parametrize(
    ("pod", "status"),
    [
        pytest.param(make_pod(CPU), {"code": 200}, id="allowed-no-patch"),
        pytest.param(
            make_pod(GPU, scheduler="volcano"),
            {"code": 200, "message": "pod already has different scheduler assigned"},
            id="allowed-with-message",
        ),
        pytest.param(
            make_pod(GPU, nodeName="n1"),
            {"code": 403, "reason": "Forbidden", "message": "pod has node assigned"},
            id="denied",
        ),
        pytest.param(
            make_pod(ctr(limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "101"})),
            {
                "code": 500,
                "message": f"invalid nvidia.com/gpumem-percentage value 101 in container c: {PCT_RULE}",
            },
            id="errored",
        ),
    ],
)
def test_review_response_status(api_version: str, pod: dict[str, Any], status: dict[str, Any]) -> None:
    request = parse_review(review(api_version, pod))
    body = review_response(admit(request, AdmissionSettings(), vendors(), {}), request.uid, api_version)
    assert body["apiVersion"] == api_version
    assert body["response"] == {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "allowed": status["code"] == 200,
        "status": status,
    }


def test_parse_review_defaults() -> None:
    request = parse_review({"request": {"object": make_pod(GPU)}})
    assert (request.api_version, request.uid, request.operation, request.username) == (V1, "", "CREATE", "")
    update = parse_review(review(V1, make_pod(GPU), operation="UPDATE", oldObject=make_pod(CPU)))
    assert update.operation == "UPDATE" and update.old_pod == make_pod(CPU)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param([], "the body must be an AdmissionReview object", id="not-object"),
        pytest.param(
            {"apiVersion": "admission.k8s.io/v2", "request": {}},
            "unsupported AdmissionReview apiVersion",
            id="version",
        ),
        pytest.param(
            {"apiVersion": V1, "kind": "Pod", "request": {}}, "expected kind AdmissionReview", id="kind"
        ),
        pytest.param(
            {"apiVersion": V1, "kind": "AdmissionReview"}, "got an empty AdmissionRequest", id="no-request"
        ),
        pytest.param({"request": "x"}, "request must be an object", id="request-type"),
        pytest.param({"request": {"uid": 5}}, "request.uid must be a string", id="uid-type"),
        pytest.param(
            {"request": {"userInfo": "alice"}}, "request.userInfo must be an object", id="user-type"
        ),
        pytest.param(
            {"request": {"userInfo": {"username": 1}}},
            "request.userInfo.username must be a string",
            id="name",
        ),
    ],
)
def test_parse_review_rejects_malformed(body: Any, message: str) -> None:
    with pytest.raises(ReviewError, match=message):
        parse_review(body)


def test_denied_outcome_cannot_carry_a_patch() -> None:
    with pytest.raises(ValueError, match="no patch"):
        AdmissionOutcome(allowed=False, patch=({"op": "remove", "path": "/a"},))


# --- property: the patch is the mutation, and no scheduler-owned annotation survives ----------------

_names = st.sampled_from(
    ["nvidia.com/gpu", MEM, "nvidia.com/gpumem-percentage", CORES, "nvidia.com/priority", "cpu"]
)
_values = st.sampled_from(["0", "1", "2", "30", "100", "150", "4000", "16Gi", "-1", "0.5", 1, 2])
_section = st.dictionaries(_names, _values, max_size=4)
_container = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b", "c/d", "e~f"])},
    optional={
        "resources": st.fixed_dictionaries({}, optional={"limits": _section, "requests": _section}),
        "env": st.lists(
            st.fixed_dictionaries({"name": st.sampled_from(["X", "Y"]), "value": st.just("1")}), max_size=2
        ),
        "securityContext": st.fixed_dictionaries({"privileged": st.booleans()}),
    },
)
_annotation_keys = st.sampled_from([*FORGED, *USER_ANNOTATIONS, "a/b~c", "hami.io/vgpu-anything"])
_pods = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("Pod"),
        "metadata": st.fixed_dictionaries(
            {"name": st.just("p"), "namespace": st.sampled_from(["team", "other"])},
            optional={"annotations": st.dictionaries(_annotation_keys, st.text(max_size=4), max_size=5)},
        ),
        "spec": st.fixed_dictionaries(
            {"containers": st.lists(_container, max_size=3)},
            optional={
                "initContainers": st.lists(_container, max_size=2),
                "schedulerName": st.sampled_from(["", "default-scheduler", "hami-scheduler", "volcano"]),
                "nodeName": st.sampled_from(["", "n1"]),
                "runtimeClassName": st.just("kata"),
            },
        ),
    }
)
_configs = st.fixed_dictionaries(
    {
        "overwrite_env": st.booleans(),
        "gpu_core_policy": st.sampled_from(["default", "force", "disable"]),
        "runtime_class_name": st.sampled_from(["", "nvidia"]),
        "default_gpu_num": st.integers(0, 2),
        "default_memory": st.sampled_from([0, 1024]),
        "memory_factor": st.integers(1, 2),
    }
)
_quotas = st.sampled_from([{}, build_view({"team": {CORES: 100}}, {"team": {CORES: 50}})])


@settings(max_examples=300, deadline=None)
@given(pod=_pods, config=_configs, quota=_quotas, force=st.booleans())
def test_patch_reproduces_mutation_and_strips_owned(
    pod: dict[str, Any], config: dict[str, Any], quota: QuotaView, force: bool
) -> None:
    original = copy.deepcopy(pod)
    outcome = run(
        pod, config=config, quota=quota, settings_=AdmissionSettings(force_overwrite_default_scheduler=force)
    )
    assert pod == original
    owned = tuple(k for k in original["metadata"].get("annotations", {}) if scheduler_owned(k, vendors()))
    if original["spec"]["containers"]:
        assert outcome.stripped == owned
    if not outcome.allowed:
        assert outcome.patch == () and outcome.pod is None and outcome.warnings == ()
        return
    patched = jsonpatch.apply_patch(original, [dict(op) for op in outcome.patch])
    assert patched == outcome.pod
    assert not any(scheduler_owned(k, vendors()) for k in patched["metadata"].get("annotations", {}))
    response = review_response(outcome, "u", V1)["response"]
    if outcome.patch:
        assert json.loads(base64.b64decode(response["patch"])) == [dict(op) for op in outcome.patch]
    else:
        assert "patch" not in response and "patchType" not in response


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.sampled_from(["1", "100", "16Gi"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)
_fuzzed_container = st.dictionaries(
    st.sampled_from(["name", "env", "resources", "securityContext"]),
    _json
    | st.fixed_dictionaries(
        {}, optional={"limits": st.dictionaries(_names, _json, max_size=3), "requests": _json}
    ),
    max_size=4,
)
_fuzzed_pods = _json | st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(["Pod", "Service"]) | _json,
        "metadata": _json
        | st.fixed_dictionaries({}, optional={"annotations": st.dictionaries(_annotation_keys, _json)}),
        "spec": _json
        | st.fixed_dictionaries(
            {}, optional={"containers": _json | st.lists(_fuzzed_container, max_size=2), "nodeName": _json}
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(pod=_fuzzed_pods, old=_fuzzed_pods, operation=st.sampled_from(["CREATE", "UPDATE", "DELETE"]))
def test_admit_never_raises(pod: Any, old: Any, operation: str) -> None:
    outcome = run(pod, operation=operation, old=old, user="alice")
    assert outcome.code in (200, 400, 403, 500)
    assert outcome.allowed is (outcome.code == 200)
    review_response(outcome, "u", V1)
