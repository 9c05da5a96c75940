"""TLS wiring: Helm-generated certificates, cert-manager, or an existing Secret."""

from __future__ import annotations

import base64
import datetime
import hashlib
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

SERVICE_NAMES = ["hami-scheduler", "hami-scheduler-webhook", "hami-scheduler-metrics"]
REQUIRED_DNS = [f"{name}.hami-system.svc" for name in SERVICE_NAMES]


def pem(data: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(data))


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    key = ca.public_key()
    try:
        if isinstance(key, rsa.RSAPublicKey):
            assert cert.signature_hash_algorithm is not None
            key.verify(
                cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm
            )
        elif isinstance(key, ec.EllipticCurvePublicKey):
            assert cert.signature_hash_algorithm is not None
            key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        else:
            return False
    except Exception:
        return False
    return True


def webhook_client(manifests: Any) -> dict[str, Any]:
    result: dict[str, Any] = manifests.one("MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]
    return result


def test_generated_secret_serves_every_name_kube_scheduler_and_the_api_server_use(render: Any) -> None:
    manifests = render("ha")
    secret = manifests.one("Secret", "hami-scheduler-tls")
    assert secret["type"] == "kubernetes.io/tls"
    cert, ca = pem(secret["data"]["tls.crt"]), pem(secret["data"]["ca.crt"])
    assert signed_by(cert, ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = sans.get_values_for_type(x509.DNSName)
    assert set(REQUIRED_DNS) <= set(dns)
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    # kube-scheduler verifies with serverName <fullname>.<ns>.svc; the webhook Service name is covered too.
    assert "hami-scheduler.hami-system.svc" in dns
    assert cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > datetime.timedelta(days=3000)
    assert secret["metadata"]["annotations"]["hami.io/tls-sans"] == ",".join(dns)
    assert (
        int(secret["metadata"]["annotations"]["hami.io/tls-not-after-unix"])
        > cert.not_valid_before_utc.timestamp()
    )
    assert base64.b64decode(secret["data"]["tls.key"]).startswith(b"-----BEGIN")


def test_one_ca_for_the_secret_the_webhook_and_the_pod_checksum(render: Any) -> None:
    manifests = render()
    ca = manifests.one("Secret", "hami-scheduler-tls")["data"]["ca.crt"]
    assert webhook_client(manifests)["caBundle"] == ca
    annotations = manifests.deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["checksum/ca"] == hashlib.sha256(ca.encode()).hexdigest()


def test_cert_manager(render: Any) -> None:
    manifests = render("crds")
    # the only Secret: kube-scheduler's client identity, Helm-generated whatever the serving source
    assert [s["metadata"]["name"] for s in manifests.all("Secret")] == [
        "hami-scheduler-kube-scheduler-client"
    ]
    config = manifests.one("MutatingWebhookConfiguration")
    assert (
        config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        == "hami-system/hami-scheduler-serving"
    )
    assert "caBundle" not in webhook_client(manifests)
    serving = manifests.one("Certificate", "hami-scheduler-serving")["spec"]
    assert serving["secretName"] == "hami-scheduler-tls"
    assert set(REQUIRED_DNS) <= set(serving["dnsNames"])
    assert serving["ipAddresses"] == ["127.0.0.1"]
    assert serving["issuerRef"] == {"name": "hami-scheduler-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert "server auth" in serving["usages"]
    # The chart's CA chain: self-signed Issuer -> CA Certificate -> CA Issuer.
    ca_cert = manifests.one("Certificate", "hami-scheduler-ca")["spec"]
    assert ca_cert["isCA"] is True
    assert ca_cert["issuerRef"]["name"] == "hami-scheduler-selfsigned"
    assert manifests.one("Issuer", "hami-scheduler-selfsigned")["spec"] == {"selfSigned": {}}
    assert manifests.one("Issuer", "hami-scheduler-ca")["spec"] == {
        "ca": {"secretName": ca_cert["secretName"]}
    }
    annotations = manifests.deployment["spec"]["template"]["metadata"]["annotations"]
    assert "checksum/ca" not in annotations  # cert-manager renews in place; the CA does not change


def test_cert_manager_with_an_external_issuer(render: Any) -> None:
    issuer = {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    manifests = render("crds", {"tls.certManager.issuerRef": issuer})
    assert [c["metadata"]["name"] for c in manifests.all("Certificate")] == ["hami-scheduler-serving"]
    assert not manifests.has("Issuer")
    assert manifests.one("Certificate")["spec"]["issuerRef"] == issuer


def test_existing_secret_with_a_ca_bundle(render: Any) -> None:
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n...\n").decode()
    manifests = render("default", {"tls.existingSecret": "corp-tls", "tls.caBundle": bundle})
    assert [s["metadata"]["name"] for s in manifests.all("Secret")] == [
        "hami-scheduler-kube-scheduler-client"
    ]
    assert webhook_client(manifests)["caBundle"] == bundle
    volume = next(v for v in manifests.pod_spec["volumes"] if v["name"] == "tls")
    assert volume["secret"] == {"secretName": "corp-tls", "defaultMode": 0o440}


def test_existing_secret_needs_a_ca_bundle_without_a_cluster(render_error: Any) -> None:
    assert "tls.caBundle is required" in render_error("default", {"tls.existingSecret": "corp-tls"})


@pytest.mark.parametrize("container", ["extender", "webhook", "kube-scheduler"])
def test_tls_files(render: Any, container: str) -> None:
    manifests = render()
    mounts = {m["name"]: m["mountPath"] for m in manifests.container(container)["volumeMounts"]}
    assert mounts["tls"] == "/etc/hami/tls"
    if container != "kube-scheduler":
        env = manifests.env(container)
        assert (env["HAMI_TLS_CERT_FILE"], env["HAMI_TLS_KEY_FILE"]) == (
            "/etc/hami/tls/tls.crt",
            "/etc/hami/tls/tls.key",
        )
        # kube-scheduler's verbs require its client certificate; the public server requires none (the API
        # server, the kubelet and Prometheus present none)
        client_ca = env.get("HAMI_TLS_CLIENT_CA_FILE")
        assert client_ca == ("/etc/hami/kube-scheduler-client/ca.crt" if container == "extender" else None)


def test_kube_scheduler_has_a_client_certificate_of_its_own_ca(render: Any) -> None:
    """Issue 11: the chart wires kube-scheduler's tlsConfig certFile/keyFile and the extender's client CA.
    The certificate is signed by a CA that signs nothing else, and verifies against it."""
    secret = render().one("Secret", "hami-scheduler-kube-scheduler-client")
    assert secret["type"] == "kubernetes.io/tls"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    assert cert.issuer == ca.subject and cert.subject != ca.subject
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "hami-kube-scheduler"
    cert.verify_directly_issued_by(ca)
    serving = render().one("Secret", "hami-scheduler-tls")
    serving_ca = x509.load_pem_x509_certificate(base64.b64decode(serving["data"]["ca.crt"]))
    assert serving_ca.subject != ca.subject, "the serving CA must not be the client CA"


def test_helm_test_pod_verifies_the_leader_over_tls(render: Any) -> None:
    pod = render().one("Pod", "hami-scheduler-test-leader")
    command = pod["spec"]["containers"][0]["command"]
    assert command[:2] == ["python", "-c"]
    assert 'cafile="/etc/hami/tls/ca.crt"' in command[2]
    assert command[3:] == [
        "120",
        "https://hami-scheduler.hami-system.svc:443/readyz",
        "https://hami-scheduler-webhook.hami-system.svc:443/healthz",
    ]
    assert pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
