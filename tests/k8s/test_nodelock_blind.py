"""Taking a free node lock without reading the node (app/k8s/nodelock.py `blind`, issue 20 scope 2): one
JSON patch that `test`s the lock annotation is absent, then adds HAMi's value; a lock present, a node
without annotations or a missing node fall back to HAMi's read-decide-CAS, whose verdicts and messages stay
the same. Against the API emulator, which applies JSON patches as kube-apiserver does (a `test` of null
passes on a missing member: sim/emulator/patching.py), counting the requests it saw."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.core.nodelock import contention_message, format_lock, format_rfc3339
from app.core.vendor import SHARED_LOCK
from app.devices.cambricon.device import LOCK as MLU_LOCK
from app.k8s import objects
from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.nodelock import Backoff, LockContention, NodeUnreadable, lock_node
from sim.emulator.testing import EmulatorHandle, node, pod, run_emulator

NOW = datetime.now(UTC).replace(microsecond=0)
EXPIRE = timedelta(minutes=5)
MUTEX, DSMLU = SHARED_LOCK.annotation, MLU_LOCK.annotation
QUICK = Backoff(steps=2, first=0.01)
BARE_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "bare"},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    with run_emulator(Path(tmp_path_factory.mktemp("sim"))) as handle:
        handle.seed([pod("other")])  # holds a lock in some cases: an active holder (pending, unbound)
        yield handle


def calls(sim: EmulatorHandle) -> list[str]:
    """`VERB resource status` of every request on nodes and pods the emulator answered."""
    return [
        f"{r['verb']} {r['resource']} {r['status']}"
        for r in sim.requests()
        if r["resource"] in ("nodes", "pods")
    ]


def lock_of(kube: Kube, name: str, key: str = MUTEX) -> str | None:
    return objects.annotations_of(objects.get_node(kube, name)).get(key)


HELD = format_lock(NOW - timedelta(seconds=5), "default", "other")  # an active holder's
OURS = format_lock(NOW - timedelta(seconds=5), "default", "p")
GONE = format_lock(NOW - timedelta(minutes=20), "default", "gone")  # its pod deleted long ago
MINE = format_lock(NOW, "default", "p")
FREE, READ = ["patch nodes 200"], ["patch nodes 422", "get nodes 200"]
# (id, the lock before, annotation, owned, verdict, the lock after, the requests on nodes and pods)
CASES = [
    ("free-one-request", {}, MUTEX, True, "acquired", MINE, FREE),
    ("free-vendor-lock-bare-time", {}, DSMLU, False, "acquired", format_rfc3339(NOW), FREE),
    ("held-by-an-active-pod", {MUTEX: HELD}, MUTEX, True, "contended", HELD, [*READ, "get pods 200"]),
    ("ours-reentered", {MUTEX: OURS}, MUTEX, True, "reentered", OURS, READ),
    ("ours-same-second-reentered", {MUTEX: MINE}, MUTEX, True, "reentered", MINE, READ),
    ("holder-gone-taken-over", {MUTEX: GONE}, MUTEX, True, "took-over", MINE, [*READ, "get pods 404", *FREE]),
]


@pytest.mark.parametrize(
    ("present", "key", "owned", "verdict", "after", "requests"),
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_a_free_lock_costs_one_request_and_a_held_one_is_decided_as_hami_does(
    sim: EmulatorHandle,
    kube: Kube,
    request: pytest.FixtureRequest,
    present: dict[str, str],
    key: str,
    owned: bool,
    verdict: str,
    after: str,
    requests: list[str],
) -> None:
    name = f"n-{request.node.callspec.id}"
    sim.seed([node(name, annotations={"hami.io/node-nvidia-register": "x", **present})])
    sim.clear_requests()
    written: list[str] = []
    try:
        got = lock_node(
            kube,
            name,
            "default",
            "p",
            EXPIRE,
            lambda: NOW,
            QUICK,
            annotation=key,
            owned=owned,
            written=written,
            blind=True,
        )
    except LockContention as exc:
        assert verdict == "contended" and str(exc) == contention_message(name, EXPIRE)
    else:
        assert verdict == ("reentered" if got.reentered else "took-over" if got.took_over else "acquired")
        assert got.value == after
    assert calls(sim) == requests
    assert lock_of(kube, name, key) == after
    # what a bind that finds its pod bound gives back: what this call wrote, never a lock it re-entered
    assert written == ([after] if verdict in ("acquired", "took-over") else [])


def test_a_lock_taken_meanwhile_fails_the_test_and_is_never_overwritten(kube: Kube) -> None:
    """The compare-and-swap itself: the JSON patch is refused (422) once the annotation is there."""
    objects.patch_node_annotations(kube, "n-free-one-request", {MUTEX: "theirs"})
    with pytest.raises(ApiError) as refused:
        objects.add_node_annotation_if_absent(kube, "n-free-one-request", MUTEX, "ours")
    assert refused.value.status == 422
    assert lock_of(kube, "n-free-one-request") == "theirs"


def test_a_node_without_annotations_falls_back_to_the_merge_patch(sim: EmulatorHandle, kube: Kube) -> None:
    sim.seed([BARE_NODE])
    sim.clear_requests()
    got = lock_node(kube, "bare", "default", "p", EXPIRE, lambda: NOW, QUICK, blind=True)
    assert got.value == format_lock(NOW, "default", "p")
    assert calls(sim) == ["patch nodes 422", "get nodes 200", "patch nodes 200"]


def test_a_missing_node_is_hamis_failed_to_get_node(sim: EmulatorHandle, kube: Kube) -> None:
    with pytest.raises(NodeUnreadable) as missing:
        lock_node(kube, "nowhere", "default", "p", EXPIRE, lambda: NOW, QUICK, blind=True)
    assert missing.value.message.startswith("failed to get node nowhere")
