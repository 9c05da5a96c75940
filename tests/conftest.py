"""Options every suite shares.

`--from-image IMAGE` (`make image` writes the reference to build/image.ref): the real-control-plane suites
start our worker and both Gunicorn servers from that built image instead of the checkout (sim.cluster.image),
and tests/image (the image's own checks) is collected; without it a plain `pytest` (`make test`) leaves
tests/image out: those checks need an image, and `make image` (which builds one) runs them. Named
explicitly without the option, they fail saying so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

IMAGE_TESTS = Path(__file__).parent / "image"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--from-image",
        default="",
        metavar="IMAGE",
        help="run our containers from this built image (make image) in the real-control-plane suites",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path == IMAGE_TESTS and not config.getoption("--from-image"):
        return True
    return None


@pytest.fixture(scope="session")
def from_image(request: pytest.FixtureRequest) -> str:
    """The image given with --from-image ("" for the checkout)."""
    return str(request.config.getoption("--from-image"))
