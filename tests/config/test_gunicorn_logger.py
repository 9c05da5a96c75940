"""config/gunicorn.conf.py's logger: no access-log work per request while the access logger drops it.

Gunicorn builds each request's access-log atoms whenever any logging configuration is given (ours is
`logconfig_dict`), even though `gunicorn.access` has no handler and a WARNING level: issue 20 measured it
per webhook call. The atoms are built only where a line would be written.
"""

from __future__ import annotations

import logging
import runpy
from pathlib import Path
from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

CONF = Path(__file__).resolve().parents[2] / "config" / "gunicorn.conf.py"


@pytest.fixture
def logger_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("HAMI_STATE_DIR", str(tmp_path / "state"))
    namespace = runpy.run_path(str(CONF))
    assert namespace["logger_class"] is namespace["QuietAccessLogger"]
    return namespace["logger_class"]


@pytest.mark.parametrize(
    ("level", "built"),
    [pytest.param(logging.WARNING, 0, id="dropped-not-built"), pytest.param(logging.INFO, 1, id="written")],
)
def test_access_atoms_are_built_only_when_written(
    logger_class: Any, level: int, built: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Config()
    config.set("accesslog", "/dev/null")
    logger = logger_class(config)
    logger.access_log.setLevel(level)
    calls: list[int] = []
    monkeypatch.setattr(Logger, "atoms", lambda self, *args: calls.append(1) or {"h": "-"})
    try:
        logger.access(None, None, {}, None)
    finally:
        for log in (logger.access_log, logger.error_log):  # Gunicorn's loggers are global: leave them bare
            for handler in list(log.handlers):
                log.removeHandler(handler)
                handler.close()
    assert len(calls) == built
