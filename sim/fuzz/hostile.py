"""The fuzzer's hostile verbs (issue 11): valid-looking /filter and /bind bodies that name real pods the
caller has no business with, and well-formed bodies over the per-route caps.

After the seeded bad inputs, `Hostile.setup` places pods of its own: two of ours filtered, bound and
allocated through the service, one of ours left pending (never filtered), and two of other schedulers (one
asking for a GPU, one not). `Hostile.run` then sends `rounds` x every kind, one request at a time:

| kind | body |
|---|---|
| `filter-bound`, `filter-no-uid` | a bound pod with its UID / without one |
| `filter-wrong-uid`, `filter-foreign` | the pending pod with another UID / the foreign GPU pod with its UID |
| `bind-bound-elsewhere`, `bind-bound-same-node` | a bound pod and its UID, to another node / its own |
| `bind-no-uid`, `bind-wrong-uid` | a bound pod without its UID / the pending pod with another |
| `bind-foreign`, `bind-foreign-cpu` | a foreign pod (GPU / none) and its UID, to a node |
| `bind-unfiltered` | our pending pod and its UID, to a node it was never filtered onto |
| `over-cap-bind`, `over-cap-filter` | a valid body padded with nested lists past the route's cap |
| `dense-filter` | a valid body under the cap holding more than 200,000 JSON lists |

Each answer goes through the fuzzer's own judge (no 5xx, no internal or unclear error) and must also be
a refusal: an `Error`, 400 or 413 (`bind-bound-same-node`: the no-op answer of a retried bind). Then
nothing may have changed: the bound pods' binding and allocation annotations, their nodes' locks, the
foreign pods unbound, the pending pod without a decision. The Gunicorn workers' peak resident memory
(VmHWM) is read before and after the phase: growing by more than `MAX_GROWTH` is a finding.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from app.routes.common import MAX_CONTAINERS
from config.settings import SMALL_BODY_BYTES
from sim.chaos.forger import answer_word, binding_of, gpu_pod
from sim.fuzz.gen import Case
from sim.kit import podutil
from sim.kit.kube import Kube, KubeError, pod_path
from sim.workload.report import LOCK

Obj = dict[str, Any]
MIB = 1024 * 1024
MAX_GROWTH = 8 * MIB  # "a few MiB": a refused body is read and dropped in 64 KiB chunks, never parsed
BIND_CAP = SMALL_BODY_BYTES  # /bind's cap (HttpSettings.body_cap)
DENSE_LISTS = MAX_CONTAINERS + 50_000  # more than the objects and lists a body may hold
NAMESPACE = "default"
FUZZ = {"nvidia.com/nouse-gputype": "FUZZ"}  # keeps our pods off the planted nodes' FUZZ-typed devices
KINDS = (
    "filter-bound",
    "filter-no-uid",
    "filter-wrong-uid",
    "filter-foreign",
    "bind-bound-elsewhere",
    "bind-bound-same-node",
    "bind-no-uid",
    "bind-wrong-uid",
    "bind-foreign",
    "bind-foreign-cpu",
    "bind-unfiltered",
    "over-cap-bind",
    "over-cap-filter",
    "dense-filter",
)


def peaks(pids: set[int]) -> dict[int, int]:
    """VmHWM (peak resident memory, bytes) of each live PID."""
    found = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    found[pid] = int(line.split()[1]) * 1024
    return found


class Hostile:
    """`send(case)` is the fuzzer's (judged and timed there): the response, or None without one."""

    def __init__(self, kube: Kube, send: Callable[[Case], Any], nodes: list[str], max_body: int) -> None:
        self.kube = kube
        self.send = send
        self.nodes = nodes
        self.max_body = max_body
        self.bound: list[Obj] = []
        self.pending: Obj | None = None
        self.foreign: list[Obj] = []
        self.answers: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
        self.accepted: list[str] = []
        self.setup_problems: list[str] = []

    # --- setup ----------------------------------------------------------------------------------------------

    def setup(self, place: Callable[[Obj], str]) -> None:
        """Our two bound pods (`place` filters and binds one through the service: its node, "" if it
        failed), the pending one and the two foreign ones; waits until the bound ones are allocated."""
        for index in range(6):
            if len(self.bound) == 2:
                break
            pod = self.kube.create(pod_path(NAMESPACE), gpu_pod(f"hostile-bound-{index}", annotations=FUZZ))
            if place(pod):
                self.bound.append(pod)
            else:
                self.setup_problems.append(f"{podutil.name(pod)} could not be placed")
        self.pending = self.kube.create(pod_path(NAMESPACE), gpu_pod("hostile-pending", annotations=FUZZ))
        for name, gpu in (("hostile-foreign", True), ("hostile-foreign-cpu", False)):
            self.foreign.append(
                self.kube.create(pod_path(NAMESPACE), gpu_pod(name, "default-scheduler", gpu))
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.bound = [self._read(p) or p for p in self.bound]
            if all(podutil.annotations_of(p).get("hami.io/bind-phase") == "success" for p in self.bound):
                break
            time.sleep(0.25)
        else:
            self.setup_problems.append("the bound pods were not allocated within 60 s")

    def _read(self, pod: Obj) -> Obj | None:
        try:
            return self.kube.get(pod_path(podutil.namespace(pod), podutil.name(pod)))
        except KubeError:
            return None

    # --- the cases ------------------------------------------------------------------------------------------

    def _filter(self, pod: Obj, uid: str | None) -> bytes:
        meta = {k: v for k, v in pod["metadata"].items() if k != "uid"}
        if uid:
            meta["uid"] = uid
        forged = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod["spec"]}
        return orjson.dumps({"Pod": forged, "Nodes": None, "NodeNames": self.nodes})

    def _bind(self, pod: Obj, uid: str, node: str) -> bytes:
        body = {"PodName": podutil.name(pod), "PodNamespace": NAMESPACE, "PodUID": uid, "Node": node}
        return orjson.dumps(body)

    def case(self, kind: str, turn: int) -> Case | None:
        """The request of `kind` (None when its pod could not be set up)."""
        made = self._body(kind, turn)
        return None if made is None else Case(f"hostile-{kind}", "POST", made[0], made[1])

    def _body(self, kind: str, turn: int) -> tuple[str, bytes] | None:
        bound = self.bound[turn % len(self.bound)] if self.bound else None
        foreign, cpu = ([*self.foreign, None, None])[:2]
        pending, other = self.pending, str(uuid.UUID(int=turn + 1))
        if kind == "over-cap-bind":
            return "/bind", self._padded(self._bind_args(), BIND_CAP + 1024)
        if kind.startswith(("filter-bound", "filter-no-uid", "bind-bound", "bind-no-uid")):
            if bound is None:
                return None
            uid, node = podutil.uid(bound), podutil.node_name(bound)
            elsewhere = next((n for n in self.nodes if n != node), self.nodes[0])
            return {
                "filter-bound": ("/filter", self._filter(bound, uid)),
                "filter-no-uid": ("/filter", self._filter(bound, None)),
                "bind-bound-elsewhere": ("/bind", self._bind(bound, uid, elsewhere)),
                "bind-bound-same-node": ("/bind", self._bind(bound, uid, node)),
                "bind-no-uid": ("/bind", self._bind(bound, "", elsewhere)),
            }[kind]
        if kind in ("filter-foreign", "bind-foreign", "bind-foreign-cpu"):
            pod = cpu if kind == "bind-foreign-cpu" else foreign
            if pod is None:
                return None
            if kind == "filter-foreign":
                return "/filter", self._filter(pod, podutil.uid(pod))
            return "/bind", self._bind(pod, podutil.uid(pod), self.nodes[0])
        if pending is None:
            return None
        uid, node = podutil.uid(pending), self.nodes[turn % len(self.nodes)]
        if kind == "filter-wrong-uid":
            return "/filter", self._filter(pending, other)
        if kind in ("bind-wrong-uid", "bind-unfiltered"):
            return "/bind", self._bind(pending, other if kind == "bind-wrong-uid" else uid, node)
        if kind == "over-cap-filter":
            return "/filter", self._padded(orjson.loads(self._filter(pending, uid)), self.max_body + 1024)
        return "/filter", self._dense(pending)

    def _bind_args(self) -> Obj:
        pod = self.pending or gpu_pod("hostile-none")
        return {
            "PodName": podutil.name(pod),
            "PodNamespace": NAMESPACE,
            "PodUID": podutil.uid(pod),
            "Node": self.nodes[0],
        }

    @staticmethod
    def _padded(body: Obj, size: int) -> bytes:
        """`body` with an extra field of nested empty lists, `size` bytes in all (valid JSON)."""
        raw = orjson.dumps({**body, "extra": []})
        lists = max(1, (size - len(raw)) // 3)
        return raw.replace(b'"extra":[]', b'"extra":[' + b"[]," * (lists - 1) + b"[]]", 1)

    def _dense(self, pod: Obj) -> bytes:
        """A filter body under the cap whose pod carries more than 200,000 (empty) lists."""
        body = orjson.loads(self._filter(pod, podutil.uid(pod)))
        raw = orjson.dumps({**body, "extra": []})
        return raw.replace(b'"extra":[]', b'"extra":[' + b"[]," * (DENSE_LISTS - 1) + b"[]]", 1)

    # --- judging --------------------------------------------------------------------------------------------

    def state(self) -> tuple[Any, ...]:
        """What no hostile request may change: the bound pods' bindings and nodes' locks, the foreign pods'
        nodes, the pending pod's decision."""
        bound = tuple(binding_of(self._read(p)) for p in self.bound)
        locks = []
        for pod in self.bound:
            with contextlib.suppress(KubeError):
                node = self.kube.get(f"/api/v1/nodes/{podutil.node_name(pod)}")
                lock = podutil.annotations_of(node).get(LOCK, "")
                locks.append(podutil.name(pod) in lock)
        foreign = tuple(podutil.node_name(self._read(p) or {}) for p in self.foreign)
        pending = self._read(self.pending) if self.pending else None
        decided = podutil.annotations_of(pending or {}).get("hami.io/vgpu-node")
        return bound, tuple(locks), foreign, decided

    def judge(self, kind: str, response: Any) -> str:
        """refused (Error, 400 or 413), no-op, or accepted; a transport failure is the fuzzer's finding."""
        if response is None:
            return "no answer"
        word = answer_word(int(response.status), response.data)
        if word != "ok":
            return word
        return "no-op" if kind == "bind-bound-same-node" else "accepted"

    def run(self, rounds: int) -> None:
        before = self.state()
        for turn in range(rounds):
            for kind in KINDS:
                case = self.case(kind, turn)
                if case is None:
                    continue
                answer = self.judge(kind, self.send(case))
                after = self.state()
                if after != before:
                    answer = "accepted"
                    self.accepted.append(f"{kind}: changed {before} -> {after}")
                    before = after
                elif answer == "accepted" and len(self.accepted) < 10:
                    self.accepted.append(f"{kind}: answered without an Error ({case.describe(200)})")
                self.answers[kind][answer] += 1

    def summary(self, growth: int) -> dict[str, Any]:
        return {
            "hostile_requests": sum(sum(c.values()) for c in self.answers.values()),
            "hostile_by_kind": {k: dict(sorted(c.items())) for k, c in self.answers.items()},
            "hostile_accepted": sum(c["accepted"] for c in self.answers.values()),
            "hostile_accepted_examples": self.accepted[:10],
            "hostile_setup_problems": self.setup_problems,
            "hostile_memory_growth_mib": round(growth / MIB, 2),
            "hostile_memory_findings": int(growth > MAX_GROWTH),
        }
