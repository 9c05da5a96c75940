"""The API contract suite runs every test twice: against the API emulator and against the real
kube-apiserver (`make kube`). A test states what Kubernetes does; where the emulator differs on purpose,
docs/emulator.md lists the gap (the suite never special-cases the emulator silently: a `gap(...)` call in a
test names the documented difference).

Fixtures:
- `plane` (module scope, parametrised `emulator` / `real`): the started control plane alone (no chart, no
  scheduler, kube-apiserver with its default flags). The emulator runs with a 50-event watch window and 1 s
  bookmarks, so bookmarks happen within a test's time on both.
- `expiring_plane` (module scope, both): watches expire within seconds — the emulator's 50-event window;
  kube-apiserver without its watch cache, compacting etcd every second.
- `api`: an admin `sim.kit.kube.Kube` client; `ns`: a fresh namespace per test.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.controlplane import ControlPlane, binaries
from sim.controlplane.emulated import EmulatedControlPlane
from sim.controlplane.real import RealControlPlane
from sim.kit.kube import Kube

_names = itertools.count()


def start_plane(kind: str, workdir: Path, expiring: bool = False) -> ControlPlane:
    control: ControlPlane
    if kind == "real":
        try:
            binaries.find()
        except binaries.MissingBinaries as exc:
            pytest.fail(str(exc))
        # kube-apiserver serves watches from its watch cache, which keeps events for minutes; without it a
        # watch goes to etcd, which answers 410 once compacted (every second here).
        extra = ("--watch-cache=false", "--etcd-compaction-interval=1s") if expiring else ()
        control = RealControlPlane(workdir, apiserver_args=extra)
    else:
        # --kubelet-deletions: no kubelet finishes a graceful pod deletion here, on either plane
        flags = ("--event-window", "50", "--bookmark-interval", "1", "--kubelet-deletions")
        control = EmulatedControlPlane(workdir, flags)
    control.start()
    return control


# the real half on every supported version (make test-versions): where kube-apiserver changes, the emulator's
# contract shows it
REAL = pytest.param("real", marks=[pytest.mark.real, pytest.mark.versions("1.34", "1.37", "1.38")])
PLANES = ["emulator", REAL]


@pytest.fixture(scope="module", params=PLANES)
def plane(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    control = start_plane(request.param, tmp_path_factory.mktemp(f"contract-{request.param}"))
    try:
        yield control
    finally:
        control.stop()


@pytest.fixture(scope="module", params=PLANES)
def expiring_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A control plane whose watches expire within seconds (see `start_plane`)."""
    control = start_plane(request.param, tmp_path_factory.mktemp(f"expiring-{request.param}"), expiring=True)
    try:
        yield control
    finally:
        control.stop()


@pytest.fixture
def api(plane: ControlPlane) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(plane.kubeconfig)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def ns(api: Kube) -> str:
    name = f"contract-{next(_names)}"
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name
