"""The kubeconfig the emulator hands out: what kubectl and ``kubernetes.config.load_kube_config`` read.

One cluster (the emulator's URL; its CA when serving TLS, else ``insecure-skip-tls-verify``), one user with a
static bearer token (the emulator accepts any token or none), one context, written atomically so a parent
process polling for the file never reads half of it.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml

NAME = "sim"


def kubeconfig(url: str, token: str, ca_pem: bytes | None) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    else:
        cluster["insecure-skip-tls-verify"] = True
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": NAME, "cluster": cluster}],
        "users": [{"name": NAME, "user": {"token": token}}],
        "contexts": [{"name": NAME, "context": {"cluster": NAME, "user": NAME, "namespace": "default"}}],
        "current-context": NAME,
        "preferences": {},
    }


def write(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(yaml.safe_dump(config, sort_keys=False))
    os.replace(partial, path)
    return path
