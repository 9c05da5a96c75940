"""Settings added for operators (config/settings.py): log levels validated like every other setting (an
unknown level is one readable line and exit 2 in both processes, never a traceback), the decision log's
level and HAMi's --legacy-metrics switch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.envvars import SettingsError
from config.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("env", "level", "decisions"),
    [
        pytest.param({}, "INFO", "INFO", id="defaults"),
        pytest.param({"HAMI_LOG_LEVEL": "debug"}, "DEBUG", "INFO", id="lower-case"),
        pytest.param({"HAMI_LOG_LEVEL": " Warn "}, "WARNING", "INFO", id="warn-is-warning"),
        pytest.param({"HAMI_LOG_LEVEL": "ERROR", "HAMI_DECISION_LOG": "debug"}, "ERROR", "DEBUG", id="both"),
        pytest.param({"HAMI_DECISION_LOG": "off"}, "INFO", "OFF", id="decisions-off"),
        pytest.param({"HAMI_LOG_LEVEL": ""}, "INFO", "INFO", id="empty-is-default"),
    ],
)
def test_log_levels(env: dict[str, str], level: str, decisions: str) -> None:
    settings = load_settings(env)
    assert (settings.log_level, settings.decision_log) == (level, decisions)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"HAMI_LOG_LEVEL": "verbose"},
            "HAMI_LOG_LEVEL='verbose': expected one of DEBUG, INFO, WARNING, ERROR",
            id="verbose",
        ),
        pytest.param(
            {"HAMI_LOG_LEVEL": "off"},
            "HAMI_LOG_LEVEL='off': expected one of DEBUG, INFO, WARNING, ERROR",
            id="off-only-for-decisions",
        ),
        pytest.param(
            {"HAMI_DECISION_LOG": "4"},
            "HAMI_DECISION_LOG='4': expected one of DEBUG, INFO, WARNING, ERROR, OFF",
            id="klog-verbosity",
        ),
        pytest.param(
            {"HAMI_LEGACY_METRICS": "sometimes"},
            "HAMI_LEGACY_METRICS='sometimes': expected true or false",
            id="legacy-metrics",
        ),
    ],
)
def test_invalid_values_are_one_readable_line(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings(env)
    assert str(raised.value) == message


def test_legacy_metrics_switch() -> None:
    assert load_settings({}).legacy_metrics is False
    assert load_settings({"HAMI_LEGACY_METRICS": "true"}).legacy_metrics is True


@pytest.mark.parametrize(
    "command",
    [
        pytest.param([sys.executable, "-m", "workers"], id="registration-worker"),
        pytest.param(
            [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"], id="extender"
        ),
    ],
)
def test_processes_refuse_an_unknown_log_level_without_a_traceback(
    command: list[str], tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAMI_")}
    env.update({"HAMI_LOG_LEVEL": "verbose", "HAMI_STATE_DIR": str(tmp_path)})
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "HAMI_LOG_LEVEL='verbose'" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
