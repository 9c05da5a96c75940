"""The fuzzer's bad inputs: seeded generators for /filter, /bind, /webhook and the GET endpoints.

`Inputs(seed, nodes, max_body).next()` returns the next `Case` (method, path, body, Content-Type and a
category label); the same seed gives the same sequence of cases, byte for byte. Every case starts from a
realistic template (an ExtenderArgs, an ExtenderBindingArgs, an AdmissionReview around a GPU pod) and
breaks it in one way: malformed or truncated JSON, a wrong type at some path, a missing field, an absurd
but well-typed value, odd unicode, a body over the size cap, a recursion bomb, an odd pod for the webhook,
a wrong Content-Type, or an odd GET. Plain `random.Random` rather than hypothesis: a fixed sequence of
requests is what a report and a regression test need.
"""

from __future__ import annotations

import base64
import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from sim.fuzz.jsonpath import delete_at, get_at, json_paths, set_at
from sim.fuzz.raw import raw_request

GPU, MEM, CORES = "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"
DEVICE_RESOURCES = (GPU, MEM, CORES, "nvidia.com/gpumem-percentage", "nvidia.com/priority")
HINTS = (
    "nvidia.com/use-gputype",
    "nvidia.com/nouse-gputype",
    "nvidia.com/use-gpuuuid",
    "nvidia.com/nouse-gpuuuid",
    "nvidia.com/vgpu-mode",
    "nvidia.com/numa-bind",
    "hami.io/gpu-scheduler-policy",
    "hami.io/node-scheduler-policy",
)
FORGED = (
    "hami.io/vgpu-node",
    "hami.io/vgpu-devices-allocated",
    "hami.io/vgpu-devices-to-allocate",
    "hami.io/vgpu-time",
    "hami.io/bind-phase",
    "hami.io/bind-time",
)
ABSURD: tuple[Any, ...] = (
    "-1", "-1024", "0", "1e400", "1e-400", "1e1000000", "0x10", "NaN", "nan", "Inf", "-Inf", "1e12",
    "99999999999999999999Gi", "99999999999999999999", "1000000000000", "1.5", "0.5", "1m", "100Ei",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809", "", " ", "1 ", "+5", "5e", "e5",
    "١٢", "１", "5\u0000", "9" * 5000, "0." + "0" * 5000 + "1", "1" + "0" * 4400 + "Gi",
    -5, -1, 10**12, 10**9, 1e9, 1e308, -0.0, 2**64, 2**63, 1.5, True, False, None, [], {}, [1], {"a": 1},
)  # fmt: skip
ODD_TEXT = (
    "", " ", "\u0000", "a\u0000b", "\u202egpu-node-01", "\u200b", "\ufeff", "💥" * 20, "é" * 3, "a" * 10_000,
    "../../etc/passwd", "a/b", "a?x=y&z", "%2F..%2F", "a#b", "UPPER", "-", ".", "..", "default/x",
    "\\x00", "\n", "\r\nX-Injected: 1", "\ud7ff\ue000", "日本語", "null", "true", "0", "${jndi:x}",
)  # fmt: skip
BOMB = "@@recursion-bomb@@"
WRONG_TYPES: tuple[Any, ...] = ("", "x", 0, -1, 1.5, True, None, [], [None], {}, {"a": [1]}, 10**30, "[]")


@dataclass(frozen=True)
class Case:
    """One request: what the fuzzer sends and which category of bad input it is."""

    kind: str
    method: str
    path: str
    body: bytes | None = None
    content_type: str | None = "application/json"

    def describe(self, limit: int = 300) -> str:
        body = "" if self.body is None else self.body[:limit].decode("utf-8", "backslashreplace")
        more = "" if self.body is None or len(self.body) <= limit else f"...(+{len(self.body) - limit} bytes)"
        return f"{self.method} {self.path[:120]} [{self.content_type}] {body}{more}"


def _dumps(value: Any) -> bytes:
    """JSON with the Python-only escapes (lone surrogates) written as \\u escapes, never rejected here."""
    try:
        return orjson.dumps(value)
    except TypeError:
        import json

        return json.dumps(value, ensure_ascii=True).encode()


