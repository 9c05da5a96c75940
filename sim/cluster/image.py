"""Our containers from the built image instead of the checkout (`--from-image IMAGE`): `buildah run`.

`make image` builds the image; `python -m sim up|demo --from-image IMAGE` and the real-control-plane suites
(`pytest --from-image IMAGE`) then start our registration worker and both Gunicorn servers of every replica
from it, as the chart's containers: the chart's `command`, `workingDir` and environment (with the harness's
loopback binds), every `volumeMount` of the container bind-mounted from a host folder standing in for its
volume (the state emptyDir shared by the pod's three containers, a private /tmp emptyDir each, the
device-config ConfigMap, the TLS Secrets with their 0440 mode and the pod's fsGroup), the ServiceAccount
token mounted where the kubelet mounts it (`load_incluster_config`: KUBERNETES_SERVICE_HOST/PORT name the
loopback API server), the host network, the pod's runAsUser/runAsGroup/fsGroup, no capabilities, no new
privileges and a read-only root filesystem.

buildah 1.28 has no read-only root and no capability-free start for a non-root user, so each container
starts as root with CAP_SYS_ADMIN running `SHIM` (the image's own Python, stdlib only): remount `/`
read-only in the container's private mount namespace, drop the capability bounding set, take the pod's
user, group and fsGroup, set no_new_privs, exec the chart's command. The image's processes run in the
`buildah run` process's group; `buildah run` SIGKILLs its container when it gets SIGTERM, so a stop sends
SIGTERM to the container's own process (`container_process`), as a kubelet does, and `sim.kit.processes` then
SIGKILLs the group as for a checkout process. Mount targets are resolved inside the image's root
(its /var/run -> /run): buildah 1.28 follows an absolute symlink on the host.

One working container per run (`buildah from`, removed by `close`) serves every process: its root is
read-only to them, so they share nothing through it. What still differs from a kubelet running the pod is
in docs/container-image.md.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import yaml

from sim.controlplane import chart
from sim.controlplane.base import EXTENDER, RELEASE_NAMESPACE

BUILDAH = "buildah"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SECRET_MODE = 0o440  # the chart's Secret volumes' defaultMode
# what the harness sets beside the chart's environment: loopback binds on free ports, a short registration
# interval and quieter logs (the same as for the checkout's processes, sim.cluster.realcluster.start_replica)
HARNESS_ENV = (
    "HAMI_BIND",
    "HAMI_WORKERS",
    "HAMI_EXTENDER_ADDRESS",
    "HAMI_WORKER_METRICS_BIND",
    "HAMI_REGISTRATION_INTERVAL",
    "HAMI_LOG_LEVEL",
)
SHIM = """
import ctypes, os, sys
uid, gid, fs_group = (int(v) for v in sys.argv[1:4])
libc = ctypes.CDLL(None, use_errno=True)
def check(result, what):
    if result != 0:
        sys.exit(f"image shim: {what}: {os.strerror(ctypes.get_errno())}")
flags = os.statvfs("/").f_flag
keep = 0
for st, ms in ((2, 2), (4, 4), (8, 8), (1024, 1024), (2048, 2048), (4096, 1 << 21)):
    keep |= ms if flags & st else 0
check(libc.mount(b"none", b"/", None, 1 | 32 | 4096 | keep, None), "remount / read-only")
cap = 0
while libc.prctl(24, cap, 0, 0, 0) == 0:
    cap += 1
