"""The webhook's JSON Patch is computed on the trimmed pod pair (`_differing`, issue 20): the same patch.

`make_patch` of a whole pod walked managedFields, status and every unchanged container; trimming the members
equal in both first must not change a single operation, types included (jsonpatch tells 1, 1.0 and true
apart, and so must the trimming).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.admission import _copy, _differing

leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([1.0, 0.5]), st.sampled_from(["", "a", "b"])
)
documents = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), inner, max_size=4)
    ),
    max_leaves=25,
)
objects = st.dictionaries(st.sampled_from(["metadata", "spec", "status", "x"]), documents, max_size=4)


def ops(patch: jsonpatch.JsonPatch) -> list[str]:
    return sorted(json.dumps(op, sort_keys=True) for op in patch.patch)


@settings(max_examples=400, deadline=None)
@given(objects, objects)
def test_the_trimmed_pair_gives_the_same_patch(old: dict[str, Any], new: dict[str, Any]) -> None:
    trimmed = jsonpatch.make_patch(*_differing(old, new))
    assert ops(trimmed) == ops(jsonpatch.make_patch(old, new))
    assert trimmed.apply(copy.deepcopy(old)) == new


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param({"a": 1}, {"a": True}, id="int-to-bool"),
        pytest.param({"a": [1]}, {"a": [1.0]}, id="int-to-float-in-a-list"),
        pytest.param({"a": {"b": 0}}, {"a": {"b": False}}, id="nested-zero-to-false"),
    ],
)
def test_a_change_of_type_alone_is_a_change(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert _differing(old, new) == (old, new)
    assert jsonpatch.make_patch(*_differing(old, new)).patch


def test_equal_members_are_left_out() -> None:
    old = {"metadata": {"name": "p", "managedFields": [{"f": 1}]}, "spec": {"x": 1, "y": [1]}, "status": {}}
    new = {"metadata": {"name": "p", "managedFields": [{"f": 1}]}, "spec": {"x": 2, "y": [1]}, "status": {}}
    assert _differing(old, new) == ({"spec": {"x": 1}}, {"spec": {"x": 2}})


def test_the_copy_is_deep_and_equal() -> None:
    pod = {"metadata": {"annotations": {"a": "1"}}, "spec": {"containers": [{"name": "c", "n": 1.5}]}}
    copied = _copy(pod)
    assert copied == pod
    copied["spec"]["containers"][0]["name"] = "d"
    assert pod["spec"]["containers"][0]["name"] == "c"
