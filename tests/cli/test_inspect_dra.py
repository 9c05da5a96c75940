"""`inspect`'s DRA section (app/cli/drasection.py): the three states in text and JSON, and the facts a
replica's /debug/state carries."""

from __future__ import annotations

import pytest

from app.cli import drasection
from app.core.dra import Collision, DraFacts, Overlap
from app.state import drafacts

BOTH = DraFacts(
    True,
    (Collision("nvidia.com/gpu", "NVIDIA", ("gpu.nvidia.com",)),),
    (Overlap("gpu-0", ("gpu.nvidia.com",), 8),),
)


@pytest.mark.parametrize(
    ("facts", "lines"),
    [
        pytest.param(
            DraFacts(),
            ["DRA", "the cluster serves no resource.k8s.io/v1: nothing is shared with kube-scheduler's DRA"],
            id="no-api",
        ),
        pytest.param(
            DraFacts(True), ["DRA", "no resource name or registered node of ours is served by DRA"], id="none"
        ),
        pytest.param(
            BOTH,
            [
                "DRA (kube-scheduler allocates these too; hami-scheduler refuses them)",
                "RESOURCE        VENDOR  DEVICECLASS     EFFECT",
                "nvidia.com/gpu  NVIDIA  gpu.nvidia.com  pods asking for it are refused",
                "NODE   DRA DRIVER      DEVICES  EFFECT",
                "gpu-0  gpu.nvidia.com  8        refused for our resources",
            ],
            id="collision-and-overlap",
        ),
    ],
)
def test_text(facts: DraFacts, lines: list[str]) -> None:
    assert drasection.render(facts).splitlines() == lines


def test_json_and_the_replica_source() -> None:
    assert drasection.to_json(BOTH) == {
        "available": True,
        "collisions": [{"resource": "nvidia.com/gpu", "vendor": "NVIDIA", "classes": ["gpu.nvidia.com"]}],
        "overlaps": [{"node": "gpu-0", "drivers": ["gpu.nvidia.com"], "devices": 8}],
    }
    assert drasection.from_state({"nodes": [], "dra": drafacts.encode(BOTH)}) == BOTH
    assert drasection.from_state({"nodes": []}) is None  # an older replica: no section
