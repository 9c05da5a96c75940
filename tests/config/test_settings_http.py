"""Which routes a server has, where it may listen with them, and its body caps (issue 11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.envvars import SettingsError
from config.settings import SMALL_BODY_BYTES, load_settings, loopback


@pytest.mark.parametrize(
    ("bind", "local"),
    [
        ("127.0.0.1:8444", True),
        ("127.0.0.2:1", True),
        ("localhost:8443", True),
        ("[::1]:8443", True),
        ("unix:/run/hami.sock", True),
        ("0.0.0.0:8443", False),
        ("[::]:8443", False),
        ("10.0.0.7:8443", False),
        (":8443", False),
        ("127.255.255.254:8443", True),
        ("LocalHost:8443", True),
        ("[::ffff:127.0.0.1]:8443", True),
        ("127.example.com:8443", False),  # a name that merely begins like a loopback address (issue 19)
        ("127.0.0.1.nip.io:8443", False),
        ("127.0.0.1evil:8443", False),
        ("127.:8443", False),
        ("127.1:8443", False),  # not a dotted quad: refused rather than guessed
        ("128.0.0.1:8443", False),
        ("localhost.example.com:8443", False),
        ("[::2]:8443", False),
        ("[::ffff:10.0.0.7]:8443", False),
        ("", False),
    ],
)
def test_loopback(bind: str, local: bool) -> None:
    assert loopback(bind) is local


def _ca(tmp_path: Path) -> dict[str, str]:
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_text("pem")
    return {
        "HAMI_TLS_CERT_FILE": str(tmp_path / "tls.crt"),
        "HAMI_TLS_KEY_FILE": str(tmp_path / "tls.key"),
        "HAMI_TLS_CLIENT_CA_FILE": str(tmp_path / "ca.crt"),
    }


@pytest.mark.parametrize("routes", ["all", "scheduler"])
def test_the_scheduler_verbs_never_listen_openly(routes: str) -> None:
    env = {"HAMI_ROUTES": routes, "HAMI_BIND": "0.0.0.0:8444"}
    with pytest.raises(SettingsError, match="would serve /filter and /bind to anyone"):
        load_settings(env)


def test_the_scheduler_verbs_listen_openly_only_with_client_certificates(tmp_path: Path) -> None:
    env = {"HAMI_ROUTES": "scheduler", "HAMI_BIND": "0.0.0.0:8444", **_ca(tmp_path)}
    assert load_settings(env).http.scheduler_verbs


def test_the_public_routes_listen_anywhere() -> None:
    http = load_settings({"HAMI_ROUTES": "public", "HAMI_BIND": "0.0.0.0:8443"}).http
    assert (http.public_routes, http.scheduler_verbs) == (True, False)


def test_the_default_is_every_route_on_loopback() -> None:
    http = load_settings({}).http
    assert (http.bind, http.routes, http.public_routes, http.scheduler_verbs) == (
        "127.0.0.1:8443",
        "all",
        True,
        True,
    )


def test_unknown_routes_are_refused() -> None:
    with pytest.raises(SettingsError, match="HAMI_ROUTES='webhook': must be one of all, scheduler, public"):
        load_settings({"HAMI_ROUTES": "webhook"})


@pytest.mark.parametrize(
    ("path", "cap"),
    [
        ("/filter", 4 * 1024 * 1024),
        ("/preempt", 4 * 1024 * 1024),  # the pod and up to max(100, 10% of nodes) candidates' victims
        ("/webhook", 4 * 1024 * 1024),
        ("/bind", SMALL_BODY_BYTES),
        ("/healthz", SMALL_BODY_BYTES),
        ("/nowhere", SMALL_BODY_BYTES),
    ],
)
def test_body_caps_are_sized_to_what_callers_send(path: str, cap: int) -> None:
    assert load_settings({}).http.body_cap(path) == cap
