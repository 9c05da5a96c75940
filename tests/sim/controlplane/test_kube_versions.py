"""Which Kubernetes/etcd version the real control plane runs (tools/kube/versions.tsv, HAMI_KUBE_VERSION,
HAMI_ETCD_VERSION): `sim.controlplane.binaries.select` and scripts/build-kube.sh's `--which` must agree, row
for row, and every listed version must have its wrapper module."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from sim.controlplane import binaries

ROWS = [("v1.37.2", "v3.7.3"), ("v1.34.4", "v3.6.16")]  # the default first
SCRIPT = binaries.REPO_ROOT / "scripts" / "build-kube.sh"

SELECTIONS = [
    pytest.param({}, ("v1.37.2", "v3.7.3"), id="unset-first-row-is-default"),
    pytest.param({"HAMI_KUBE_VERSION": ""}, ("v1.37.2", "v3.7.3"), id="empty-is-default"),
    pytest.param({"HAMI_KUBE_VERSION": "1.37.2"}, ("v1.37.2", "v3.7.3"), id="exact-without-v"),
    pytest.param({"HAMI_KUBE_VERSION": "v1.37.2"}, ("v1.37.2", "v3.7.3"), id="exact-with-v"),
    pytest.param({"HAMI_KUBE_VERSION": "1.37"}, ("v1.37.2", "v3.7.3"), id="minor"),
    pytest.param({"HAMI_KUBE_VERSION": "v1.34"}, ("v1.34.4", "v3.6.16"), id="minor-with-v"),
    pytest.param(
        {"HAMI_KUBE_VERSION": "1.34.4", "HAMI_ETCD_VERSION": "3.7.3"},
        ("v1.34.4", "v3.7.3"),
        id="etcd-override-on-another-row",
    ),
    pytest.param({"HAMI_ETCD_VERSION": "v3.6.16"}, ("v1.37.2", "v3.6.16"), id="etcd-override-on-default"),
]

REFUSED = [
    pytest.param({"HAMI_KUBE_VERSION": "1.35.4"}, id="unlisted-version"),
    pytest.param({"HAMI_KUBE_VERSION": "1.3"}, id="prefix-of-a-minor-is-no-minor"),
    pytest.param({"HAMI_KUBE_VERSION": "1"}, id="major-alone-is-ambiguous"),
    pytest.param({"HAMI_KUBE_VERSION": "1.37.2 1.34.4"}, id="two-versions"),
]


@pytest.mark.parametrize(("env", "expected"), SELECTIONS)
def test_select(env: dict[str, str], expected: tuple[str, str]) -> None:
    assert binaries.select(ROWS, env) == expected


@pytest.mark.parametrize("env", REFUSED)
def test_select_refuses_what_is_not_one_listed_version(env: dict[str, str]) -> None:
    with pytest.raises(binaries.MissingBinaries, match=re.escape("v1.37.2, v1.34.4")):
        binaries.select(ROWS, env)


def test_select_needs_a_row() -> None:
    with pytest.raises(binaries.MissingBinaries, match="lists no version"):
        binaries.select([], {})


@pytest.mark.parametrize(
    ("table", "rows"),
    [
        pytest.param(
            "# kubernetes\tetcd\nv1.34.4\tv3.6.16\n", [("v1.34.4", "v3.6.16")], id="comment-skipped"
        ),
        pytest.param(
            "v1.34.4 v3.6.16  # older\n\nv1.37.2\tv3.7.3", ROWS[::-1], id="order-kept-trailing-comment"
        ),
        pytest.param("v1.37.2\n", [], id="row-without-etcd-ignored"),
    ],
)
def test_supported(table: str, rows: list[tuple[str, str]]) -> None:
    assert binaries.supported(table) == rows


def script_which(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("HAMI_KUBE_VERSION", "HAMI_ETCD_VERSION")}
    return subprocess.run(
        ["bash", str(SCRIPT), "--which"], env={**clean, **env}, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(("env", "expected"), SELECTIONS)
def test_build_script_selects_the_same(env: dict[str, str], expected: tuple[str, str]) -> None:
    real = binaries.select(binaries.supported(binaries.VERSIONS_FILE.read_text()), env)
    done = script_which(env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"kubernetes-{real[0]}", f"etcd-{real[1]}"]


@pytest.mark.parametrize("env", REFUSED)
def test_build_script_refuses_the_same(env: dict[str, str]) -> None:
    done = script_which(env)
    assert done.returncode == 2
    assert "is not one version of tools/kube/versions.tsv" in done.stderr


def test_the_table_is_the_tested_one_and_every_version_has_its_module() -> None:
    rows = binaries.supported(binaries.VERSIONS_FILE.read_text())
    assert rows == ROWS  # a new row: add it to ROWS and SELECTIONS above
    for kube, etcd in rows:
        tools = binaries.REPO_ROOT / "tools"
        assert binaries.required_version(tools / "kube" / kube / "go.mod", binaries.KUBE_MODULE) == kube
        assert binaries.required_version(tools / "etcd" / etcd / "go.mod", binaries.ETCD_MODULE) == etcd


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param({"HAMI_ETCD_VERSION": "3.9.9"}, "no wrapper module", id="etcd-without-module"),
        pytest.param({"HAMI_KUBE_VERSION": "1.99"}, "not one supported version", id="kube-unlisted"),
    ],
)
def test_find_names_what_is_missing(env: dict[str, str], message: str, tmp_path: Path) -> None:
    with pytest.raises(binaries.MissingBinaries, match=message):
        binaries.find({"HAMI_KUBE_CACHE": str(tmp_path), **env})


def test_find_asks_for_the_build_of_the_selected_version(tmp_path: Path) -> None:
    env = {"HAMI_KUBE_CACHE": str(tmp_path), "HAMI_KUBE_VERSION": "1.34"}
    with pytest.raises(
        binaries.MissingBinaries, match=re.escape("make kube KUBE_VERSION=v1.34.4 ETCD_VERSION=v3.6.16")
    ):
        binaries.find(env)


def test_find_returns_the_selected_complete_folders(tmp_path: Path) -> None:
    for folder in ("kubernetes-v1.34.4", "etcd-v3.6.16", "kubernetes-v1.37.2", "etcd-v3.7.3"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / ".complete").write_text("built\n")
    found = binaries.find({"HAMI_KUBE_CACHE": str(tmp_path), "HAMI_KUBE_VERSION": "v1.34.4"})
    assert found.kube_scheduler == tmp_path / "kubernetes-v1.34.4" / "kube-scheduler"
    assert found.etcd == tmp_path / "etcd-v3.6.16" / "etcd"
    assert found.versions() == {"kube-apiserver": "v1.34.4", "kube-scheduler": "v1.34.4", "etcd": "v3.6.16"}
