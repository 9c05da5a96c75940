"""A Flask test client for the HTTP layer: the real app from `create_app(settings, context)`.

The context is the production one (`app.factory.build_context`): its API client talks to an in-process API
emulator (sim.emulator.testing, thread mode, stopped at the end), its ledger and inventory live in a temp dir.
No registrar runs, so the replica is not Ready: tests here exercise what happens before any decision (body
reading, decoding, the wire shapes), which is where bad input is stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from app.factory import build_context, create_app
from config.settings import HttpSettings, Settings
from sim.emulator.testing import run_emulator

MAX_BODY = 64 * 1024


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlaskClient]:
    workdir: Path = tmp_path_factory.mktemp("routes")
    with run_emulator(workdir / "emulator") as emulator:
        settings = Settings(
            state_dir=workdir / "state",
            kubeconfig=str(emulator.kubeconfig),
            events_enabled=False,
            http=HttpSettings(max_body_bytes=MAX_BODY),
        )
        settings.state_dir.mkdir()
        context = build_context(settings)
        try:
            yield create_app(settings, context).test_client()
        finally:
            context.close()
