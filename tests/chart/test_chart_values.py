"""values.yaml and values.schema.json: documented, and invalid values refused before anything renders."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "helm" / "hami-scheduler"
# Children of these keys are plain Kubernetes fields documented by their parent's comment.
KUBERNETES_BLOCKS = {"podSecurityContext", "containerSecurityContext"}


def test_every_value_is_documented() -> None:
    """Every key at the top two levels (and the nvidia keys) has a comment line right above it."""
    lines = (CHART / "values.yaml").read_text(encoding="utf-8").splitlines()
    parents: list[tuple[int, str]] = []
    undocumented = []
    for number, line in enumerate(lines):
        match = re.match(r"^( *)([A-Za-z][\w-]*):", line)
        if not match:
            continue
        indent, key = len(match.group(1)), match.group(2)
        parents = [(i, k) for i, k in parents if i < indent]
        inside_kubernetes = any(k in KUBERNETES_BLOCKS for _, k in parents)
        in_scope = indent <= 2 or (indent == 4 and parents and parents[-1][1] == "nvidia")
        previous = lines[number - 1].strip() if number else ""
        if in_scope and not inside_kubernetes and not previous.startswith("#"):
            undocumented.append(f"line {number + 1}: {key}")
        parents.append((indent, key))
    assert undocumented == []


def test_schema_is_draft_07_and_closed() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert set(values) == set(schema["properties"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"webhook.failurePolicy": "Maybe"}, "/webhook/failurePolicy", id="failure-policy"),
        pytest.param({"webhook.timeoutSeconds": 10}, "/webhook/timeoutSeconds", id="webhook-timeout-above-5"),
        pytest.param({"leaderElection.mode": "elect"}, "/leaderElection/mode", id="election-mode"),
        pytest.param(
            {"leaderElection.leaseDuration": 15}, "/leaderElection/leaseDuration", id="duration-number"
        ),
        pytest.param({"nodeLockExpire": "5 minutes"}, "/nodeLockExpire", id="duration-text"),
        pytest.param({"replicas": 0}, "/replicas", id="no-replicas"),
        pytest.param(
            {"defaultSchedulerPolicy.gpuSchedulerPolicy": "fastest"}, "gpuSchedulerPolicy", id="gpu-policy"
        ),
        pytest.param(
            {"defaultSchedulerPolicy.nodeSchedulerPolicy": "mutex"}, "nodeSchedulerPolicy", id="node-policy"
        ),
        pytest.param(
            {"extender.extraEnv": [{"name": "HAMI_BIND", "value": "x"}]}, "/extender/extraEnv", id="env-clash"
        ),
        pytest.param({"extender.bindLockWait": "30s"}, "/extender/bindLockWait", id="bind-wait-above-25s"),
        pytest.param({"deviceConfig.nvidia.gpuCorePolicy": "max"}, "gpuCorePolicy", id="core-policy"),
        pytest.param({"schedulerName": "Hami_Scheduler"}, "/schedulerName", id="scheduler-name"),
        pytest.param(
            {"adoptSchedulerNames": ["default-scheduler"]},
            "/adoptSchedulerNames/0",
            id="adopt-default-scheduler",
        ),
        pytest.param({"adoptSchedulerNames": ["a,b"]}, "/adoptSchedulerNames/0", id="adopt-list-in-a-name"),
        pytest.param(
            {"adoptSchedulerNames": "hami-scheduler"}, "/adoptSchedulerNames", id="adopt-not-a-list"
        ),
        pytest.param({"worker.publishCapacity": "yes"}, "/worker/publishCapacity", id="capacity-not-a-bool"),
        pytest.param({"webhhook": {}}, "webhhook", id="typo-top-level"),
        pytest.param({"extender.prot": 8443}, "prot", id="typo-nested"),
    ],
)
def test_schema_rejects(render_error: Any, overrides: dict[str, object], message: str) -> None:
    error = render_error("default", overrides)
    assert "values don't meet the specifications of the schema" in error
    assert message in error


def test_example_values_files_are_valid(render: Any) -> None:
    for value_set in ("ha", "acquire", "crds"):
        assert render(value_set).has("Deployment")


def test_ha_example(render: Any) -> None:
    manifests = render("ha")
    assert manifests.deployment["spec"]["replicas"] == 3
    assert manifests.env("worker")["HAMI_LEADER_ELECT"] == "true"
    assert manifests.has("PodDisruptionBudget", "hami-scheduler")
