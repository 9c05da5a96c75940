"""`ClusterSpec` (sim/cluster/spec.py): a command's settings become the spec, and a cluster the builder cannot
honour is refused with one line before anything starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sim.cluster.build import build
from sim.cluster.spec import ClusterSpec, ExternalExtender
from sim.cluster.stack import DemoFailure, Stack


def test_a_commands_settings_become_the_spec_and_the_rest_keep_their_defaults() -> None:
    args = argparse.Namespace(nodes=3, seed=9, vendors="nvidia,ascend", pods=150, report=None, tls=False)
    spec = ClusterSpec.of(vars(args), tls=True, default_scheduler=True)
    assert (spec.nodes, spec.seed, spec.vendors) == (3, 9, "nvidia,ascend")
    assert spec.tls and spec.default_scheduler, "the overrides win over the settings"
    assert (spec.gpus_per_node, spec.zones, spec.control_plane) == (8, 2, "emulator"), "no option: default"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        pytest.param(ClusterSpec(), "", id="emulator"),
        pytest.param(
            ClusterSpec(
                control_plane="real", workload_api=True, from_image="x:1", external=ExternalExtender()
            ),
            "",
            id="real-with-everything",
        ),
        pytest.param(
            ClusterSpec(workload_api=True), "workload_api needs the real control plane", id="workload"
        ),
        pytest.param(ClusterSpec(from_image="x:1"), "from_image needs the real control plane", id="image"),
        pytest.param(ClusterSpec(grace_scale=-1), "grace_scale and grace_cap must not be", id="grace-scale"),
        pytest.param(
            ClusterSpec(control_plane="real", grace_cap=-1), "grace_scale and grace_cap", id="grace-cap-real"
        ),
        pytest.param(
            ClusterSpec(external=ExternalExtender(url="https://x")),
            "an external extender needs the real control plane",
            id="external",
        ),
    ],
)
def test_what_the_emulator_cannot_do_is_refused(spec: ClusterSpec, problem: str) -> None:
    assert spec.problem().startswith(problem) and bool(spec.problem()) == bool(problem)


def test_the_builder_refuses_before_starting_anything(tmp_path: Path) -> None:
    stack = Stack(tmp_path)
    with pytest.raises(DemoFailure, match="workload_api needs the real control plane"):
        build(ClusterSpec(workload_api=True), stack)
    assert stack.control_plane is None and not stack.processes and stack.image is None
