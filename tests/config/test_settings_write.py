"""HAMI_FILTER_WRITE and HAMI_BIND_WRITE_WAIT (issue 20): where /filter writes the allocation, and how long
/bind waits for a pending write. `auto` defers only behind kube-scheduler's client certificate."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.envvars import SettingsError
from config.settings import load_settings


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    cert, ca = tmp_path / "tls.crt", tmp_path / "ca.crt"
    cert.write_text("x")
    ca.write_text("x")
    return {"HAMI_TLS_CERT_FILE": str(cert), "HAMI_TLS_KEY_FILE": str(cert), **extra}


@pytest.mark.parametrize(
    ("extra", "deferred"),
    [
        pytest.param({}, False, id="auto-all-routes-no-client-ca"),
        pytest.param({"HAMI_ROUTES": "scheduler"}, False, id="auto-loopback-without-client-ca"),
        pytest.param(
            {"HAMI_ROUTES": "scheduler", "HAMI_TLS_CLIENT_CA_FILE": "CA"}, True, id="auto-behind-client-ca"
        ),
        pytest.param(
            {"HAMI_FILTER_WRITE": "SYNC", "HAMI_ROUTES": "scheduler", "HAMI_TLS_CLIENT_CA_FILE": "CA"},
            False,
            id="sync-forced",
        ),
        pytest.param({"HAMI_FILTER_WRITE": "deferred"}, True, id="deferred-forced"),
    ],
)
def test_which_write(tmp_path: Path, extra: dict[str, str], deferred: bool) -> None:
    env = _env(tmp_path, **extra)
    if env.get("HAMI_TLS_CLIENT_CA_FILE") == "CA":
        env["HAMI_TLS_CLIENT_CA_FILE"] = str(tmp_path / "ca.crt")
    assert load_settings(env).deferred_write is deferred


def test_bind_write_wait(tmp_path: Path) -> None:
    assert load_settings(_env(tmp_path)).bind_write_wait == 5.0
    assert load_settings(_env(tmp_path, HAMI_BIND_WRITE_WAIT="1500ms")).bind_write_wait == 1.5


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(
            {"HAMI_FILTER_WRITE": "later"},
            "HAMI_FILTER_WRITE='later': expected one of auto, deferred, sync",
            id="unknown-mode",
        ),
        pytest.param(
            {"HAMI_BIND_WRITE_WAIT": "0s"}, "HAMI_BIND_WRITE_WAIT='0s': must be positive", id="zero-wait"
        ),
    ],
)
def test_bad_values_are_one_line(tmp_path: Path, extra: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings(_env(tmp_path, **extra))
    assert str(raised.value) == message
