"""The node locks a pod's bind takes, with Metax, Iluvatar, Kunlunxin and Enflame among HAMi's (reference
vendors §1.5): Metax sGPU, Iluvatar and Kunlunxin vXPU take the shared `hami.io/mutex.lock`; Metax whole GPUs,
Kunlunxin whole XPUs and both Enflame backends take none in HAMi. Metax whole GPUs and Enflame GCUs take the
shared lock here (their plugins follow HAMi's to-allocate protocol and find their pod through it); Kunlunxin
whole XPUs and Enflame DRS take our own `hami.io/bind.lock` (released by the bind itself, issue 19). For any
mix of requested vendors the bind takes exactly the distinct locks of those vendors, each once, in
annotation-key order (so two pods needing the same locks take them in the same order), which is what lets it
release all of them together on any failure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vendor_strategies import VENDORS

from app.core.model import DeviceRequest, PodRequests
from app.core.vendor import BIND_LOCK, SHARED_LOCK, locks_for

BY_KEY = {v.key: v for v in VENDORS}


def asking(*groups: tuple[str, ...]) -> PodRequests:
    return PodRequests(tuple({key: DeviceRequest(1, key) for key in group} for group in groups), 0)


@pytest.mark.parametrize(
    ("keys", "locks"),
    [
        (("Metax-SGPU",), (SHARED_LOCK,)),
        (("BI-V150",), (SHARED_LOCK,)),
        (("XPU",), (SHARED_LOCK,)),
        (("Metax-GPU",), (SHARED_LOCK,)),
        (("kunlun",), (BIND_LOCK,)),
        (("GCU",), (SHARED_LOCK,)),
        (("Enflame",), (BIND_LOCK,)),
        (("GCU", "Enflame"), (BIND_LOCK, SHARED_LOCK)),
        (("Metax-SGPU", "XPU", "NVIDIA"), (SHARED_LOCK,)),
        (("MLU", "Metax-SGPU"), (BY_KEY["MLU"].lock, SHARED_LOCK)),
    ],
    ids=[
        "§2.5 sGPU: shared",
        "§2.6 Iluvatar: shared",
        "§2.8 vXPU: shared",
        "§2.4 whole Metax: shared (HAMi: none)",
        "§2.8 whole XPU: our bind lock",
        "§2.9 GCU: shared (HAMi: none)",
        "§2.9 DRS: our bind lock",
        "§2.9 both Enflame backends: both locks",
        "§1.5 one shared lock for several vendors",
        "§1.5 Cambricon's own lock first",
    ],
)
def test_locks_for_metax_iluvatar_kunlun_enflame(keys: tuple[str, ...], locks: tuple[object, ...]) -> None:
    assert locks_for(asking(keys), VENDORS) == locks


@given(
    st.lists(st.lists(st.sampled_from(sorted(BY_KEY)), max_size=3), min_size=1, max_size=3), st.integers(0, 2)
)
def test_a_bind_takes_each_lock_of_its_vendors_once_in_key_order(groups: list[list[str]], init: int) -> None:
    requests = PodRequests(
        tuple({k: DeviceRequest(1, k) for k in group} for group in groups), min(init, len(groups))
    )
    taken = locks_for(requests, VENDORS)
    wanted = {BY_KEY[k].lock or BIND_LOCK for group in groups for k in group}
    assert set(taken) == wanted  # init containers' vendors too (HAMi: regular containers only, quirk #28)
    assert [spec.annotation for spec in taken] == sorted({spec.annotation for spec in taken})
