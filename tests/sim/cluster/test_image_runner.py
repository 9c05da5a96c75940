"""`sim.cluster.image`: how the chart's containers become `buildah run` command lines (no buildah needed here;
the end-to-end suites run them with `pytest --from-image IMAGE`, docs/container-image.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from sim.cluster import image
from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import DemoFailure
from sim.controlplane import chart


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return chart.render({})


def runner_on(rootfs: Path) -> image.ImageRunner:
    """A runner whose working container is `rootfs` (what `buildah from` + `buildah mount` would give)."""
    runner = image.ImageRunner("localhost/hami-scheduler-py:test")
    runner._container, runner._rootfs = "ctr", rootfs
    return runner


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/var/run/hami", "/run/hami"),  # Debian: /var/run -> /run (absolute): resolved inside the image
        ("/var/run/secrets/kubernetes.io/serviceaccount", "/run/secrets/kubernetes.io/serviceaccount"),
        ("/etc/hami/tls", "/etc/hami/tls"),  # not there yet: buildah creates it inside the image
        ("/lib/x", "/usr/lib/x"),  # a relative link
        ("/tmp", "/tmp"),
    ],
    ids=["var-run-absolute-link", "service-account", "missing-path", "relative-link", "plain"],
)
def test_mount_targets_are_resolved_inside_the_image(tmp_path: Path, target: str, expected: str) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "run").symlink_to("/run")
    (tmp_path / "usr" / "lib").mkdir(parents=True)
    (tmp_path / "lib").symlink_to("usr/lib")
    (tmp_path / "tmp").mkdir()
    assert runner_on(tmp_path).resolve(target) == expected


@pytest.mark.parametrize(
    ("control_plane", "from_image", "error"),
    [
        ("real", "localhost/x:1", ""),
        ("real", "", ""),
        ("emulator", "", ""),
        ("emulator", "localhost/x:1", "--from-image needs --control-plane real"),
    ],
    ids=["real-with-image", "real-checkout", "emulator-checkout", "emulator-with-image-refused"],
)
def test_from_image_needs_the_real_control_plane(control_plane: str, from_image: str, error: str) -> None:
    args = argparse.Namespace(control_plane=control_plane, from_image=from_image)
    assert image.argument_error(args).startswith(error)
    assert bool(image.argument_error(args)) == bool(error)


@pytest.mark.parametrize("container", ["extender", "webhook", "worker"])
def test_each_container_runs_the_charts_command_with_its_mounts_and_user(
    tmp_path: Path, objects: list[dict[str, Any]], container: str
) -> None:
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "run").symlink_to("/run")
    spec = image.container_spec(objects, container)
    names = [m["name"] for m in spec["volumeMounts"]]
    volumes = {name: tmp_path / "host" / name for name in [*names, "serviceaccount"]}
    argv = runner_on(tmp_path).argv(objects, container, volumes, {"HAMI_BIND": "127.0.0.1:1"})
    assert (
        argv[:2] == ["buildah", "run"] and "--network" in argv and argv[argv.index("--network") + 1] == "host"
    )
    split = argv.index("ctr")
    assert argv[split + 1] == "--"
    shim, command = argv[split + 2 : split + 8], argv[split + 8 :]
    assert shim[:3] == ["python", "-c", image.SHIM] and shim[3:] == ["10001", "10001", "10001"]
    assert command == spec["command"]
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "--volume"]
    for mount in spec["volumeMounts"]:
        source = volumes[mount["name"]] / (mount.get("subPath") or "")
        target = mount["mountPath"].replace("/var/run/", "/run/")
        assert f"{source}:{target}:{'ro' if mount.get('readOnly') else 'rw'}" in mounts
    assert f"{volumes['serviceaccount']}:/run/secrets/kubernetes.io/serviceaccount:ro" in mounts
    env = [argv[i + 1] for i, a in enumerate(argv) if a == "--env"]
    assert env == ["HAMI_BIND=127.0.0.1:1"]


def test_a_volume_without_a_stand_in_is_a_clear_error(tmp_path: Path, objects: list[dict[str, Any]]) -> None:
    with pytest.raises(image.ImageError, match="no stand-in for the chart's volume state of worker"):
        runner_on(tmp_path).argv(objects, "worker", {}, {})


def test_the_harness_refuses_an_image_on_the_emulator(tmp_path: Path) -> None:
    with (
        pytest.raises(DemoFailure, match="from_image needs the real control plane"),
        running_cluster(tmp_path, ClusterSpec(from_image="localhost/x:1")),
    ):
        pytest.fail("no cluster may start")
