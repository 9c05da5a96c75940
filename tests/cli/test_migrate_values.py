"""`python -m app.cli migrate-values`: HAMi's chart values -> ours (app/cli/migrate.py, hamivalues.py).

The acceptance: on HAMi's default values and on a file setting every scheduler and device key the table
names (tests/cli/hami-values/), the output renders with our chart through the real helm binary (its schema
and render-time checks included; `make chart` also runs kubernetes-validate on both renders) and lists every
value it could not convert. The table in docs/install.md is the one the command prints.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli.hamivalues import ROWS
from app.cli.migrate import UNKNOWN, convert, leaves, markdown_table, row_for

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "hami-values"
HELM = Path(os.environ.get("HELM") or REPO / ".tools" / "bin" / "helm")
CHART = REPO / "helm" / "hami-scheduler"
KUBE = ("--kube-version", "1.35.0")  # as tests/chart and make chart render


def migrate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "migrate-values", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )


def helm_template(values: Path) -> list[dict[str, Any]]:
    if not HELM.is_file():
        pytest.fail(f"{HELM} not found: run `make tools`", pytrace=False)
    result = subprocess.run(
        [str(HELM), "template", "hami-scheduler", str(CHART), "-n", "hami-system", *KUBE, "-f", str(values)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DATA / name).read_text())
    return loaded


def comment_lines(output: str, section: str) -> list[str]:
    """The `# path: value -- why` lines under one of the trailing comment headers."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# --- {section}"))
    found = []
    for line in lines[start + 1 :]:
        if line.startswith("# --- "):
            break
        found.append(line)
    return found


def test_every_row_is_exercised_by_the_every_key_file() -> None:
    paths = [path for path, _ in leaves(load("every-key.yaml"))]
    unused = [row.hami for row in ROWS if not any(row.matches(path) for path in paths)]
    assert unused == []


@pytest.mark.parametrize("name", ["defaults.yaml", "every-key.yaml", "every-key-without-content"])
def test_output_renders_with_our_chart_and_lists_what_it_did_not_convert(name: str, tmp_path: Path) -> None:
    source = DATA / name
    if name == "every-key-without-content":  # the nvidia values themselves, not superseded by the content
        values = load("every-key.yaml")
        del values["device-config"]
        source = tmp_path / "hami.yaml"
        source.write_text(yaml.safe_dump(values))
    result = migrate(str(source))
    assert (result.returncode, result.stderr) == (0, "")
    migrated = tmp_path / "ours.yaml"
    migrated.write_text(result.stdout)
    docs = helm_template(migrated)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    ours = yaml.safe_load(result.stdout)

    # every value of the input appears exactly once: converted, or in one of the two comment lists
    user = yaml.safe_load(source.read_text())
    listed = comment_lines(result.stdout, "HAMi values without") + (
        comment_lines(result.stdout, "HAMi defaults not")
        if "# --- HAMi defaults not" in result.stdout
        else []
    )
    listed_paths = {line[2:].split(": ", 1)[0] for line in listed}
    for path, _value in leaves(user):
        row = row_for(path)
        if row is None or row.to is None:
            assert path in listed_paths, f"{path} is neither converted nor listed"
    env = {
        e["name"]: e.get("value")
        for c in deployment["spec"]["template"]["spec"]["containers"]
        for e in c.get("env", [])
    }
    assert env["HAMI_SCHEDULER_NAME"] == user["schedulerName"]
    assert env["HAMI_ADOPT_SCHEDULER_NAMES"] == user["schedulerName"]
    assert ours["webhook"]["devicePluginServiceAccount"]["name"].endswith("-device-plugin")


def test_defaults_convert_to_a_small_file_and_keep_our_safer_defaults() -> None:
    out = convert(load("defaults.yaml"))
    assert out.values["schedulerName"] == "hami-scheduler"
    assert out.values["webhook"] == {
        "enabled": True,
        "devicePluginServiceAccount": {"name": "hami-device-plugin", "namespace": "kube-system"},
    }
    assert "managedResources" not in out.values.get("kubeScheduler", {})
    kept = {path: why for path, _value, why in out.kept}
    assert kept["scheduler.admissionWebhook.failurePolicy"].startswith("ours is `Fail`")
    assert set(kept) == {
        "scheduler.kubeScheduler.image.registry",
        "scheduler.kubeScheduler.image.repository",
        "scheduler.kubeScheduler.resources",
        "scheduler.kubeScheduler.extraNewArgs",
        "scheduler.extender.resources",
        "scheduler.extender.extraArgs",
        "scheduler.admissionWebhook.failurePolicy",
        "scheduler.service.type",
    }
    unmapped = {path for path, _value, _why in out.unmapped}
    assert {"scheduler.metricsBindAddress", "scheduler.livenessProbe", "legacyMetrics"} <= unmapped
    assert not any(why == UNKNOWN for _path, _value, why in out.unmapped)


