"""Options every suite shares.

`--from-image IMAGE` (`make image` writes the reference to build/image.ref): the real-control-plane suites
start our worker and both Gunicorn servers from that built image instead of the checkout (sim.cluster.image),
and tests/image (the image's own checks) is collected; without it a plain `pytest` (`make test`) leaves
tests/image out: those checks need an image, and `make image` (which builds one) runs them. Named
explicitly without the option, they fail saying so. The header names the real control plane's version.
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
