"""Throwaway certificates for a run that serves our extender the way the chart does (docs/security.md):
a server CA and a leaf for 127.0.0.1 (both Gunicorn servers), kube-scheduler's client CA with its client
leaf (the extender server requires it), and a rogue CA with a client leaf of the same name (what someone
who merely *claims* to be kube-scheduler presents: refused at the handshake).

`issue` makes any of them with `cryptography`; `ChartPki.create(folder)` writes the set as PEM files.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def write(self, folder: Path, stem: str) -> tuple[Path, Path]:
        cert, key = folder / f"{stem}.crt", folder / f"{stem}.key"
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        return cert, key


def issue(name: str, issuer: Issued | None = None, *, ca: bool = False, server: bool = False) -> Issued:
    """A CA (self-signed without `issuer`) or a leaf signed by `issuer`: server (127.0.0.1) or client."""
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
        builder = builder.add_extension(usage, critical=True)
    else:
        purpose = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
    if server:
        san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        builder = builder.add_extension(san, critical=False)
    signer = issuer.key if issuer else key
    return Issued(builder.sign(signer, hashes.SHA256()), key)


@dataclass(frozen=True)
class ChartPki:
    """The files: the servers' certificate and key, the CA that signed them, kube-scheduler's client CA,
    its client certificate and key, and a rogue client (same name, another CA)."""

    server: tuple[Path, Path]
    server_ca: Path
    client_ca: Path
    client: tuple[Path, Path]
    rogue: tuple[Path, Path]

    @property
    def server_ca_pem(self) -> bytes:
        return self.server_ca.read_bytes()

    @classmethod
    def create(cls, folder: Path) -> ChartPki:
        folder.mkdir(parents=True, exist_ok=True)
        server_ca, client_ca = issue("hami-scheduler-ca", ca=True), issue("kube-scheduler-client-ca", ca=True)
        rogue_ca = issue("kube-scheduler-client-ca", ca=True)  # same name, another key
        (folder / "server-ca.crt").write_bytes(server_ca.cert_pem)
        (folder / "client-ca.crt").write_bytes(client_ca.cert_pem)
        return cls(
            server=issue("hami-scheduler", server_ca, server=True).write(folder, "server"),
            server_ca=folder / "server-ca.crt",
            client_ca=folder / "client-ca.crt",
            client=issue("hami-kube-scheduler", client_ca).write(folder, "client"),
            rogue=issue("hami-kube-scheduler", rogue_ca).write(folder, "rogue"),
        )
