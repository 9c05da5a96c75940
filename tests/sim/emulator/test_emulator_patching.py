"""The three PATCH flavours, on plain dicts: RFC 7386 merge, strategic merge, RFC 6902 JSON patch."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.emulator.errors import ApiError
from sim.emulator.patching import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    apply_patch,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)

# RFC 7386 appendix A test vectors.
RFC7386 = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(
    ("target", "patch", "expected"), RFC7386, ids=[f"rfc7386-{i}" for i in range(len(RFC7386))]
)
def test_merge_patch_rfc7386_vectors(target: Any, patch: Any, expected: Any) -> None:
    before = copy.deepcopy(target)
    assert merge_patch(target, patch) == expected
    assert target == before, "the stored object must never be mutated"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=8,
)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


@given(
    target=st.dictionaries(st.text(max_size=2), _json, max_size=4),
    patch=st.dictionaries(st.text(max_size=2), _json, max_size=4),
)
def test_merge_patch_is_idempotent_and_leaves_target_alone(
    target: dict[str, Any], patch: dict[str, Any]
) -> None:
    before = copy.deepcopy(target)
    once = merge_patch(target, patch)
    assert target == before
    assert merge_patch(once, patch) == once
    assert merge_patch({}, _without_nulls(patch)) == _without_nulls(patch)


POD = {
    "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x"]},
    "spec": {
        "containers": [
            {"name": "c1", "image": "i1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "c2", "image": "i2"},
        ],
        "tolerations": [{"key": "t1"}],
    },
    "status": {
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]
    },
}


@pytest.mark.parametrize(
    ("patch", "path", "expected"),
    [
        pytest.param(
            {"spec": {"containers": [{"name": "c2", "image": "new"}]}},
            ("spec", "containers"),
            [POD["spec"]["containers"][0], {"name": "c2", "image": "new"}],  # type: ignore[index]
            id="containers-merge-by-name",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "c3", "image": "i3"}]}},
            ("spec", "containers"),
            [*POD["spec"]["containers"], {"name": "c3", "image": "i3"}],  # type: ignore[index]
            id="unknown-name-appended",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "c1", "env": [{"name": "B", "value": "3"}]}]}},
            ("spec", "containers", 0, "env"),
            [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}],
            id="nested-env-merge-by-name",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "c1", "$patch": "delete"}]}},
            ("spec", "containers"),
            [{"name": "c2", "image": "i2"}],
            id="patch-delete-directive",
        ),
        pytest.param(
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            ("status", "conditions"),
            [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            id="conditions-merge-by-type",
        ),
        pytest.param(
            {"spec": {"tolerations": [{"key": "t2"}]}},
            ("spec", "tolerations"),
            [{"key": "t2"}],
            id="other-lists-replaced",
        ),
        pytest.param(
            {"metadata": {"finalizers": ["y", "x"]}},
            ("metadata", "finalizers"),
            ["x", "y"],
            id="finalizers-merge-as-set",
        ),
        pytest.param(
            {"metadata": {"labels": {"a": None, "b": "2"}}, "$setElementOrder/containers": [{"name": "c1"}]},
            ("metadata", "labels"),
            {"b": "2"},
            id="maps-merge-null-deletes-directives-ignored",
        ),
    ],
)
def test_strategic_merge_patch(patch: dict[str, Any], path: tuple[Any, ...], expected: Any) -> None:
    before = copy.deepcopy(POD)
    result: Any = strategic_merge_patch(POD, patch)
    for step in path:
        result = result[step]
    assert result == expected
    assert before == POD


def test_strategic_merge_list_item_without_merge_key_is_400() -> None:
    with pytest.raises(ApiError) as caught:
        strategic_merge_patch(POD, {"spec": {"containers": [{"image": "x"}]}})
    assert caught.value.code == 400


def test_json_patch_operations() -> None:
    doc = {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [1, 2]}}
    ops = [
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        {"op": "replace", "path": "/metadata/labels/a", "value": "9"},
        {"op": "remove", "path": "/spec/items/0"},
        {"op": "copy", "from": "/metadata/labels/b", "path": "/metadata/labels/c"},
        {"op": "move", "from": "/metadata/labels/c", "path": "/metadata/labels/d"},
    ]
    assert json_patch(doc, ops) == {
        "metadata": {"labels": {"a": "9", "b": "2", "d": "2"}},
        "spec": {"items": [2]},
    }
    assert doc == {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [1, 2]}}


@pytest.mark.parametrize(
    "ops",
    [
        pytest.param([{"op": "test", "path": "/a", "value": "other"}], id="failed-test"),
        pytest.param([{"op": "remove", "path": "/missing"}], id="remove-missing"),
        pytest.param([{"op": "replace", "path": "/missing/x", "value": 1}], id="replace-missing"),
        pytest.param([{"op": "test", "path": "/a", "value": None}], id="null-test-of-a-present-member"),
        pytest.param(
            [{"op": "test", "path": "/missing/x", "value": None}], id="null-test-without-its-object"
        ),
        pytest.param([{"op": "test", "path": "/a"}], id="test-without-value"),
    ],
)
def test_inapplicable_json_patch_is_422(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(ApiError) as caught:
        json_patch({"a": "1"}, ops)
    assert (caught.value.code, caught.value.reason) == (422, "Invalid")


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        (MERGE_PATCH, {"l": [3]}),
        (f"{STRATEGIC_MERGE_PATCH}; charset=utf-8", {"l": [3]}),
        (JSON_PATCH, {"l": [1, 2, 3]}),
    ],
    ids=["merge", "strategic-with-parameters", "json"],
)
def test_dispatch_by_content_type(content_type: str, expected: dict[str, Any]) -> None:
    patch: Any = [{"op": "add", "path": "/l/-", "value": 3}] if content_type == JSON_PATCH else {"l": [3]}
    assert apply_patch(content_type, {"l": [1, 2]}, patch) == expected


def test_unknown_patch_type_is_415() -> None:
    with pytest.raises(ApiError) as caught:
        apply_patch("application/apply-patch+yaml", {}, {})
    assert caught.value.code == 415


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        pytest.param(
            [{"op": "test", "path": "/m/k", "value": None}, {"op": "add", "path": "/m/k", "value": "v"}],
            {"a": "1", "m": {"k": "v"}},
            id="add-if-absent",
        ),
        pytest.param(
            [{"op": "add", "path": "/m/k", "value": "v"}, {"op": "test", "path": "/m/k", "value": "v"}],
            {"a": "1", "m": {"k": "v"}},
            id="in-order",
        ),
    ],
)
def test_a_null_test_passes_on_a_missing_member_as_kube_apiserver_does(
    ops: list[dict[str, Any]], expected: dict[str, Any]
) -> None:
    """gopkg.in/evanphx/json-patch.v4 (kube-apiserver's JSON patch): `test` of null on a member its object
    lacks passes; app/k8s/objects.py takes a free node lock so."""
    assert json_patch({"a": "1", "m": {}}, ops) == expected
