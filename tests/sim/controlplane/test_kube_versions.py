"""Which Kubernetes/etcd version the real control plane runs (tools/kube/versions.tsv, HAMI_KUBE_VERSION,
HAMI_ETCD_VERSION) and with which Go it is built: `sim.controlplane.binaries.select`/`toolchain` and
scripts/build-kube.sh's `--which`/`--toolchain` must agree, row for row, every listed version must have its
wrapper module, and a wrapper that needs a newer Go than the local one names it in a `toolchain` line."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from sim.controlplane import binaries

ROWS = [("v1.37.2", "v3.7.3"), ("v1.34.4", "v3.6.16"), ("v1.38.0-beta.0", "v3.7.3")]  # the default first
LOCAL_GO = (1, 26)  # the Go the README asks for; a wrapper whose `go` line is newer names its toolchain
SCRIPT = binaries.REPO_ROOT / "scripts" / "build-kube.sh"

SELECTIONS = [
    pytest.param({}, ("v1.37.2", "v3.7.3"), id="unset-first-row-is-default"),
    pytest.param({"HAMI_KUBE_VERSION": ""}, ("v1.37.2", "v3.7.3"), id="empty-is-default"),
    pytest.param({"HAMI_KUBE_VERSION": "1.37.2"}, ("v1.37.2", "v3.7.3"), id="exact-without-v"),
    pytest.param({"HAMI_KUBE_VERSION": "v1.37.2"}, ("v1.37.2", "v3.7.3"), id="exact-with-v"),
    pytest.param({"HAMI_KUBE_VERSION": "1.37"}, ("v1.37.2", "v3.7.3"), id="minor"),
    pytest.param({"HAMI_KUBE_VERSION": "v1.34"}, ("v1.34.4", "v3.6.16"), id="minor-with-v"),
    pytest.param({"HAMI_KUBE_VERSION": "1.38"}, ("v1.38.0-beta.0", "v3.7.3"), id="minor-of-a-pre-release"),
    pytest.param(
        {"HAMI_KUBE_VERSION": "1.38.0-beta.0"}, ("v1.38.0-beta.0", "v3.7.3"), id="pre-release-exact"
    ),
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
    pytest.param({"HAMI_KUBE_VERSION": "1.38.0"}, id="final-release-is-not-its-beta"),
]


@pytest.mark.parametrize(("env", "expected"), SELECTIONS)
def test_select(env: dict[str, str], expected: tuple[str, str]) -> None:
    assert binaries.select(ROWS, env) == expected


@pytest.mark.parametrize("env", REFUSED)
def test_select_refuses_what_is_not_one_listed_version(env: dict[str, str]) -> None:
    with pytest.raises(binaries.MissingBinaries, match=re.escape("v1.37.2, v1.34.4, v1.38.0-beta.0")):
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
            "v1.34.4 v3.6.16  # older\n\nv1.37.2\tv3.7.3", ROWS[1::-1], id="order-kept-trailing-comment"
        ),
        pytest.param("v1.37.2\n", [], id="row-without-etcd-ignored"),
    ],
)
def test_supported(table: str, rows: list[tuple[str, str]]) -> None:
    assert binaries.supported(table) == rows


def script_which(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("HAMI_KUBE_VERSION", "HAMI_ETCD_VERSION")}
    return subprocess.run(
        ["bash", str(SCRIPT), *(argv or ("--which",))],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(("env", "expected"), SELECTIONS)
def test_build_script_selects_the_same(env: dict[str, str], expected: tuple[str, str]) -> None:
    real = binaries.select(binaries.supported(binaries.VERSIONS_FILE.read_text()), env)
    done = script_which(env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"kubernetes-{real[0]}", f"etcd-{real[1]}"]


@pytest.mark.parametrize(("env", "expected"), SELECTIONS)
def test_build_script_builds_with_the_same_toolchain(env: dict[str, str], expected: tuple[str, str]) -> None:
    tools = binaries.REPO_ROOT / "tools"
    wanted = [binaries.toolchain(tools / "kube" / expected[0] / "go.mod")]
    wanted.append(binaries.toolchain(tools / "etcd" / expected[1] / "go.mod"))
    done = script_which(env, "--toolchain")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == wanted


@pytest.mark.parametrize(
    ("go_mod", "expected"),
    [
        pytest.param("module m\n\ngo 1.27.0\n\ntoolchain go1.27.3\n", "go1.27.3", id="toolchain-line"),
        pytest.param("module m\n\ngo 1.26.0\n", "local", id="none-is-local"),
        pytest.param("module m\n// toolchain go1.99.0\ngo 1.26.0\n", "local", id="commented-out-ignored"),
    ],
)
def test_toolchain(go_mod: str, expected: str, tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text(go_mod)
    assert binaries.toolchain(tmp_path / "go.mod") == expected


def test_only_the_versions_that_need_a_newer_go_download_one() -> None:
    """A wrapper whose `go` line is above the local Go (1.26) must name its toolchain, at least that `go`
    line; one the local Go builds has none, so building it downloads nothing (GOTOOLCHAIN=local)."""
    needs = {}
    for wrapper, version in [("kube", k) for k, _ in ROWS] + [("etcd", e) for _, e in ROWS]:
        go_mod = binaries.REPO_ROOT / "tools" / wrapper / version / "go.mod"
        go_line = next(line.split()[1] for line in go_mod.read_text().splitlines() if line.startswith("go "))
        go = tuple(int(part) for part in go_line.split(".")[:2])
        chosen = binaries.toolchain(go_mod)
        if go > LOCAL_GO:
            assert chosen != "local", f"{go_mod} says go {go_line}: it needs a toolchain line"
            assert tuple(int(p) for p in chosen.removeprefix("go").split(".")) >= tuple(
                int(p) for p in go_line.split(".")
            )
        else:
            assert chosen == "local", f"{go_mod}: the local Go builds it, no toolchain to download"
        needs[f"{wrapper}/{version}"] = chosen
    assert needs["kube/v1.38.0-beta.0"] == "go1.27.3"  # upstream's .go-version for v1.38.0-beta.0


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


@pytest.mark.parametrize(
    ("version", "message"),
    [
        pytest.param("1.34", "make kube KUBE_VERSION=v1.34.4 ETCD_VERSION=v3.6.16`, or", id="local-go"),
        pytest.param(
            "1.38",
            "make kube KUBE_VERSION=v1.38.0-beta.0 ETCD_VERSION=v3.7.3` (it builds with Go go1.27.3,",
            id="names-the-toolchain-it-downloads",
        ),
    ],
)
def test_find_asks_for_the_build_of_the_selected_version(version: str, message: str, tmp_path: Path) -> None:
    env = {"HAMI_KUBE_CACHE": str(tmp_path), "HAMI_KUBE_VERSION": version}
    with pytest.raises(binaries.MissingBinaries, match=re.escape(message)):
        binaries.find(env)


def built(cache: Path, folder: str, *names: str) -> None:
    (cache / folder).mkdir()
    (cache / folder / ".complete").write_text("built\n")
    for name in names:
        (cache / folder / name).write_text("")


def test_find_returns_the_selected_complete_folders(tmp_path: Path) -> None:
    for kube, etcd in ROWS:
        built(tmp_path, f"kubernetes-{kube}", *binaries.KUBE_BINARIES)
        if not (tmp_path / f"etcd-{etcd}").exists():
            built(tmp_path, f"etcd-{etcd}", "etcd")
    found = binaries.find({"HAMI_KUBE_CACHE": str(tmp_path), "HAMI_KUBE_VERSION": "v1.34.4"})
    assert found.kube_scheduler == tmp_path / "kubernetes-v1.34.4" / "kube-scheduler"
    assert found.kube_controller_manager == tmp_path / "kubernetes-v1.34.4" / "kube-controller-manager"
    assert found.kubectl == tmp_path / "kubernetes-v1.34.4" / "kubectl"
    assert found.etcd == tmp_path / "etcd-v3.6.16" / "etcd"
    assert found.versions() == {"kube-apiserver": "v1.34.4", "kube-scheduler": "v1.34.4", "etcd": "v3.6.16"}


def test_find_refuses_a_folder_an_older_script_built_with_fewer_binaries(tmp_path: Path) -> None:
    built(tmp_path, "kubernetes-v1.37.2", "kube-apiserver", "kube-scheduler")  # before controller-manager
    built(tmp_path, "etcd-v3.7.3", "etcd")
    with pytest.raises(
        binaries.MissingBinaries, match=re.escape("lacks kube-controller-manager, kubectl: run `make kube")
    ):
        binaries.find({"HAMI_KUBE_CACHE": str(tmp_path)})


def test_build_script_adds_nothing_to_a_complete_folder(tmp_path: Path) -> None:
    """With every binary there the script builds nothing (no Go involved: PATH without go would fail it)."""
    built(tmp_path, "kubernetes-v1.37.2", *binaries.KUBE_BINARIES)
    built(tmp_path, "etcd-v3.7.3", "etcd")
    for folder in ("kubernetes-v1.37.2", "etcd-v3.7.3"):
        for each in (tmp_path / folder).iterdir():
            each.chmod(0o755)
    done = script_which({}, str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("is there") == 2
