"""Every node lock a multi-vendor pod needs, all or none (app/k8s/nodelock.py `lock_all`/`release_all`),
against the API emulator: HAMi's shared `hami.io/mutex.lock` (owned, re-entrant) and Cambricon's
`cambricon.com/dsmlu.lock` (a bare RFC3339 time, two minutes: reference vendors §2.3, §1.5). A failure on
any lock leaves none of ours behind (HAMi leaks the ones taken before, #2626), and a release never removes
another pod's lock (HAMi releases Cambricon's whatever it holds, §3.3 #2)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.core.model import DeviceRequest, PodRequests
from app.core.nodelock import format_lock, format_rfc3339
from app.core.vendor import BIND_LOCK, SHARED_LOCK, locks_for
from app.devices.ascend import CHART_CHIPS, Ascend
from app.devices.cambricon import Cambricon
from app.devices.cambricon.device import LOCK as MLU_LOCK
from app.devices.hygon import Hygon
from app.devices.mthreads import Mthreads
from app.devices.nvidia import Nvidia
from app.k8s import objects
from app.k8s.client import Kube, connect
from app.k8s.nodelock import Held, LockContention, lock_all, release_all
from sim.emulator.testing import EmulatorHandle, node, pod, run_emulator

NOW = datetime.now(UTC).replace(microsecond=0)
EXPIRE = timedelta(minutes=5)
MUTEX, DSMLU = SHARED_LOCK.annotation, MLU_LOCK.annotation
BOTH = (MLU_LOCK, SHARED_LOCK)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with run_emulator(tmp_path / "sim") as handle:
        handle.seed([node("n1"), pod("other")])  # `other` holds a lock in one test: an active holder
        yield handle


@pytest.fixture
def kube(sim: EmulatorHandle) -> Iterator[Kube]:
    connected = connect(str(sim.kubeconfig))
    yield connected
    connected.close()


def locks(kube: Kube) -> dict[str, str]:
    notes = objects.annotations_of(objects.get_node(kube, "n1"))
    return {k: v for k, v in notes.items() if k in (MUTEX, DSMLU)}


def request(*keys: str) -> PodRequests:
    return PodRequests(tuple({key: DeviceRequest(1, key)} for key in keys), 0)


VENDORS = (Nvidia(), Cambricon(), Hygon(), Mthreads(), Ascend(CHART_CHIPS[2]))


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (("NVIDIA",), (SHARED_LOCK,)),
        (("NVIDIA", "DCU", "Ascend910B3"), (SHARED_LOCK,)),  # one shared lock, taken once (re-entrant)
        (("MLU",), (MLU_LOCK,)),
        (("NVIDIA", "MLU"), BOTH),  # annotation-key order: cambricon.com/... before hami.io/...
        (("Mthreads",), (BIND_LOCK,)),  # §1.5: no vendor lock; our own, released by bind (issue 19)
        (("Mthreads", "MLU"), (MLU_LOCK, BIND_LOCK)),
        (("Mthreads", "NVIDIA"), (BIND_LOCK, SHARED_LOCK)),  # hami.io/bind.lock before hami.io/mutex.lock
    ],
)
def test_locks_for(keys: tuple[str, ...], expected: tuple[object, ...]) -> None:
    assert locks_for(request(*keys), VENDORS) == expected


def test_every_lock_is_taken_with_its_own_value(kube: Kube) -> None:
    held: list[Held] = []
    lock_all(kube, "n1", "default", "p", BOTH, EXPIRE, lambda: NOW, held)
    assert locks(kube) == {DSMLU: format_rfc3339(NOW), MUTEX: format_lock(NOW, "default", "p")}
    release_all(kube, "n1", "default", "p", held)
    assert locks(kube) == {}


def test_contention_on_a_later_lock_leaves_the_earlier_one_to_release(kube: Kube) -> None:
    theirs = format_lock(NOW, "default", "other")
    objects.patch_node_annotations(kube, "n1", {MUTEX: theirs})
    held: list[Held] = []
    with pytest.raises(LockContention):
        lock_all(kube, "n1", "default", "p", BOTH, EXPIRE, lambda: NOW, held)
    assert [h.spec for h in held] == list(BOTH) and locks(kube)[DSMLU] == format_rfc3339(NOW)
    release_all(kube, "n1", "default", "p", held)
    assert locks(kube) == {MUTEX: theirs}  # ours is gone, theirs is untouched


def test_a_fresh_cambricon_lock_is_contention_even_for_the_same_pod(kube: Kube) -> None:
    """§2.3: not re-entrant; the value names nobody."""
    objects.patch_node_annotations(kube, "n1", {DSMLU: format_rfc3339(NOW - timedelta(seconds=30))})
    with pytest.raises(LockContention):
        lock_all(kube, "n1", "default", "p", (MLU_LOCK,), EXPIRE, lambda: NOW, [])


def test_a_cambricon_lock_older_than_two_minutes_is_taken_over(kube: Kube) -> None:
    """§2.3: its own 2-minute expiry, independent of HAMI_NODELOCK_EXPIRE."""
    objects.patch_node_annotations(kube, "n1", {DSMLU: format_rfc3339(NOW - timedelta(minutes=3))})
    held: list[Held] = []
    acquired = lock_all(kube, "n1", "default", "p", (MLU_LOCK,), timedelta(hours=1), lambda: NOW, held)
    assert acquired is not None and "expired" in acquired.took_over
    assert locks(kube) == {DSMLU: format_rfc3339(NOW)}


def test_a_release_never_removes_a_lock_someone_else_wrote_since(kube: Kube) -> None:
    """§3.3 #2 fixed: a Cambricon lock is released only while it holds the value this bind wrote."""
    held: list[Held] = []
    lock_all(kube, "n1", "default", "p", (MLU_LOCK,), EXPIRE, lambda: NOW, held)
    later = format_rfc3339(NOW + timedelta(minutes=3))  # our lock expired and another bind took it
    objects.patch_node_annotations(kube, "n1", {DSMLU: later})
    release_all(kube, "n1", "default", "p", held)
    assert locks(kube) == {DSMLU: later}


def test_no_lock_is_a_no_op(kube: Kube) -> None:
    held: list[Held] = []
    assert lock_all(kube, "n1", "default", "p", (), EXPIRE, lambda: NOW, held) is None
    release_all(kube, "n1", "default", "p", held)
    assert held == [] and locks(kube) == {}
