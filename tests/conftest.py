"""Options every suite shares.

`--from-image IMAGE` (`make image` writes the reference to build/image.ref): the real-control-plane suites
start our worker and both Gunicorn servers from that built image instead of the checkout (sim.cluster.image),
and tests/image (the image's own checks) is collected; without it a plain `pytest` (`make test`) leaves
tests/image out: those checks need an image, and `make image` (which builds one) runs them. Named
explicitly without the option, they fail saying so. The header names the real control plane's version.

`@pytest.mark.versions("1.34", "1.37", "1.38")`: the Kubernetes minors a real test must pass on. A session
whose control plane (HAMI_KUBE_VERSION) is another minor deselects it (counted in the summary: a 1.34 session
leaves out what needs 1.37's Workload API); `--versions-only` keeps nothing but the tests marked for the
session's minor, which is how `make test-versions KUBE_VERSION=1.38` runs the version-sensitive suites on
the versions `make test` (the default, everything) does not (docs/real-control-plane.md "CI").
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.controlplane.binaries import VERSIONS_FILE, MissingBinaries, select, supported

IMAGE_TESTS = Path(__file__).parent / "image"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--from-image",
        default="",
        metavar="IMAGE",
        help="run our containers from this built image (make image) in the real-control-plane suites",
    )
    parser.addoption(
        "--versions-only",
        action="store_true",
        help="only the tests marked versions(...) with this session's Kubernetes minor (make test-versions)",
    )


def session_minor() -> str:
    """The minor ("1.37") of the Kubernetes this session's real control plane runs; "" if none is valid."""
    try:
        kube, _ = select(supported(VERSIONS_FILE.read_text()), os.environ)
    except MissingBinaries:
        return ""
    return ".".join(kube.removeprefix("v").split(".")[:2])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    minor, only = session_minor(), bool(config.getoption("--versions-only"))
    kept, deselected = [], []
    for item in items:
        marker = item.get_closest_marker("versions")
        wanted = minor in marker.args if marker is not None else not only
        (kept if wanted else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def pytest_report_header() -> str:
    """Which real control plane this session's `real` suites run (HAMI_KUBE_VERSION picks it)."""
    try:
        kube, etcd = select(supported(VERSIONS_FILE.read_text()), os.environ)
    except MissingBinaries as exc:
        return f"real control plane: {exc}"
    return f"real control plane: kubernetes {kube}, etcd {etcd}"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path == IMAGE_TESTS and not config.getoption("--from-image"):
        return True
    return None


@pytest.fixture(scope="session")
def from_image(request: pytest.FixtureRequest) -> str:
    """The image given with --from-image ("" for the checkout)."""
    return str(request.config.getoption("--from-image"))


@pytest.fixture(autouse=True, scope="module")
def _garbage_collected_per_module() -> Iterator[None]:
    """A resource a module leaks (an unclosed socket, file or pipe held in a reference cycle) is reported
    in that module: collecting garbage as each module ends runs the finalizers that warn of it there, not
    in whichever later test the collector happens to run (a ResourceWarning is an error: filterwarnings).
    Without it, one leak failed an unrelated real-control-plane test once in several CI runs."""
    yield
    gc.collect()
