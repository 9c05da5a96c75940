"""The hostile verbs' bodies (sim.fuzz.hostile) are what they claim: valid JSON, past the route's cap or past
the 200,000 lists a body may hold while under the cap, naming the pod they target."""

from __future__ import annotations

import orjson
import pytest

from sim.chaos.forger import gpu_pod
from sim.fuzz.hostile import BIND_CAP, DENSE_LISTS, KINDS, Hostile

MAX_BODY = 1024 * 1024


def hostile() -> Hostile:
    pending = {**gpu_pod("hostile-pending"), "metadata": {"name": "hostile-pending", "uid": "u-1"}}
    bound = gpu_pod("hostile-bound-0")
    bound["metadata"]["uid"], bound["spec"]["nodeName"] = "u-2", "node-a"
    made = Hostile(None, lambda case: None, ["node-a", "node-b"], MAX_BODY)  # type: ignore[arg-type]
    made.pending, made.bound = pending, [bound]
    made.foreign = [
        gpu_pod("hostile-foreign", "default-scheduler"),
        gpu_pod("cpu", "default-scheduler", False),
    ]
    return made


@pytest.mark.parametrize(("kind", "cap"), [("over-cap-bind", BIND_CAP), ("over-cap-filter", MAX_BODY)])
def test_over_cap_bodies_are_valid_json_just_past_the_routes_cap(kind: str, cap: int) -> None:
    case = hostile().case(kind, 0)
    assert case is not None and case.body is not None
    assert cap < len(case.body) <= cap + 2048
    assert isinstance(orjson.loads(case.body)["extra"], list)


def test_the_dense_filter_is_under_the_cap_with_more_lists_than_allowed() -> None:
    case = hostile().case("dense-filter", 0)
    assert case is not None and case.body is not None
    body = orjson.loads(case.body)
    assert len(case.body) < MAX_BODY and len(body["extra"]) == DENSE_LISTS > 200_000
    assert body["Pod"]["metadata"]["uid"] == "u-1"


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_names_a_real_target(kind: str) -> None:
    case = hostile().case(kind, 1)
    assert case is not None and case.method == "POST" and case.path in ("/filter", "/bind")
    body = orjson.loads(case.body or b"")
    uid = body["Pod"]["metadata"].get("uid") if case.path == "/filter" else body["PodUID"]
    if kind.endswith("no-uid"):
        assert not uid
    elif kind.endswith("wrong-uid"):
        assert uid and uid not in ("u-1", "u-2")
