"""Property: a pod asking any mix of vendors (NVIDIA, Cambricon, Hygon, AMD, Vastai, Biren, AWS Neuron) takes
exactly the locks `locks_for` names, and whatever happens on the way (another pod's lock, an expired one, API
errors while locking, a failed bind) releasing what it holds leaves none of its locks on the node and never
touches another pod's (reference vendors §1.5; HAMi leaks partial locks, #2626). Against the API emulator."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.model import DeviceRequest, PodRequests
from app.core.nodelock import format_lock, format_rfc3339
from app.core.vendor import BIND_LOCK, SHARED_LOCK, locks_for
from app.devices.amd import Amd
from app.devices.awsneuron import AwsNeuron
from app.devices.biren import Biren
from app.devices.cambricon import Cambricon
from app.devices.cambricon.device import LOCK as MLU_LOCK
from app.devices.hygon import Hygon
from app.devices.nvidia import Nvidia
from app.devices.vastai import Vastai
from app.k8s import objects
from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.nodelock import Backoff, Held, LockContention, NodeUnreadable, lock_all, release_all
from sim.emulator.testing import EmulatorHandle, node, pod, run_emulator

NOW = datetime.now(UTC).replace(microsecond=0)
EXPIRE = timedelta(minutes=5)
MUTEX, DSMLU, BIND = SHARED_LOCK.annotation, MLU_LOCK.annotation, BIND_LOCK.annotation
VENDORS = (Nvidia(), Cambricon(), Hygon(), Amd(), Vastai(), Biren(), AwsNeuron())
FAST = Backoff(first=0.001)
OURS = format_lock(NOW, "default", "p")
FOREIGN_MUTEX = {  # what another pod left on the shared lock
    "none": None,
    "active": format_lock(NOW, "default", "other"),  # `other` exists: an active holder
    "expired": format_lock(NOW - timedelta(minutes=10), "default", "gone"),
}
FOREIGN_DSMLU = {
    "none": None,
    "fresh": format_rfc3339(NOW - timedelta(seconds=30)),
    "old": format_rfc3339(NOW - timedelta(minutes=3)),
}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    with run_emulator(Path(tmp_path_factory.mktemp("locks")) / "sim") as handle:
        handle.seed([node("n1"), pod("other")])
        yield handle


def locks(kube: Kube) -> dict[str, str]:
    notes = objects.annotations_of(objects.get_node(kube, "n1"))
    return {k: v for k, v in notes.items() if k in (MUTEX, DSMLU, BIND)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sets(st.sampled_from([v.key for v in VENDORS]), min_size=1, max_size=4),
    st.sampled_from(sorted(FOREIGN_MUTEX)),
    st.sampled_from(sorted(FOREIGN_DSMLU)),
    st.integers(0, 6),
    st.booleans(),
)
def test_a_multi_vendor_pod_leaves_no_lock_behind(
    sim: EmulatorHandle,
    kube: Kube,
    keys: set[str],
    mutex: str,
    dsmlu: str,
    errors: int,
    bind_fails: bool,
) -> None:
    sim.clear_faults()
    before = {MUTEX: FOREIGN_MUTEX[mutex], DSMLU: FOREIGN_DSMLU[dsmlu]}
    objects.patch_node_annotations(kube, "n1", before)  # None deletes
    specs = locks_for(PodRequests(tuple({k: DeviceRequest(1, k)} for k in sorted(keys)), 0), VENDORS)
    wanted = {(v.lock or BIND_LOCK).annotation for v in VENDORS if v.key in keys}  # Neuron: our bind lock
    assert [s.annotation for s in specs] == sorted(wanted)  # one per distinct lock, in key order
    if errors:
        sim.add_fault(action="error", status=503, verb="patch", resource="nodes", count=errors)
    held: list[Held] = []
    taken = False
    try:
        lock_all(kube, "n1", "default", "p", specs, EXPIRE, lambda: NOW, held, FAST)
        taken = True
    except (LockContention, NodeUnreadable, ApiError):
        pass
    sim.clear_faults()
    if taken and not bind_fails:
        assert {k for k, v in locks(kube).items() if v in (OURS, format_rfc3339(NOW))} == wanted
    release_all(kube, "n1", "default", "p", held)
    after = locks(kube)
    assert OURS not in after.values()
    assert not any(after.get(h.spec.annotation) in h.written for h in held if not h.spec.owned)
    live = {MUTEX: mutex == "active", DSMLU: dsmlu == "fresh"}
    for annotation, value in before.items():  # another pod's live lock is never touched
        if annotation not in wanted or live[annotation]:
            assert after.get(annotation) == value
        else:  # free or expired: taken over (then released), or left as it was when locking stopped
            assert after.get(annotation) in (None, value)
