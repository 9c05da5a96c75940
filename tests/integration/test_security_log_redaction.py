"""No token and no certificate reaches the logs (app/logs.py; docs/security.md), at debug level.

The service (Gunicorn) and the real registration worker run with HAMI_LOG_LEVEL=DEBUG against a TLS API
emulator, through a kubeconfig carrying a bearer token, the cluster CA and a client certificate and key.
Traffic includes successes and failures: a placed and bound pod, a bind to the wrong node, a filter whose
pod patch the API fails (an injected 500), a webhook review, bad JSON, and a bound pod whose allocation
annotation is corrupt and embeds a PEM private key and the bearer token, which the worker reports
(its warning carries the annotation). Every line either process wrote — Gunicorn's own loggers, ours, the
kubernetes client's and urllib3's, tracebacks — is checked: no token, no base64 of the key or
certificates, no `-----BEGIN`; and the corrupt annotation's message arrived `[redacted]`.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.emulator import tls
from sim.emulator.testing import EmulatorHandle, EmulatorOptions, run_emulator

pytestmark = pytest.mark.integration

TOKEN = f"hami-test-token-{secrets.token_hex(16)}"
NODE = "gpu-logs"
KEY = tls.generate(["kube-scheduler"])  # a client certificate and key for the kubeconfig


@pytest.fixture(scope="module")
def tls_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    workdir = tmp_path_factory.mktemp("tls-emulator")
    with run_emulator(workdir, mode="process", options=EmulatorOptions(tls=True)) as handle:
        yield handle


@pytest.fixture(scope="module")
def kubeconfig(tls_emulator: EmulatorHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The emulator's kubeconfig (server URL and CA data) with a bearer token and a client certificate."""
    config = yaml.safe_load(tls_emulator.kubeconfig.read_text())
    config["users"][0]["user"] = {
        "token": TOKEN,
        "client-certificate-data": base64.b64encode(KEY.cert_pem).decode(),
        "client-key-data": base64.b64encode(KEY.key_pem).decode(),
    }
    path = tmp_path_factory.mktemp("secret-kubeconfig") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def secrets_in(text: str, config: dict[str, Any]) -> list[str]:
    """Which secret material occurs in `text`."""
    user, cluster = config["users"][0]["user"], config["clusters"][0]["cluster"]
    found = []
    for what, value in (
        ("token", TOKEN),
        ("client key data", user["client-key-data"]),
        ("client certificate data", user["client-certificate-data"]),
        ("CA data", cluster.get("certificate-authority-data", "")),
        ("a PEM block", "-----BEGIN"),
        ("the key's body", KEY.key_pem.decode().splitlines()[1]),
    ):
        if value and value in text:
            found.append(what)
    return found


@pytest.fixture(scope="module")
def traffic(
    start_service: Any, kubeconfig: Path, tls_emulator: EmulatorHandle, cluster: Any, wait_for: Any
) -> Any:
    env = {"KUBECONFIG": str(kubeconfig), "HAMI_LOG_LEVEL": "DEBUG"}
    service = start_service(registrar="worker", env=env)
    tls_emulator.seed([cluster.gpu_node(NODE, gpus=1)])
    wait_for(lambda: service.debug_state(NODE)["registered"], 30, f"{NODE} registered")
    leaky = cluster.gpu_pod("leaky")
    pem = KEY.key_pem.decode()
    leaky["metadata"]["annotations"] = {
        "hami.io/vgpu-node": NODE,
        "hami.io/vgpu-devices-allocated": f"GPU-{NODE}-0,NVIDIA,{pem} Bearer {TOKEN},10:;",
    }
    leaky["spec"]["nodeName"] = NODE
    leaky["status"] = {"phase": "Running"}
    tls_emulator.seed([leaky])

    def pod(name: str) -> dict[str, Any]:
        tls_emulator.seed([cluster.gpu_pod(name, memory=1000, cores=10)])
        found = tls_emulator.get("pods", name, "default")
        assert found is not None
        return found

    placed = pod("placed")
    assert service.filter(placed, [NODE])["NodeNames"] == [NODE]
    assert service.bind(tls_emulator.get("pods", "placed", "default"), NODE) == {"Error": ""}
    wrong = pod("wrong-node")
    assert service.bind(wrong, "another-node")["Error"]
    tls_emulator.add_fault(action="error", status=500, verb="patch", resource="pods", count=1)
    assert service.filter(pod("patch-fails"), [NODE])["Error"]
    service.request("POST", "/filter", b"{not json")
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "object": {}},
    }
    service.post_json("/webhook", review)
    wait_for(lambda: "allocation annotation is corrupt" in service.worker.log(), 30, "the worker's warning")
    return service


@pytest.mark.parametrize("process", ["service", "worker"])
def test_no_secret_in_any_log_line(process: str, traffic: Any, kubeconfig: Path) -> None:
    log = (traffic.process if process == "service" else traffic.worker).log()
    assert log.count("\n") > 5, "the process logged (almost) nothing"
    if process == "service":
        assert '"level":"debug"' in log, "Gunicorn did not log at debug level"
    assert secrets_in(log, yaml.safe_load(kubeconfig.read_text())) == []


def test_the_secret_bearing_message_was_redacted(traffic: Any) -> None:
    warnings = [
        line for line in traffic.worker.log().splitlines() if "allocation annotation is corrupt" in line
    ]
    assert warnings and all("[redacted]" in line for line in warnings)
