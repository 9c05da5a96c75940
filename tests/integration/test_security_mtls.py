"""Optional mTLS for the extender (HAMI_TLS_CERT_FILE/KEY_FILE + HAMI_TLS_CLIENT_CA_FILE; docs/security.md).

The real Gunicorn (config/gunicorn.conf.py: `ca_certs` + `cert_reqs = CERT_REQUIRED`) with certificates made
here with `cryptography`: a server CA and leaf for 127.0.0.1, a client CA and a client leaf, and a rogue CA
with its own client leaf. A client without a certificate, or with one the client CA did not sign, is refused
during the TLS handshake (TLS 1.2) or by the server's alert before any HTTP answer (TLS 1.3, where the
client's handshake completes first); a client with a certificate from the client CA gets answers. Replacing
the server's certificate files on disk is picked up by the next connection, without a restart (same master
and worker PIDs): Gunicorn builds an SSLContext per connection.
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from sim.cluster.pki import Issued, issue
from sim.cluster.stack import group_members
from sim.kit.processes import ChildProcess, start_process, wait_for_http

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Pki:
    folder: Path
    server_ca: Issued
    client_ca: Issued
    client: tuple[Path, Path]
    rogue: tuple[Path, Path]

    def rotate_server(self) -> int:
        """Replace the served certificate and key on disk (each by an atomic rename); the new serial."""
        leaf = issue("hami-scheduler-rotated", self.server_ca, server=True)
        for data, name in ((leaf.key_pem, "server.key"), (leaf.cert_pem, "server.crt")):
            staged = self.folder / f"{name}.new"
            staged.write_bytes(data)
            os.replace(staged, self.folder / name)
        return int(leaf.cert.serial_number)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    server_ca, client_ca, rogue_ca = (
        issue("server-ca", ca=True),
        issue("client-ca", ca=True),
        issue("x", ca=True),
    )
    issue("hami-scheduler", server_ca, server=True).write(folder, "server")
    (folder / "server-ca.crt").write_bytes(server_ca.cert_pem)
    (folder / "client-ca.crt").write_bytes(client_ca.cert_pem)
    client = issue("kube-scheduler", client_ca).write(folder, "client")
    rogue = issue("kube-scheduler", rogue_ca).write(folder, "rogue")
    return Pki(folder, server_ca, client_ca, client, rogue)


@dataclass
class TlsService:
    process: ChildProcess
    port: int


@pytest.fixture(scope="module")
def service(pki: Pki, emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsService]:
    """Gunicorn with mTLS on an ephemeral port (no registrar: health, decoding and TLS are what is tested)."""
    workdir = tmp_path_factory.mktemp("mtls")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("HAMI_") and k != "PROMETHEUS_MULTIPROC_DIR"
    }
    env.update(
        {
            "HAMI_BIND": f"127.0.0.1:{port}",
            "HAMI_WORKERS": "2",
            "HAMI_STATE_DIR": str(workdir / "state"),
            "PROMETHEUS_MULTIPROC_DIR": str(workdir / "metrics"),
            "KUBECONFIG": str(emulator.kubeconfig),
            "HAMI_LOG_LEVEL": "WARNING",
            "HAMI_TLS_CERT_FILE": str(pki.folder / "server.crt"),
            "HAMI_TLS_KEY_FILE": str(pki.folder / "server.key"),
            "HAMI_TLS_CLIENT_CA_FILE": str(pki.folder / "client-ca.crt"),
        }
    )
    argv = [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"]
    process = start_process(argv, log_path=workdir / "gunicorn.log", env=env, cwd=REPO)
    try:
        context = client_context(pki, pki.client)
        wait_for_http(f"https://127.0.0.1:{port}/healthz", timeout=120, process=process, ssl_context=context)
        yield TlsService(process, port)
    finally:
        process.stop(15.0)


def client_context(
    pki: Pki, identity: tuple[Path, Path] | None, maximum: ssl.TLSVersion = ssl.TLSVersion.MAXIMUM_SUPPORTED
) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.folder / "server-ca.crt"))
    context.maximum_version = maximum
    if identity is not None:
        context.load_cert_chain(str(identity[0]), str(identity[1]))
    return context


def request(service: TlsService, context: ssl.SSLContext, method: str, path: str, body: bytes = b"") -> bytes:
    """One request on a new connection; the response body (raises on a TLS refusal)."""
    connection = http.client.HTTPSConnection("127.0.0.1", service.port, context=context, timeout=15)
    try:
        connection.request(method, path, body=body or None, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        return response.read()
    finally:
        connection.close()


def served_serial(service: TlsService, pki: Pki) -> int:
    context = client_context(pki, pki.client)
    with (
        socket.create_connection(("127.0.0.1", service.port), timeout=15) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


@pytest.mark.parametrize("identity", ["none", "rogue"])
def test_a_client_without_a_certificate_of_the_client_ca_is_refused_at_the_handshake(
    identity: str, service: TlsService, pki: Pki
) -> None:
    chosen = None if identity == "none" else pki.rogue
    context = client_context(pki, chosen, ssl.TLSVersion.TLSv1_2)
    with (
        socket.create_connection(("127.0.0.1", service.port), timeout=15) as raw,
        pytest.raises((ssl.SSLError, ConnectionResetError)),
    ):
        context.wrap_socket(raw, server_hostname="127.0.0.1")  # the handshake itself fails


@pytest.mark.parametrize("identity", ["none", "rogue"])
def test_with_tls13_the_refusal_comes_before_any_http_answer(
    identity: str, service: TlsService, pki: Pki
) -> None:
    chosen = None if identity == "none" else pki.rogue
    context = client_context(pki, chosen, ssl.TLSVersion.TLSv1_3)
    with pytest.raises((ssl.SSLError, ConnectionResetError, http.client.RemoteDisconnected)):
        request(service, context, "GET", "/healthz")


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        ("GET", "/healthz", b"", b"ok"),
        ("POST", "/filter", b"{not json", b'"Error":"invalid JSON'),
        ("POST", "/bind", b"[]", b"cannot unmarshal non-object"),
    ],
    ids=["healthz", "filter", "bind"],
)
def test_a_client_certificate_from_the_client_ca_gets_answers(
    method: str, path: str, body: bytes, expected: bytes, service: TlsService, pki: Pki
) -> None:
    assert expected in request(service, client_context(pki, pki.client), method, path, body)


def test_a_rotated_server_certificate_is_served_without_a_restart(service: TlsService, pki: Pki) -> None:
    members = group_members(service.process.pid)
    before = served_serial(service, pki)
    rotated = pki.rotate_server()
    assert rotated != before
    seen = {served_serial(service, pki) for _ in range(4)}  # new connections, whichever worker accepts
    assert seen == {rotated}
    assert request(service, client_context(pki, pki.client), "GET", "/healthz") == b"ok"
    assert service.process.alive() and group_members(service.process.pid) == members