os.setgroups([fs_group]); os.setgid(gid); os.setuid(uid)
check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
os.execvp(sys.argv[4], sys.argv[4:])
"""


def add_argument(parser: argparse.ArgumentParser) -> None:
    """`--from-image IMAGE` for `sim up`, `sim demo` (with `--control-plane real`)."""
    parser.add_argument(
        "--from-image",
        default="",
        metavar="IMAGE",
        help="real control plane: run our worker and Gunicorn servers from this built image (make image)",
    )


def argument_error(args: argparse.Namespace) -> str:
    """Why `--from-image` cannot be used with these arguments ("" when it can)."""
    if getattr(args, "from_image", "") and getattr(args, "control_plane", "") != "real":
        return "--from-image needs --control-plane real (the chart's containers run against it)"
    return ""


class ImageError(RuntimeError):
    """buildah is missing, the image does not exist, or the chart asks for a volume we cannot stand in for."""


def _buildah(*args: str) -> str:
    if shutil.which(BUILDAH) is None:
        raise ImageError("buildah is not installed: `make image` installs it (apt, as root)")
    done = subprocess.run([BUILDAH, *args], capture_output=True, text=True, check=False, timeout=300)
    if done.returncode != 0:
        raise ImageError(f"buildah {args[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def pod_security(objects: Iterable[dict[str, Any]]) -> tuple[int, int, int]:
    """The Deployment's runAsUser, runAsGroup and fsGroup."""
    context = chart.find(objects, "Deployment")["spec"]["template"]["spec"].get("securityContext") or {}
    try:
        return int(context["runAsUser"]), int(context["runAsGroup"]), int(context["fsGroup"])
    except KeyError as exc:
        raise ImageError(f"the chart's pod securityContext sets no {exc.args[0]}") from None


def container_spec(objects: Iterable[dict[str, Any]], name: str) -> dict[str, Any]:
    pod = chart.find(objects, "Deployment")["spec"]["template"]["spec"]
    for container in pod["containers"]:
        if container["name"] == name:
            return dict(container)
    raise ImageError(f"the chart's Deployment has no container {name}")


class ImageRunner:
    """Turns "start the chart's container X of replica i" into a `buildah run` command line."""

    def __init__(self, image: str) -> None:
        self.image = image
        self._container = ""
        self._rootfs: Path | None = None

    def container(self) -> str:
        if not self._container:
            name = f"hami-sim-{uuid.uuid4().hex[:12]}"
            _buildah("from", "--quiet", "--pull=never", "--name", name, self.image)
            self._container = name
            self._rootfs = Path(_buildah("mount", name))
        return self._container

    def resolve(self, target: str) -> str:
        """`target` with the image's symlinks resolved inside its root (a kubelet's runtime does the same)."""
        assert self._rootfs is not None
        resolved = PurePosixPath("/")
        for part in PurePosixPath(target).parts[1:]:
            candidate = resolved / part
            for _ in range(40):
                host = self._rootfs / str(candidate).lstrip("/")
                if not host.is_symlink():
                    break
                link = PurePosixPath(os.readlink(host))
                candidate = link if link.is_absolute() else candidate.parent / link
            resolved = candidate
        return str(resolved)

    def argv(
        self,
        objects: Iterable[dict[str, Any]],
        container: str,
        volumes: Mapping[str, Path],
        env: Mapping[str, str],
    ) -> list[str]:
        """`buildah run` of the chart's `container` with its environment overridden by `env` and each of its
        volumeMounts bound from `volumes[name]` (a folder, or the folder holding a subPath)."""
        objects = list(objects)
        spec = container_spec(objects, container)
        uid, gid, fs_group = pod_security(objects)
        ctr = self.container()
        argv = [BUILDAH, "run", "--isolation", "chroot", "--network", "host", "--user", "0:0"]
        argv += ["--cap-add", "CAP_SYS_ADMIN", "--workingdir", str(spec.get("workingDir") or "/app")]
        for mount in spec.get("volumeMounts") or []:
            if mount["name"] not in volumes:
                raise ImageError(f"no stand-in for the chart's volume {mount['name']} of {container}")
            source = volumes[mount["name"]] / str(mount.get("subPath") or "")
            mode = "ro" if mount.get("readOnly") else "rw"
            argv += ["--volume", f"{source}:{self.resolve(mount['mountPath'])}:{mode}"]
        if "serviceaccount" in volumes:
            argv += ["--volume", f"{volumes['serviceaccount']}:{self.resolve(SERVICE_ACCOUNT_DIR)}:ro"]
        for key, value in env.items():
            argv += ["--env", f"{key}={value}"]
        command = [str(c) for c in [*(spec.get("command") or []), *(spec.get("args") or [])]]
        if not command:
            raise ImageError(f"the chart's container {container} has no command")
        shim = ["python", "-c", SHIM, str(uid), str(gid), str(fs_group)]
        return [*argv, ctr, "--", *shim, *command]

    def close(self) -> None:
        """Remove the working container (its processes must be stopped first)."""
        if self._container:
            name, self._container, self._rootfs = self._container, "", None
            _buildah("rm", name)


