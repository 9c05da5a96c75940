"""Render helm/hami-scheduler with the real helm binary (.tools/bin/helm); fixtures give tests the manifests.

No helm, no tests: a missing binary fails with a pointer to `make tools` instead of skipping, so a machine
without the tools cannot report the chart as checked.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# scripts/check-chart.sh passes its TOOLS_DIR's helm; otherwise the one `make tools` installs.
HELM = Path(os.environ.get("HELM") or REPO / ".tools" / "bin" / "helm")
CHART = REPO / "helm" / "hami-scheduler"
NAMESPACE = "hami-system"
RELEASE = "hami-scheduler"
KUBE_VERSION = "1.35.0"

# Named value sets: the chart's defaults and its ci/ example files.
VALUE_FILES: Mapping[str, tuple[str, ...]] = {
    "default": (),
    "ha": ("ci/ha-values.yaml",),
    "acquire": ("ci/acquire-values.yaml",),
    "crds": ("ci/crds-values.yaml",),
}


class HelmError(Exception):
    """helm exited non-zero; the message is its stderr."""


@dataclass(frozen=True)
class Manifests:
    """The documents of one render, with lookups by kind and name."""

    docs: tuple[dict[str, Any], ...]

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [d for d in self.all(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, (
            f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
        )
        return found[0]

    def has(self, kind: str, name: str | None = None) -> bool:
        return any(name is None or d["metadata"]["name"] == name for d in self.all(kind))

    @property
    def deployment(self) -> dict[str, Any]:
        return self.one("Deployment")

    @property
    def pod_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.deployment["spec"]["template"]["spec"]
        return spec

    def container(self, name: str) -> dict[str, Any]:
        found = [c for c in self.pod_spec["containers"] if c["name"] == name]
        assert len(found) == 1, f"no container {name}"
        return found[0]

    def env(self, container: str) -> dict[str, Any]:
        """Environment of a container: plain values as strings, downward-API entries as their fieldPath."""
        out: dict[str, Any] = {}
        for entry in self.container(container).get("env", []):
            assert entry["name"] not in out, f"{container}: {entry['name']} set twice"
            if "valueFrom" in entry:
                out[entry["name"]] = ("fieldRef", entry["valueFrom"]["fieldRef"]["fieldPath"])
            else:
                out[entry["name"]] = entry["value"]
        return out

    def scheduler_config(self) -> dict[str, Any]:
        config_map = self.one("ConfigMap", f"{RELEASE}-config")
        loaded: dict[str, Any] = yaml.safe_load(config_map["data"]["config.yaml"])
        return loaded


def _helm(*args: str) -> str:
    if not HELM.is_file():
        pytest.fail(
            f"{HELM} not found: run `make tools` (tests/chart use the real helm binary)", pytrace=False
        )
    result = subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        raise HelmError(result.stderr.strip())
    return result.stdout


@functools.cache
def render_chart(value_set: str, sets: tuple[tuple[str, str], ...]) -> Manifests:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", KUBE_VERSION]
    for values_file in VALUE_FILES[value_set]:
        args += ["-f", str(CHART / values_file)]
    for key, value in sets:
        args += ["--set-json", f"{key}={value}"]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = tuple(d for d in yaml.load_all(_helm(*args), Loader=loader) if d)
    return Manifests(docs)


Render = Callable[..., Manifests]
RenderError = Callable[..., str]


def overrides_key(overrides: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """Hashable, ordered --set-json arguments for the render cache."""
    return tuple(sorted((key, json.dumps(value)) for key, value in (overrides or {}).items()))


@pytest.fixture(scope="session")
def render() -> Iterator[Render]:
    """render(value_set="default", {"dotted.key": value, ...}) -> Manifests (cached per arguments)."""

    def run(value_set: str = "default", overrides: Mapping[str, Any] | None = None) -> Manifests:
        return render_chart(value_set, overrides_key(overrides))

    yield run


@pytest.fixture(scope="session")
def render_error() -> Iterator[RenderError]:
    """render_error(value_set, overrides) -> helm's error text; fails the test if the render succeeds."""

    def run(value_set: str = "default", overrides: Mapping[str, Any] | None = None) -> str:
        try:
            render_chart(value_set, overrides_key(overrides))
        except HelmError as exc:
            return str(exc)
        raise AssertionError(f"helm template succeeded with {value_set} {overrides}")

    yield run
