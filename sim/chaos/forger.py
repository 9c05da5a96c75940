"""The chaos storm's forger (issue 11): someone in the cluster calling our scheduler verbs as if they were
kube-scheduler, concurrently with the real workload.

Each forged call takes a real pod of the moment (read through the emulator's fault-free hooks) and one
shape of forgery:

| kind | caller (where) | names |
|---|---|---|
| `filter-no-uid`, `bind-no-uid` | kube-scheduler's certificate (extender) | a running pod, no UID |
| `filter-wrong-uid`, `bind-wrong-uid` | same | a bound or pending pod, another UID |
| `filter-bound` | same | a bound, allocated pod with its own UID |
| `bind-bound-elsewhere`, `bind-bound-same-node` | same | that, to another node / its own |
| `filter-foreign`, `bind-foreign` | same | a pod of another scheduler (the forger makes a few) |
| `public-filter`, `public-bind` | nobody (the webhook port, the Service's) | a pending pod and its UID |
| `no-cert-bind` | nobody (the extender port, no certificate) | same: a bind that would succeed |
| `rogue-cert-bind` | a certificate of another CA (extender) | same |

The first group holds a certificate kube-scheduler's CA signed (it leaked, or another process of the pod
calls 127.0.0.1): the verbs themselves must refuse (app/filter/usecase.py, app/bind/usecase.py). The last
group has no identity: the transport must refuse (404 on the public port, the TLS handshake on the
extender's).

Every answer is recorded by kind: `refused: <Error, names blanked>`, `404`, `tls-refused`, `no-op` (a
re-bind of a pod bound to that node is answered without writing anything, as a retried bind must be; a
filter of a pod that asks for no device passes every node and writes nothing, as HAMi's does; a filter
naming a pod with another UID that the deferred write answers — its PATCH carries that UID as a
precondition, so the API server writes nothing, tests/integration/test_deferred_write.py — unless it
changed a bound pod's binding or a node's lock: a pending pod's annotations may change meanwhile by the
storm's own filter of it),
`unreachable` (the replica was down) — or `accepted`. A call is accepted when a forgery got an answer
that did not refuse it (without an identity: any answer of the verbs at all), or changed something: a
bound pod's binding or allocation annotations, its node's lock now naming it, a foreign pod bound. The
verdict fails on any accepted call.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any

import orjson
import urllib3

from sim.cluster.replicas import Replica, Replicas
from sim.emulator.testing import EmulatorHandle
from sim.kit import podutil
from sim.kit.kube import Kube, KubeError, pod_path, pool_manager, warnings_quiet
from sim.workload.report import LOCK

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
FORGER_LABEL = "sim.hami.io/forger"
BINDING_KEYS = (  # what a forged call must never change on a bound pod
    "hami.io/vgpu-node",
    "hami.io/vgpu-devices-allocated",
    "hami.io/vgpu-time",
    "hami.io/bind-phase",
    "hami.io/bind-time",
)
KINDS = (
    "filter-no-uid",
    "filter-wrong-uid",
    "filter-bound",
    "filter-foreign",
    "bind-no-uid",
    "bind-wrong-uid",
    "bind-bound-elsewhere",
    "bind-bound-same-node",
    "bind-foreign",
    "public-filter",
    "public-bind",
    "no-cert-bind",
    "rogue-cert-bind",
)
EXPECTED = {  # the answer each kind gets when nothing else (an API fault, a follower, a kill) came first
    "filter-no-uid": "carries no UID",
    # behind kube-scheduler's certificate /filter no longer reads the pod (issue 20): a bound pod is refused
    # from the request's own copy, a pending one is answered but its UID-preconditioned write writes nothing
    "filter-wrong-uid": ("has UID", "is already bound to node", "no-op"),
    "filter-bound": "is already bound to node",
    "filter-foreign": "is not scheduled by",  # or no-op for its pod that asks for no device
    "bind-no-uid": "carries no PodUID",
    "bind-wrong-uid": "has UID",
    "bind-bound-elsewhere": "is already bound to node",
    "bind-bound-same-node": "no-op",
    "bind-foreign": "is not scheduled by",
    "public-filter": "404",
    "public-bind": "404",
    "no-cert-bind": "tls-refused",
    "rogue-cert-bind": "tls-refused",
}
WRITE_SETTLE = 0.5  # seconds a deferred allocation write is given to land before the pod is compared


def _as_expected(kind: str, answer: str) -> bool:
    expected = EXPECTED[kind]
    return any(e in answer for e in ((expected,) if isinstance(expected, str) else expected))


FOREIGN = (("default-scheduler", True), ("other-scheduler", True), ("default-scheduler", False))
REFRESH = 3.0  # seconds between reads of the pods the forgeries name
EXAMPLES = 10


def gpu_pod(name: str, scheduler: str = "hami-scheduler", gpu: bool = True, **metadata: Any) -> Obj:
    """A one-container pod in `default` asking for a slice of one GPU (or, without `gpu`, for CPU only)."""
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024", "nvidia.com/gpucores": "10"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", **metadata},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "main", "image": "cuda", "resources": {"limits": limits if gpu else {"cpu": "100m"}}}
            ],
        },
    }


def answer_word(status: int, data: bytes) -> str:
    """An extender answer as a word: `ok`, `refused: <its Error, names blanked>`, `404`, `HTTP n`."""
    if status == 404:
        return "404"
    if status != 200:
        return f"HTTP {status}"
    try:
        answer = orjson.loads(data)
    except orjson.JSONDecodeError:
        return "not JSON"
    error = str(answer.get("Error") or "") if isinstance(answer, dict) else ""
    return f"refused: {podutil.message_shape(error)}" if error else "ok"


def binding_of(pod: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """What a forged call must not change on a pod: its UID, node and HAMi's binding annotations."""
    if pod is None:
        return ()
    notes = podutil.annotations_of(pod)
    return (podutil.uid(pod), podutil.node_name(pod), *(notes.get(k) for k in BINDING_KEYS))


