"""`PodUses`: /bind's re-check decodes a pod version once per process (issue 20), as `entry_for` does."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.codec import CodecError
from app.devices.nvidia import Nvidia
from app.state import podentry
from app.state.ledger import BOUND
from app.state.podentry import PodUses, entry_for

VENDORS = (Nvidia(),)
SCHEDULERS = frozenset({"hami-scheduler"})


def bound(uid: str, version: str, allocation: str | None = "GPU-0,NVIDIA,1000,10:;") -> dict[str, Any]:
    annotations = {"hami.io/vgpu-node": "n1"}
    if allocation is not None:
        annotations["hami.io/vgpu-devices-allocated"] = allocation
    metadata: dict[str, Any] = {"name": uid, "namespace": "default", "uid": uid, "annotations": annotations}
    if version:
        metadata["resourceVersion"] = version
    spec = {"schedulerName": "hami-scheduler", "nodeName": "n1", "containers": [{"name": "c"}]}
    return {"metadata": metadata, "spec": spec, "status": {"phase": "Running"}}


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def counting(pod: Any, *args: Any) -> Any:
        calls.append(pod["metadata"]["uid"])
        return entry_for(pod, *args)

    monkeypatch.setattr(podentry, "entry_for", counting)
    return calls


def test_a_version_is_decoded_once_and_gives_entry_fors_uses(decoded: list[str]) -> None:
    kept = PodUses(VENDORS, SCHEDULERS)
    pod = bound("a", "7")
    expected = entry_for(pod, VENDORS, SCHEDULERS, BOUND, 0.0)
    assert expected is not None and expected.uses
    assert kept.of(pod, 1.0) == dict(expected.uses) == kept.of(pod, 2.0)
    assert decoded == ["a"]
    assert kept.of(bound("a", "8"), 3.0) == dict(expected.uses) and decoded == ["a", "a"]


@pytest.mark.parametrize(
    ("pod", "calls"),
    [
        pytest.param(bound("b", ""), ["b", "b"], id="no-resource-version-decoded-each-time"),
        pytest.param(bound("c", "1", allocation=None), ["c"], id="holds-nothing-kept-as-none"),
    ],
)
def test_what_is_kept(decoded: list[str], pod: dict[str, Any], calls: list[str]) -> None:
    kept = PodUses(VENDORS, SCHEDULERS)
    first, second = kept.of(pod, 1.0), kept.of(pod, 2.0)
    assert first == second and decoded == calls
    assert (first is None) is ("hami.io/vgpu-devices-allocated" not in pod["metadata"]["annotations"])


def test_a_corrupt_pod_raises_every_time(decoded: list[str]) -> None:
    kept = PodUses(VENDORS, SCHEDULERS)
    pod = bound("d", "1", allocation="GPU-0,NVIDIA,x,10:;")
    for _ in range(2):
        with pytest.raises(CodecError):
            kept.of(pod, 1.0)
    assert decoded == ["d", "d"]


def test_the_answer_is_a_copy(decoded: list[str]) -> None:
    kept = PodUses(VENDORS, SCHEDULERS)
    pod = bound("e", "1")
    first = kept.of(pod, 1.0)
    assert first is not None
    first.clear()
    assert kept.of(pod, 1.0)
