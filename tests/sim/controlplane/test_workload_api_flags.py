"""The real control plane's `workload_api` option (sim/controlplane/real.py): the flags per version."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.controlplane import make_control_plane
from sim.controlplane.real import workload_flags

GATE, RUNTIME = "--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1beta1=true"


@pytest.mark.parametrize("version", ["v1.37.2", "1.37.0", "v1.38.1"])
def test_from_1_37_the_gate_on_both_and_the_beta_api_on_the_apiserver(version: str) -> None:
    assert workload_flags(version) == ((GATE, RUNTIME), (GATE,))


@pytest.mark.parametrize("version", ["v1.34.4", "v1.36.0"])
def test_before_1_37_a_clear_error(version: str) -> None:
    with pytest.raises(ValueError, match=f"needs Kubernetes >= 1.37; this control plane is {version}"):
        workload_flags(version)


def test_the_emulator_has_no_workload_api(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs the real control plane"):
        make_control_plane("emulator", tmp_path, workload_api=True)
