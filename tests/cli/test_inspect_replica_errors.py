"""`inspect --url` told in one line (issue 31 scope 4): the public listener's 404, a refused or missing
client certificate, an untrusted server certificate and plain HTTP to a TLS port each become one sentence
naming the listener that serves /debug/state and the flags that reach it (exit 2). The servers here are
local HTTPS servers shaped like the chart's two listeners; tests/real/test_sim_up.py does the same against
the real ones."""

from __future__ import annotations

import http.server
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from sim.emulator import tls
from sim.emulator.testing import REPO_ROOT


class NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_error(404)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The servers' CA and certificate."""
    folder = tmp_path_factory.mktemp("certs")
    server = tls.generate(["127.0.0.1"])
    files = {"ca": server.ca_pem, "cert": server.cert_pem, "key": server.key_pem}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return {name: str(folder / name) for name in files}


class TlsServer(http.server.ThreadingHTTPServer):
    """The TLS handshake in the connection's thread, after accept, as Gunicorn does it (an accept-time
    handshake closes a failed connection without the alert the client is to report)."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), NotFound)
        self.context = context

    def get_request(self) -> tuple[ssl.SSLSocket, object]:
        sock, address = self.socket.accept()
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: object, client_address: object) -> None:
        return  # a refused handshake is what these tests cause


def serve(certs: dict[str, str], client_ca: bool) -> Iterator[str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs["cert"], certs["key"])
    if client_ca:  # the extender listener: kube-scheduler's client certificate required
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(certs["ca"])
    server = TlsServer(context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def public(certs: dict[str, str]) -> Iterator[str]:
    yield from serve(certs, client_ca=False)


@pytest.fixture(scope="module")
def extender(certs: dict[str, str]) -> Iterator[str]:
    yield from serve(certs, client_ca=True)


def inspect(*args: str) -> str:
    """The one line `inspect --url ...` prints, asserting exit status 2 and nothing on stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "inspect", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr.count("\n")) == (2, "", 1), done.stderr
    return done.stderr


def test_the_public_listeners_404_names_the_extender_listener(public: str, certs: dict[str, str]) -> None:
    told = inspect("--url", public, "--ca-file", certs["ca"])
    assert f"{public}/debug/state?all=true: HTTP 404: /debug/state is not served on this listener" in told
    assert (
        "--url https://127.0.0.1:8444 --ca-file <ca.crt" in told
        and "--cert <tls.crt> --key <tls.key>" in told
    )


def test_a_missing_client_certificate_names_the_flags(extender: str, certs: dict[str, str]) -> None:
    """The server's alert (TLSV13_ALERT_CERTIFICATE_REQUIRED) can be lost when it closes with our request
    unread (a reset): the sentence then names the same cause as the likely one. (A client certificate of
    another CA, TLSV1_ALERT_UNKNOWN_CA from the real extender: tests/real/test_sim_up.py.)"""
    told = inspect("--url", extender, "--ca-file", certs["ca"])
    alert = "the replica requires a client certificate (TLSV13_ALERT_CERTIFICATE_REQUIRED)"
    lost = "the replica closed the TLS connection ("
    assert alert in told or lost in told, told
    assert "extender listener" in told and "only kube-scheduler's is accepted" in told
    assert "--cert <tls.crt> --key <tls.key> of the chart's Secret <release>-kube-scheduler-client" in told


def test_an_untrusted_certificate_names_ca_file(public: str) -> None:
    told = inspect("--url", public)
    assert (
        "the replica's certificate is not trusted (" in told and "--ca-file" in told and "--insecure" in told
    )


def test_plain_http_to_a_tls_port(public: str) -> None:
    told = inspect("--url", public.replace("https://", "http://"))
    assert "the replica serves HTTPS only (--url https://...)" in told
