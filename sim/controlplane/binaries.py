"""Where `make kube` (scripts/build-kube.sh) puts the real control plane's binaries, and their versions.

The rule is the script's: `$HAMI_KUBE_CACHE` (else `<repo>/.tools/kube`), then `kubernetes-<v>/` (the
binaries of KUBE_BINARIES, kubectl among them: the kubectl of this version, within every skew policy of its
own server) and `etcd-<v>/`. The versions come from one place, `tools/kube/versions.tsv` (its first row is
the default; `$HAMI_KUBE_VERSION` picks another row, `$HAMI_ETCD_VERSION` overrides that row's etcd), and each
must be the one its wrapper module `tools/kube/<v>/go.mod` / `tools/etcd/<v>/go.mod` requires; the module's
`toolchain` line, if any, is the Go the script builds it with (`toolchain`). A folder counts only once the
script marked it complete and holds every binary, so a half-finished build, or a folder an older script
built with fewer binaries, is never run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
KUBE_MODULE = "k8s.io/kubernetes"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
VERSIONS_FILE = REPO_ROOT / "tools" / "kube" / "versions.tsv"
# what scripts/build-kube.sh builds from k8s.io/kubernetes (cmd/<name>), in the order it builds them
KUBE_BINARIES = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl")


class MissingBinaries(RuntimeError):
    """The binaries are not built; the message says how to build them."""


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    kube_scheduler: Path
    kube_controller_manager: Path
    kubectl: Path  # the kubectl of this version: what the harness, its tests and `sim up` hand to users
    etcd: Path
    kubernetes_version: str
    etcd_version: str

    def versions(self) -> dict[str, str]:
        return {
            "kube-apiserver": self.kubernetes_version,
            "kube-scheduler": self.kubernetes_version,
            "etcd": self.etcd_version,
        }


def required_version(go_mod: Path, module: str) -> str:
    """The version `go_mod` requires of `module` (a `require` line or an entry of a require block)."""
    for line in go_mod.read_text().splitlines():
        fields = line.split()
        if fields[:1] == ["require"]:
            fields = fields[1:]
        if len(fields) >= 2 and fields[0] == module:
            return fields[1]
    raise MissingBinaries(f"{go_mod} does not require {module}")


def toolchain(go_mod: Path) -> str:
    """The GOTOOLCHAIN scripts/build-kube.sh builds `go_mod` with: its `toolchain` line (the exact Go a
    version needs, fetched through the Go module proxy), else "local" (the Go on PATH)."""
    for line in go_mod.read_text().splitlines():
        fields = line.split()
        if fields[:1] == ["toolchain"] and len(fields) == 2:
            return fields[1]
    return "local"


def supported(table: str) -> list[tuple[str, str]]:
    """The (kubernetes, etcd) rows of versions.tsv's text, in order; `#` starts a comment."""
    rows = [line.split("#", 1)[0].split() for line in table.splitlines()]
    return [(row[0], row[1]) for row in rows if len(row) >= 2]


def _tagged(version: str) -> str:
    return version if version.startswith("v") else f"v{version}"


def select(rows: list[tuple[str, str]], env: Mapping[str, str]) -> tuple[str, str]:
    """The (kubernetes, etcd) versions `env` asks for: the first row unless HAMI_KUBE_VERSION names another
    by version or minor ("1.37.2", "v1.37.2", "1.37"); HAMI_ETCD_VERSION replaces the row's etcd."""
    if not rows:
        raise MissingBinaries("tools/kube/versions.tsv lists no version")
    wanted = env.get("HAMI_KUBE_VERSION", "").strip()
    kube, etcd = rows[0]
    if wanted:
        tag = _tagged(wanted)
        matches = [row for row in rows if row[0] == tag or row[0].startswith(tag + ".")]
        if len(matches) != 1:
            listed = ", ".join(row[0] for row in rows)
            raise MissingBinaries(f"HAMI_KUBE_VERSION={wanted} is not one supported version ({listed})")
        kube, etcd = matches[0]
    etcd_wanted = env.get("HAMI_ETCD_VERSION", "").strip()
    return kube, _tagged(etcd_wanted) if etcd_wanted else etcd


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("HAMI_KUBE_CACHE") or REPO_ROOT / ".tools" / "kube")


def find(env: Mapping[str, str] | None = None) -> Binaries:
    """The built binaries; raises MissingBinaries (naming `make kube`) when they are not complete."""
    env = os.environ if env is None else env
    cache = cache_dir(env)
    kube_version, etcd_version = select(supported(VERSIONS_FILE.read_text()), env)
    for wrapper, module, version in (
        ("kube", KUBE_MODULE, kube_version),
        ("etcd", ETCD_MODULE, etcd_version),
    ):
        go_mod = REPO_ROOT / "tools" / wrapper / version / "go.mod"
        if not go_mod.is_file() or required_version(go_mod, module) != version:
            raise MissingBinaries(f"no wrapper module {go_mod} requiring {module} {version}")
    kube, etcd = cache / f"kubernetes-{kube_version}", cache / f"etcd-{etcd_version}"
    build = f"run `make kube KUBE_VERSION={kube_version} ETCD_VERSION={etcd_version}`"
    go = toolchain(REPO_ROOT / "tools" / "kube" / kube_version / "go.mod")
    if go != "local":
        build += f" (it builds with Go {go}, fetched from the Go module proxy)"
    for folder, names in ((kube, KUBE_BINARIES), (etcd, ("etcd",))):
        if not (folder / ".complete").is_file():
            raise MissingBinaries(f"{folder} is not built: {build}, or set HAMI_KUBE_CACHE")
        missing = [name for name in names if not (folder / name).is_file()]
        if missing:
            raise MissingBinaries(f"{folder} lacks {', '.join(missing)}: {build} to add them")
    apiserver, scheduler, controller_manager, kubectl = (kube / name for name in KUBE_BINARIES)
    return Binaries(
        apiserver, scheduler, controller_manager, kubectl, etcd / "etcd", kube_version, etcd_version
    )
