"""`Family.every_pod` names exactly the device-config keys that make a vendor's webhook mutation touch pods
asking for none of its resources (issue 28, finding 3): the chart sends every pod CREATE to the webhook when
one is set, and otherwise only pods asking for a managed resource (tests/chart/test_chart_admission_scope.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from app.core import quota
from app.core.admission import AdmissionSettings, admit
from app.core.review import AdmissionInput
from app.devices import REGISTRY, Family

PLAIN = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}]},
}
SET = {"overwriteEnv": True, "gpuCorePolicy": "force"}
CHIP = {"commonWord": "Ascend910B3"}


def patched(family: Family, section: Any) -> bool:
    outcome = admit(
        AdmissionInput("u", "CREATE", PLAIN),
        AdmissionSettings(),
        family.build(section),
        quota.build_view({}, {}),
    )
    assert outcome.allowed, outcome
    return bool(outcome.patch)


def section_with(family: Family, values: dict[str, Any]) -> Any:
    """The family's section with `values` set (on its chip for the per-chip Ascend section)."""
    if family.section == "vnpus":
        return {"configs": [{**CHIP, **values}]}
    if family.section == "iluvatars":
        return [{"commonWord": "MR-V100", **values}]
    return {key: "x" for key in family.count_keys} | values


@pytest.mark.parametrize("family", REGISTRY, ids=[f.section for f in REGISTRY])
def test_a_plain_pod_is_untouched_unless_an_every_pod_key_is_set(family: Family) -> None:
    assert not patched(family, section_with(family, {}))
    for key in family.every_pod:
        assert patched(family, section_with(family, {key: SET[key]})), key
    for key in set(SET) - set(family.every_pod):
        assert not patched(family, section_with(family, {key: SET[key]})), key