class Inputs:
    """The seeded sequence of bad inputs; `nodes` are the node names a realistic request would carry."""

    def __init__(self, seed: int, nodes: list[str], max_body: int) -> None:
        self.rng = random.Random(seed)
        self.nodes = nodes
        self.max_body = max_body
        self.count = 0
        self.generators: list[tuple[str, int, Callable[[], Case]]] = [
            ("malformed-json", 12, self.malformed),
            ("wrong-type", 16, self.wrong_type),
            ("missing-field", 8, self.missing_field),
            ("absurd-value", 16, self.absurd_value),
            ("unicode", 8, self.unicode),
            ("huge-body", 3, self.huge),
            ("deep-nesting", 5, self.deep),
            ("odd-review", 12, self.odd_review),
            ("content-type", 6, self.content_type),
            ("get-endpoints", 5, self.get),
            ("given-nodes", 5, self.given_nodes),
            ("raw-http", 4, self.raw),
        ]

    # --- templates ---------------------------------------------------------------------------------------

    def pod(self, containers: int = 1) -> dict[str, Any]:
        rng = self.rng
        self.count += 1
        limits = {GPU: str(rng.randint(1, 2)), MEM: str(rng.choice([1000, 2000, 4096])), CORES: "20"}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"fuzz-{self.count}",
                "namespace": "fuzz-quota" if rng.random() < 0.2 else "default",  # absurd quotas there
                "uid": f"00000000-0000-4000-8000-{self.count:012d}",
                "annotations": {"nvidia.com/use-gputype": "A100"} if rng.random() < 0.2 else {},
                "labels": {"app": "fuzz"},
            },
            "spec": {
                "schedulerName": "hami-scheduler",
                "containers": [
                    {"name": f"c{i}", "image": "cuda", "resources": {"limits": dict(limits)}}
                    for i in range(containers)
                ],
            },
            "status": {"phase": "Pending"},
        }

    def filter_args(self, pod: Any = None) -> dict[str, Any]:
        names = self.rng.sample(self.nodes, k=self.rng.randint(1, len(self.nodes)))
        return {"Pod": self.pod() if pod is None else pod, "Nodes": None, "NodeNames": names}

    def bind_args(self) -> dict[str, Any]:
        return {
            "PodName": f"fuzz-{self.rng.randint(1, 50)}",
            "PodNamespace": "default",
            "PodUID": "00000000-0000-4000-8000-000000000001",
            "Node": self.rng.choice(self.nodes),
        }

    def review(self, pod: Any, operation: str = "CREATE", old: Any = None, user: str = "") -> dict[str, Any]:
        request: dict[str, Any] = {
            "uid": f"review-{self.count}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": user or "system:serviceaccount:default:fuzz"},
            "object": pod,
        }
        if old is not None:
            request["oldObject"] = old
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}

    def template(self) -> tuple[str, dict[str, Any]]:
        path = self.rng.choice(["/filter", "/filter", "/bind", "/webhook", "/webhook"])
        if path == "/filter":
            return path, self.filter_args()
        if path == "/bind":
            return path, self.bind_args()
        return path, self.review(self.pod())

    # --- the categories ----------------------------------------------------------------------------------

    def next(self) -> Case:
        total = sum(weight for _, weight, _ in self.generators)
        pick = self.rng.uniform(0, total)
        for _, weight, generate in self.generators:
            pick -= weight
            if pick <= 0:
                return generate()
        return self.generators[-1][2]()

    def malformed(self) -> Case:
        rng = self.rng
        path, body = self.template()
        raw = orjson.dumps(body)
        variants: list[Callable[[], bytes]] = [
            lambda: raw[: rng.randint(0, max(0, len(raw) - 1))],
            lambda: raw + b"garbage",
            lambda: raw.replace(b'"', b"'", rng.randint(1, 5)),
            lambda: b"\xef\xbb\xbf" + raw,
            lambda: raw.replace(b":", b"=", 1),
            lambda: bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200))),
            lambda: raw[:10] + b"\xff\xfe\xc3\x28" + raw[10:],
            lambda: rng.choice([b"NaN", b"Infinity", b"-Infinity", b"1e400", b"[1,]", b"{,}", b"// c\n{}"]),
            lambda: rng.choice([b"null", b"true", b"0", b'""', b"[]", b"{}", b" ", b"\n\n"]),
            lambda: b'{"Pod": ' + b"1" * rng.randint(20, 400) + b"}",
            lambda: b'{"a":"\\ud800"}',
        ]
        return Case("malformed-json", "POST", path, rng.choice(variants)())

    def wrong_type(self) -> Case:
        path, body = self.template()
        target = self.rng.choice(json_paths(body))
        set_at(body, target, copy.deepcopy(self.rng.choice(WRONG_TYPES)))
        return Case("wrong-type", "POST", path, _dumps(body))

    def missing_field(self) -> Case:
        path, body = self.template()
        for _ in range(self.rng.randint(1, 3)):
            paths = json_paths(body)
            if paths:
                delete_at(body, self.rng.choice(paths))
        return Case("missing-field", "POST", path, _dumps(body))

    def absurd_value(self) -> Case:
        rng = self.rng
        pod = self.pod(containers=rng.choice([1, 1, 2]))
        container = rng.choice(pod["spec"]["containers"])
        for _ in range(rng.randint(1, 3)):
            section = rng.choice(["limits", "limits", "requests"])
            resources = container["resources"].setdefault(section, {})
            resources[rng.choice(DEVICE_RESOURCES)] = rng.choice(ABSURD)
        if rng.random() < 0.4:
            pod["metadata"]["annotations"][rng.choice(HINTS)] = rng.choice(
                [*ODD_TEXT, "GPU-x,GPU-y", "binpack"]
            )
        if rng.random() < 0.2:
            pod["metadata"]["name"] = "n" * 10_000
        if rng.random() < 0.5:
            return Case("absurd-value", "POST", "/webhook", _dumps(self.review(pod)))
        body = self.filter_args(pod)
        if rng.random() < 0.2:
            body["NodeNames"] = [*body["NodeNames"], "x" * 10_000, *(["dup"] * 50)]
        return Case("absurd-value", "POST", "/filter", _dumps(body))

    def unicode(self) -> Case:
        rng = self.rng
        path, body = self.template()
        strings = [p for p in json_paths(body) if isinstance(get_at(body, p), str)]
        for target in rng.sample(strings, k=min(len(strings), rng.randint(1, 3))):
            set_at(body, target, rng.choice(ODD_TEXT) + rng.choice(["", "\ud800", "\udfff", "\u202e"]))
        if rng.random() < 0.3 and isinstance(body.get("Pod"), dict):
            body["Pod"]["metadata"]["annotations"][rng.choice(ODD_TEXT)] = rng.choice(ODD_TEXT)
        return Case("unicode", "POST", path, _dumps(body))

    def huge(self) -> Case:
        rng = self.rng
        path, body = self.template()
        size = self.max_body + rng.choice([1, 100, self.max_body])
        if rng.random() < 0.5:
            padding = {"pad": "x" * size}
            body["extra"] = padding
            raw = _dumps(body)
        else:
            raw = b"[" + b"1," * (size // 2) + b"1]"
        return Case("huge-body", "POST", path, raw)

    def deep(self) -> Case:
        """A recursion bomb of lists or objects, at the root or in place of some object or list."""
        rng = self.rng
        depth = rng.choice([64, 200, 500, 900, 1000, 1023, 1030, 5000])
        opener, closer = (b"[", b"]") if rng.random() < 0.5 else (b'{"a":', b"}")
        bomb = opener * depth + b"1" + closer * depth
        path, body = self.template()
        targets = [p for p in json_paths(body) if isinstance(get_at(body, p), dict | list)]
        if not targets or rng.random() < 0.2:
            return Case("deep-nesting", "POST", path, bomb)
        set_at(body, rng.choice(targets), BOMB)
        return Case("deep-nesting", "POST", path, _dumps(body).replace(orjson.dumps(BOMB), bomb, 1))

    def odd_review(self) -> Case:
        rng = self.rng
        pod = self.pod(containers=rng.choice([1, 2]))
        spec, meta = pod["spec"], pod["metadata"]
        variant = rng.randrange(10)
        if variant == 0:
            spec["containers"] = []
        elif variant == 1:
            spec["containers"][0]["securityContext"] = {"privileged": rng.choice([True, "true", 1])}
        elif variant == 2:
            spec["nodeName"] = rng.choice([*self.nodes, *ODD_TEXT])
        elif variant == 3:
            spec["initContainers"], spec["containers"] = spec["containers"], []
        elif variant == 4:
            spec["containers"] = [copy.deepcopy(spec["containers"][0]) for _ in range(200)]
        elif variant == 5:
            spec["containers"].append(copy.deepcopy(spec["containers"][0]))  # duplicate names
        elif variant == 6:
            meta["annotations"] = {k: rng.choice(["GPU-0,NVIDIA,99999,100:;", *ODD_TEXT[:5]]) for k in FORGED}
            spec["schedulerName"] = rng.choice(["default-scheduler", "other", "", "hami-scheduler"])
        elif variant == 7:
            old = copy.deepcopy(pod)
            pod["metadata"]["annotations"][rng.choice(FORGED)] = rng.choice(ODD_TEXT)
            user = rng.choice(["", "system:serviceaccount:kube-system:hami-scheduler", "mallory"])
            body = self.review(pod, "UPDATE", rng.choice([old, None, [], "x"]), user)
            return Case("odd-review", "POST", "/webhook", _dumps(body))
        elif variant == 8:
            body = self.review(pod, rng.choice(["DELETE", "CONNECT", "", "create", "PATCH", "\u0000"]))
            body["apiVersion"] = rng.choice(["admission.k8s.io/v1beta1", "admission.k8s.io/v2", "", "v1"])
            body["kind"] = rng.choice(["AdmissionReview", "Pod", ""])
            return Case("odd-review", "POST", "/webhook", _dumps(body))
        else:
            pod["kind"] = rng.choice(["Deployment", "pod", 5])
            spec["runtimeClassName"] = rng.choice(ODD_TEXT)
        return Case("odd-review", "POST", "/webhook", _dumps(self.review(pod)))

    def content_type(self) -> Case:
        rng = self.rng
        path, body = self.template()
        kind = rng.choice(
            [
                None,
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "application/json; charset=utf-16",
                "APPLICATION/JSON",
                "application/yaml",
                "application/json" + ";x" * 500,
                "*/*",
            ]
        )
        raw = _dumps(body)
        if kind == "application/x-www-form-urlencoded" and rng.random() < 0.5:
            raw = b"a=1&" * 1000
        return Case("content-type", "POST", path, raw, kind)

    def get(self) -> Case:
        rng = self.rng
        node = base64.urlsafe_b64encode(rng.randbytes(rng.randint(0, 40))).decode()
        choice = rng.choice(
            [
                ("GET", "/healthz"),
                ("GET", "/readyz"),
                ("GET", "/metrics"),
                ("GET", "/debug/state"),
                ("GET", f"/debug/state?node={rng.choice(self.nodes)}"),
                ("GET", f"/debug/state?node={node}%00%ff&node=x"),
                ("GET", "/debug/state?node=" + "x" * 3000),
                ("GET", "/filter"),
                ("PUT", "/bind"),
                ("DELETE", "/webhook"),
                ("OPTIONS", "/filter"),
                ("HEAD", "/metrics"),
                ("GET", "/nope/%ff/../.."),
                ("POST", "/healthz"),
            ]
        )
        return Case("get-endpoints", choice[0], choice[1], None, None)

    def given_nodes(self) -> Case:
        """The Nodes path (nodeCacheCapable: false): node objects in the body, some corrupt."""
        from sim.fuzz.plant import corrupt_registers

        rng = self.rng
        items = []
        for name in rng.sample(self.nodes, k=min(3, len(self.nodes))):
            register = rng.choice(corrupt_registers(rng))
            items.append(
                {"metadata": {"name": name, "annotations": {"hami.io/node-nvidia-register": register}}}
            )
        if rng.random() < 0.3:
            items.append(rng.choice(WRONG_TYPES))
        body = {"Pod": self.pod(), "Nodes": {"Items": items}, "NodeNames": None}
        return Case("given-nodes", "POST", "/filter", _dumps(body))

    def raw(self) -> Case:
        """Bytes on a socket (method RAW): broken framing, truncated bodies, odd request lines, headers."""
        path, body = self.template()
        return Case("raw-http", "RAW", path, raw_request(self.rng, path, _dumps(body), self.max_body), None)