def test_every_key_conversion() -> None:
    values = load("every-key.yaml")
    del values["device-config"]
    out = convert(values, release="gpu", namespace="gpu-ops")
    v = out.values
    assert (v["schedulerName"], v["adoptSchedulerNames"]) == ("hami-gpu", ["hami-gpu"])
    assert v["imagePullSecrets"] == [{"name": "regcred"}, {"name": "k8s-mirror"}, {"name": "hami-pull"}]
    assert v["kubeScheduler"]["image"] == {
        "repository": "registry.k8s.io/kube-scheduler",
        "tag": "v1.33.2",
        "pullPolicy": "Always",
    }
    assert (v["kubeScheduler"]["verbosity"], v["kubeScheduler"]["extraArgs"]) == (3, ["--kube-api-qps=50"])
    assert v["kubeScheduler"]["managedResources"] == [
        "example.com/vgpu",
        "example.com/vgpu-memory",
        "example.com/vgpu-memory-percentage",
        "example.com/vgpu-cores",
        "example.com/vgpu-priority",
    ]
    assert v["logLevel"] == "INFO"
    assert v["webhook"]["failurePolicy"] == "Fail"
    assert v["webhook"]["excludeNamespaces"] == ["istio-system", "monitoring"]
    # fullnameOverride names HAMi's device plugin account; namespaceOverride moves it
    assert v["webhook"]["devicePluginServiceAccount"] == {
        "name": "gpu-hami-device-plugin",
        "namespace": "gpu-system",
    }
    assert v["deviceConfig"]["nvidia"]["overwriteEnv"] is True
    assert v["deviceConfig"]["nvidia"]["deviceMemoryScaling"] == 1.5
    reasons = {path: why for path, _value, why in out.unmapped}
    assert reasons["scheduler.notAHamiValue"] == UNKNOWN
    assert reasons["mockDevicePlugin.enabled"] == UNKNOWN
    assert reasons["scheduler.admissionWebhook.reinvocationPolicy"].startswith("our webhook never asks")
    assert v["devices"]["ascend"] == {"enabled": True, "hamiVnpuCore": True}  # Ascend is scheduled here
    assert reasons["devices.ascend.runtimeClassName"].startswith("not converted")
    assert v["devices"]["vastai"] == {"enabled": False} and v["devices"]["biren"] == {"enabled": False}
    assert reasons["devices.awsneuron.customresources"].startswith("not converted")
    # Metax, Kunlunxin, Enflame, Iluvatar: the switches and Metax's topology flag convert, names do not
    assert v["devices"]["kunlun"] == {"enabled": False} and v["devices"]["enflame"] == {"enabled": False}
    assert v["devices"]["iluvatar"] == {"enabled": True}  # HAMi's --enable-iluvatar
    assert v["devices"]["metax"] == {"sgpuTopologyAware": True}
    assert (
        reasons["metaxResourceName"].startswith("not converted")
        and "devices.metax" in reasons["metaxResourceName"]
    )
    assert reasons["kunlunResourceName"].startswith("not converted")
    assert reasons["devices.iluvatar.customresources"].startswith("not converted")


@pytest.mark.parametrize(
    ("values", "path", "why"),
    [
        ({"scheduler": {"replicas": 0}}, "scheduler.replicas", "expected an integer of at least 1, got 0"),
        (
            {"scheduler": {"leaderElect": "maybe"}},
            "scheduler.leaderElect",
            "expected true or false, got 'maybe'",
        ),
        (
            {"scheduler": {"defaultSchedulerPolicy": {"gpuSchedulerPolicy": "fastest"}}},
            "scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy",
            "expected a comma list of binpack, spread, mutex, numa, topology-aware, got 'fastest'",
        ),
        (
            {"scheduler": {"extender": {"extraArgs": ["--debug", "--profiling"]}}},
            "scheduler.extender.extraArgs",
            "flags without equivalent: --profiling (logLevel covers --debug and -v)",
        ),
        (
            {"schedulerName": "default-scheduler"},
            "schedulerName",
            "expected a scheduler name, got 'default-scheduler'",
        ),
        ({"scheduler": {"podAnnotations": ["a"]}}, "scheduler.podAnnotations", "expected a map of strings"),
    ],
    ids=["replicas", "boolean", "gpu-policy", "extender-flags", "default-scheduler", "annotations"],
)
def test_values_we_cannot_take_are_listed_with_the_reason(
    values: dict[str, Any], path: str, why: str
) -> None:
    out = convert(values)
    assert (path, why) in {(p, w) for p, _value, w in out.unmapped}


def test_a_changed_default_is_carried_over() -> None:
    out = convert(
        {"scheduler": {"admissionWebhook": {"failurePolicy": "Ignore"}, "service": {"type": "NodePort"}}}
    )
    assert {path for path, _v, _w in out.kept} == {
        "scheduler.admissionWebhook.failurePolicy",
        "scheduler.service.type",
    }  # HAMi's defaults: ours stay
    out = convert({"scheduler": {"kubeScheduler": {"image": {"repository": "mirror/kube-scheduler"}}}})
    assert out.values["kubeScheduler"]["image"]["repository"] == (
        "registry.cn-hangzhou.aliyuncs.com/mirror/kube-scheduler"
    )


def test_the_doc_table_is_the_command_table() -> None:
    doc = (REPO / "docs" / "install.md").read_text()
    begin, end = "<!-- migrate-values table: begin -->", "<!-- migrate-values table: end -->"
    assert begin in doc and end in doc, "docs/install.md lost its generated table markers"
    section = doc.split(begin, 1)[1].split(end, 1)[0].strip()
    table = migrate("--table")
    assert table.returncode == 0
    assert section == table.stdout.strip() == markdown_table(), (
        "docs/install.md is stale: paste `python -m app.cli migrate-values --table` between the markers"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("- a list", "expected a mapping of chart values"),
        ("{unclosed", "is neither valid JSON nor valid YAML"),
    ],
    ids=["not-a-mapping", "not-yaml"],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, content: str, message: str) -> None:
    source = tmp_path / "hami.yaml"
    source.write_text(content)
    result = migrate(str(source))
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr


def test_missing_file_and_no_file() -> None:
    assert migrate("/nonexistent/values.yaml").stderr.startswith(
        "hami-scheduler migrate-values: error: cannot read /nonexistent/values.yaml"
    )
    result = migrate()
    assert (result.returncode, result.stderr) == (
        2,
        "hami-scheduler migrate-values: error: give HAMi's values file (or --table)\n",
    )
