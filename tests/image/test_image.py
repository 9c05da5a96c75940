"""The built image itself (`make image` runs these with `--from-image IMAGE`): it runs as the numeric user the
chart sets, carries no compiler and no pip, has exactly the locked runtime versions installed, and its
console script answers. That every chart command starts from it, serving the chart's routes with the chart's
environment, read-only root and volumes, is tests/real/test_sim_up.py with --from-image (sim.cluster.image).
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BUILDAH = "buildah"
# what a compiler or a package installer would be found as
TOOLS = ("pip", "pip3", "gcc", "cc", "c++", "g++", "clang", "make", "ld", "as")
FREEZE = """
import importlib.metadata as m
print("\\n".join(sorted(f"{d.metadata['Name']}=={d.version}" for d in m.distributions())))
"""


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def container(from_image: str) -> Iterator[str]:
    if not from_image:
        pytest.fail("tests/image checks a built image: pass --from-image IMAGE (`make image` does)")
    name = f"hami-image-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        [BUILDAH, "from", "--quiet", "--pull=never", "--name", name, from_image],
        check=True,
        capture_output=True,
    )
    try:
        yield name
    finally:
        subprocess.run([BUILDAH, "rm", name], check=True, capture_output=True)


def run(container: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """`argv` in the image as its own user (the image's USER), in its working directory."""
    command = [BUILDAH, "run", "--isolation", "chroot", container, "--", *argv]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)


def image_config(from_image: str) -> dict[str, object]:
    done = subprocess.run(
        [BUILDAH, "inspect", "--type", "image", from_image], capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout)["OCIv1"]["config"])


def test_the_image_runs_as_the_charts_numeric_user(container: str, from_image: str) -> None:
    values = yaml.safe_load((REPO / "helm" / "hami-scheduler" / "values.yaml").read_text())
    pod = values["podSecurityContext"]
    expected = f"{pod['runAsUser']}:{pod['runAsGroup']}"
    assert image_config(from_image)["User"] == expected
    ids = run(container, "sh", "-c", "echo $(id -u):$(id -g)")
    assert ids.returncode == 0, ids.stderr
    assert ids.stdout.strip() == expected


@pytest.mark.parametrize("tool", TOOLS)
def test_no_compiler_or_installer_is_left_in_the_final_stage(container: str, tool: str) -> None:
    found = run(container, "sh", "-c", f"command -v {tool} || true")
    assert found.stdout.strip() == "", f"{tool} found at {found.stdout.strip()}"


@pytest.mark.parametrize("module", ["pip", "setuptools"])
def test_no_installer_module_is_importable(container: str, module: str) -> None:
    found = run(container, "python", "-c", f"import {module}")
    assert found.returncode != 0 and "No module named" in found.stderr, found.stdout + found.stderr


def test_the_installed_versions_are_exactly_the_locked_ones(container: str) -> None:
    """What `pip freeze` would list (read from the distributions' metadata: the image has no pip) equals the
    pins of requirements/runtime.txt, plus the project itself."""
    locked = {
        normalize(m.group(1)): m.group(2)
        for line in (REPO / "requirements" / "runtime.txt").read_text().splitlines()
        if (m := re.match(r"^([A-Za-z0-9_.\-]+)==([^\s\\;]+)", line))
    }
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    freeze = run(container, "python", "-c", FREEZE)
    assert freeze.returncode == 0, freeze.stderr
    installed = {normalize(n): v for n, v in (line.split("==", 1) for line in freeze.stdout.split())}
    assert installed == {**locked, normalize(meta["name"]): meta["version"]}


def test_the_console_script_answers(container: str) -> None:
    answer = run(container, "hami-scheduler", "inspect", "--help")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.startswith("usage: hami-scheduler inspect")
