"""Where `make kube` (scripts/build-kube.sh) puts the real control plane's binaries, and their versions.

The rule is the script's: `$HAMI_KUBE_CACHE` (else `<repo>/.tools/kube`), then `kubernetes-<v>/` and
`etcd-<v>/`, where `<v>` is the version `tools/kube/go.mod` and `tools/etcd/go.mod` require. A folder counts
only once the script marked it complete, so a half-finished build is never run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
KUBE_MODULE = "k8s.io/kubernetes"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"


class MissingBinaries(RuntimeError):
    """The binaries are not built; the message says how to build them."""


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    kube_scheduler: Path
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


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("HAMI_KUBE_CACHE") or REPO_ROOT / ".tools" / "kube")


def find(env: Mapping[str, str] | None = None) -> Binaries:
    """The built binaries; raises MissingBinaries (naming `make kube`) when they are not complete."""
    cache = cache_dir(env)
    kube_version = required_version(REPO_ROOT / "tools" / "kube" / "go.mod", KUBE_MODULE)
    etcd_version = required_version(REPO_ROOT / "tools" / "etcd" / "go.mod", ETCD_MODULE)
    kube, etcd = cache / f"kubernetes-{kube_version}", cache / f"etcd-{etcd_version}"
    for folder in (kube, etcd):
        if not (folder / ".complete").is_file():
            raise MissingBinaries(f"{folder} is not built: run `make kube` (or set HAMI_KUBE_CACHE)")
    return Binaries(
        kube / "kube-apiserver", kube / "kube-scheduler", etcd / "etcd", kube_version, etcd_version
    )