class Forger:
    """Sends `count` forged calls, about `rate` per second, from its own thread until stopped."""

    def __init__(
        self,
        replicas: Replicas,
        hooks: EmulatorHandle,
        kube: Kube,
        selector: str,
        *,
        seed: int,
        count: int,
        rate: float,
    ) -> None:
        self.replicas = replicas
        self.hooks = hooks
        self.kube = kube
        self.selector = selector
        self.rng = random.Random(f"forger-{seed}")
        self.count = count
        self.rate = rate
        pki = replicas.pki
        ca = pki.server_ca_pem
        self._as_scheduler = pool_manager(
            4, ca, timeout=30.0, client_cert=(str(pki.client[0]), str(pki.client[1]))
        )
        self._anonymous = pool_manager(4, ca, timeout=30.0)
        self._rogue = pool_manager(4, ca, timeout=30.0, client_cert=(str(pki.rogue[0]), str(pki.rogue[1])))
        self.answers: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
        self.accepted: list[str] = []
        self.sent = 0
        self.stop = threading.Event()
        self._pods: list[Obj] = []
        self._nodes: list[str] = []
        self._foreign: list[Obj] = []
        self._read_at = 0.0
        self._thread = threading.Thread(target=self._run, name="chaos-forger", daemon=True)

    def start(self) -> Forger:
        if self.count > 0:
            self._thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        if self._thread.is_alive():
            self._thread.join(60)
        for pool in (self._as_scheduler, self._anonymous, self._rogue):
            pool.clear()

    def summary(self) -> dict[str, Any]:
        by_kind = {kind: dict(sorted(c.items())) for kind, c in self.answers.items() if c}
        overall: Counter[str] = Counter()
        for counts in self.answers.values():
            overall.update(counts)
        return {
            "forged_calls": self.sent,
            "forged_by_kind": by_kind,
            "forged_answers": dict(overall.most_common()),
            "forged_accepted": sum(c["accepted"] for c in self.answers.values()),
            "forged_refused_as_expected": {
                kind: sum(n for answer, n in self.answers[kind].items() if _as_expected(kind, answer))
                for kind in KINDS
            },
            "forged_accepted_examples": self.accepted[:EXAMPLES],
        }

    # --- the thread -----------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._create_foreign()
            while self.sent < self.count and not self.stop.wait(self.rng.expovariate(self.rate)):
                kind = self.rng.choice(KINDS)
                try:
                    self._forge(kind)
                except Exception:  # the forger's own failure must not end the storm; the count shows it
                    logger.exception("forged call %s failed", kind)
                    self._record(kind, "forger-error", "")
        finally:
            self._delete_foreign()

    def _create_foreign(self) -> None:
        for index, (scheduler, gpu) in enumerate(FOREIGN):
            try:
                self._foreign.append(
                    self.kube.create(
                        pod_path("default"),
                        gpu_pod(f"forger-foreign-{index}", scheduler, gpu, labels={FORGER_LABEL: "true"}),
                    )
                )
            except KubeError as exc:
                logger.warning("creating a foreign pod failed: %s", exc)

    def _delete_foreign(self) -> None:
        for pod in self._foreign:
            try:
                self.kube.delete(pod_path(podutil.namespace(pod), podutil.name(pod)))
            except KubeError:
                continue

    def _refresh(self) -> None:
        if time.monotonic() - self._read_at < REFRESH and self._pods:
            return
        self._pods = self.hooks.list("pods", label_selector=self.selector)
        self._nodes = sorted(podutil.name(n) for n in self.hooks.list("nodes"))
        self._read_at = time.monotonic()

    def _victim(self, bound: bool) -> Obj | None:
        """A bound and allocated pod of ours (bind-phase success), or a pending one not yet filtered."""
        self._refresh()
        if bound:
            found = [
                p
                for p in self._pods
                if podutil.node_name(p) and podutil.annotations_of(p).get("hami.io/bind-phase") == "success"
            ]
        else:
            found = [
                p
                for p in self._pods
                if not podutil.node_name(p) and podutil.REJECTED not in podutil.annotations_of(p)
            ]
        return self.rng.choice(found) if found else None

    def _replica(self) -> Replica:
        """The Ready replica (where the Service sends a caller) most of the time, else any."""
        ready = self.replicas.ready_ones()
        if ready and self.rng.random() < 0.8:
            return ready[0]
        return self.rng.choice(self.replicas.items)

    def _forge(self, kind: str) -> None:
        verb, _, shape = kind.partition("-")
        anonymous = kind.startswith(("public-", "no-cert-", "rogue-cert-"))
        if anonymous:
            verb = "filter" if kind == "public-filter" else "bind"
        pod: Obj | None
        if anonymous or (shape == "wrong-uid" and self.rng.random() < 0.5):
            pod = self._victim(bound=False)
        elif shape == "foreign":
            pod = self.rng.choice(self._foreign) if self._foreign else None
            pod = self.hooks.get("pods", podutil.name(pod), podutil.namespace(pod)) if pod else None
        else:
            pod = self._victim(bound=True)
        if pod is None or not self._nodes:
            return
        node = podutil.node_name(pod)
        others = [n for n in self._nodes if n != node]
        target_node = node if shape == "bound-same-node" else self.rng.choice(others or self._nodes)
        uid = podutil.uid(pod)
        sent_uid = "" if shape == "no-uid" else str(uuid.uuid4()) if shape == "wrong-uid" else uid
        replica = self._replica()
        before = binding_of(pod)
        lock_before = self._lock_of(node)
        if verb == "filter":
            forged = {k: v for k, v in pod.items() if k != "status"}
            meta = {k: v for k, v in pod["metadata"].items() if k != "uid"}
            if sent_uid:
                meta["uid"] = sent_uid
            body: Obj = {
                "Pod": {**forged, "metadata": meta},
                "Nodes": None,
                "NodeNames": [target_node, *others],
            }
        else:
            body = {
                "PodName": podutil.name(pod),
                "PodNamespace": podutil.namespace(pod),
                "PodUID": sent_uid,
                "Node": target_node,
            }
        answer = self._call(kind, replica, verb, body)
        if verb == "filter" and shape == "wrong-uid" and answer == "ok":
            time.sleep(WRITE_SETTLE)  # a deferred write follows the answer: judge what it wrote
        after = self.hooks.get("pods", podutil.name(pod), podutil.namespace(pod))
        changed = self._changed(shape, before, binding_of(after), node, lock_before, podutil.key(pod))
        refusals = ("404", "tls-refused", "unreachable") if anonymous else ("refused", "unreachable")
        if answer.startswith(refusals):  # without an identity, the verbs must not answer at all
            verdict = "accepted" if changed else answer
        elif (
            answer == "ok" and not changed and (shape == "bound-same-node" or not podutil.gpu_containers(pod))
        ):
            verdict = "no-op"  # a re-bind to its own node, or a filter of a pod asking for no device
        elif answer == "ok" and verb == "filter" and shape == "wrong-uid" and not changed:
            # the deferred write's UID precondition writes nothing; a pending pod may meanwhile be filtered
            # for real (a CI storm judged 5 such pods "accepted" when their own filter wrote them)
            verdict = "no-op"
        else:
            verdict = "accepted"
        detail = f"{kind} {podutil.key(pod)} -> {replica.name}: answer {answer!r}" + (
            f", {changed}" if changed else ""
        )
        self._record(kind, verdict, detail)

    def _lock_of(self, node: str) -> str:
        if not node:
            return ""
        found = self.hooks.get("nodes", node)
        return podutil.annotations_of(found).get(LOCK, "") if found else ""

    def _changed(
        self, shape: str, before: tuple[Any, ...], after: tuple[Any, ...], node: str, lock: str, key: str
    ) -> str:
        """What the call changed that it must not have ("" for nothing): a bound pod's binding or its
        node's lock now naming it; a foreign or pending pod bound."""
        if not after or before[0] != after[0]:
            return ""  # deleted or recreated meanwhile by the storm: nothing to compare
        if shape == "foreign" and after[1]:
            return f"foreign pod bound to {after[1]}"
        if before[1] and before != after:
            return f"binding changed: {before[1:]} -> {after[1:]}"
        if node:
            now = self._lock_of(node)
            if now != lock and key.split("/")[-1] in now:
                return f"node {node} locked for it: {now}"
        return ""

    def _call(self, kind: str, replica: Replica, verb: str, body: Obj) -> str:
        """The answer as a word: ok, refused: <Error shape>, 404, tls-refused, unreachable, or HTTP n."""
        if kind.startswith("public-"):
            pool, url = self._anonymous, f"{replica.url}/{verb}"
        else:
            pool = {"no-cert-bind": self._anonymous, "rogue-cert-bind": self._rogue}.get(
                kind, self._as_scheduler
            )
            url = f"{replica.extender_url}/{verb}"
        try:
            with warnings_quiet():
                response = pool.request(
                    "POST", url, body=orjson.dumps(body), headers={"Content-Type": "application/json"}
                )
        except (urllib3.exceptions.NewConnectionError, urllib3.exceptions.TimeoutError):
            return "unreachable"
        except urllib3.exceptions.HTTPError:
            return "tls-refused" if pool is not self._as_scheduler else "unreachable"
        return answer_word(response.status, response.data)

    def _record(self, kind: str, verdict: str, detail: str) -> None:
        self.sent += 1
        self.answers[kind][verdict] += 1
        if verdict == "accepted" and len(self.accepted) < EXAMPLES:
            self.accepted.append(detail)