def container_process(buildah_pid: int) -> int | None:
    """The container's own process under `buildah run` (below buildah-chroot-runtime and -exec): where
    SIGTERM goes, as a kubelet sends it to the container's first process. `buildah run` and its helpers
    SIGKILL the container when they get SIGTERM instead of passing it on (measured with buildah 1.28)."""
    pid = buildah_pid
    for _ in range(4):
        children = _children(pid)
        if not children:
            return None
        pid = children[0]
        try:
            if "buildah" not in Path(f"/proc/{pid}/comm").read_text():  # memfd:buildah-c...
                return pid
        except OSError:
            return None
    return None


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return found


def secret_folder(
    source: Path, target: Path, fs_group: int, files: Mapping[str, bytes] | None = None
) -> Path:
    """A copy of `source`'s files (and `files`) as a Secret volume: root:fsGroup, mode 0440."""
    target.mkdir(parents=True, exist_ok=True)
    contents = {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()} if source.is_dir() else {}
    for name, data in {**contents, **(files or {})}.items():
        path = target / name
        path.write_bytes(data)
        os.chown(path, 0, fs_group)
        path.chmod(SECRET_MODE)
    return target


def empty_dir(path: Path) -> Path:
    """An emptyDir as the kubelet creates it: world-writable."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


class PodSetup(Protocol):
    """What of sim.cluster.realcluster.ChartSetup the containers need (no import back: sim.cluster.realcluster
    uses this)."""

    @property
    def objects(self) -> tuple[dict[str, Any], ...]: ...
    @property
    def tls(self) -> chart.TlsFiles: ...
    @property
    def client(self) -> chart.TlsFiles: ...
    @property
    def device_config(self) -> Path: ...


class PodStack(Protocol):
    """What of sim.cluster.stack.Stack the containers need (no import back: sim.cluster.stack imports this
    module)."""

    @property
    def image(self) -> ImageRunner | None: ...
    @property
    def control_plane(self) -> Any: ...
    @property
    def workdir(self) -> Path: ...


def image_containers(
    stack: PodStack,
    setup: PodSetup,
    suffix: str,
    pod_name: str,
    node: str,
    checkout_env: Mapping[str, Mapping[str, str]],
    service_env: Mapping[str, str],
) -> dict[str, list[str]]:
    """The `buildah run` command lines of one replica's containers (`checkout_env`: the environment the
    checkout's process of each container would get; only `HARNESS_ENV` is taken from it), with the folders
    standing in for the pod's volumes under `workdir/pod<suffix>`."""
    assert stack.image is not None and stack.control_plane is not None
    fs_group = pod_security(setup.objects)[2]
    pod = stack.workdir / f"pod{suffix}"
    kubeconfig = yaml.safe_load(stack.control_plane.kubeconfig_for(EXTENDER).read_text())
    server = str(kubeconfig["clusters"][0]["cluster"]["server"])
    host, _, port = server.removeprefix("https://").rpartition(":")
    token = {
        "token": str(kubeconfig["users"][0]["user"]["token"]).encode(),
        "ca.crt": base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]),
        "namespace": RELEASE_NAMESPACE.encode(),
    }
    config = pod / "device-config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "device-config.yaml").write_bytes(setup.device_config.read_bytes())
    volumes = {
        "state": empty_dir(stack.workdir / f"state{suffix}"),  # where the checkout's replica keeps it
        "device-config": config,
        "tls": secret_folder(setup.tls.cert.parent, pod / "tls", fs_group),
        "kube-scheduler-client": secret_folder(setup.client.ca.parent, pod / "client", fs_group),
        "serviceaccount": secret_folder(pod / "none", pod / "serviceaccount", fs_group, token),
    }
    argvs = {}
    for container, env in checkout_env.items():
        volumes[f"{container}-tmp"] = empty_dir(pod / f"{container}-tmp")
        chart_env = chart.container_env(setup.objects, container, pod_name, RELEASE_NAMESPACE, node)
        harness = {k: env[k] for k in HARNESS_ENV if k in env}
        cluster = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
        merged = {**chart_env, **harness, **cluster, **service_env}
        argvs[container] = stack.image.argv(setup.objects, container, volumes, merged)
    return argvs
