"""Label and field selectors: kube-apiserver's syntax and matching rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.emulator.errors import ApiError
from sim.emulator.resources import NODES, PODS
from sim.emulator.selectors import field_value, parse_field_selector, parse_label_selector

LABELS = {"app": "web", "tier": "front", "hami.io/gpu": "a100", "empty": ""}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param("", True, id="empty-matches-all"),
        pytest.param("app=web", True, id="equal"),
        pytest.param("app==web", True, id="double-equal"),
        pytest.param("app=db", False, id="equal-other-value"),
        pytest.param("app!=db", True, id="not-equal"),
        pytest.param("missing!=x", True, id="not-equal-absent-key"),
        pytest.param("app in (db, web)", True, id="in"),
        pytest.param("app in (db,cache)", False, id="in-miss"),
        pytest.param("app notin (db)", True, id="notin"),
        pytest.param("missing notin (db)", True, id="notin-absent-key"),
        pytest.param("app notin (web)", False, id="notin-miss"),
        pytest.param("hami.io/gpu", True, id="exists-prefixed"),
        pytest.param("!hami.io/gpu", False, id="not-exists"),
        pytest.param("!missing", True, id="not-exists-absent"),
        pytest.param("empty=", True, id="equal-empty-value"),
        pytest.param("app=web,tier in (front,back),!missing", True, id="conjunction"),
        pytest.param("app=web,tier=back", False, id="conjunction-one-fails"),
    ],
)
def test_label_selector_matching(selector: str, expected: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is expected


@pytest.mark.parametrize("selector", ["=web", "app in web", "app in (", "a b", "app>1", "app=(x)"], ids=str)
def test_bad_label_selector_is_400(selector: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_label_selector(selector)
    assert caught.value.code == 400


_key = st.sampled_from(["a", "b", "c", "x.io/d"])
_value = st.sampled_from(["1", "2", "3", ""])


@given(labels=st.dictionaries(_key, _value), key=_key, values=st.sets(_value, min_size=1, max_size=3))
def test_set_operators_agree_with_their_definition(
    labels: dict[str, str], key: str, values: set[str]
) -> None:
    rendered = ",".join(sorted(values))
    in_match = parse_label_selector(f"{key} in ({rendered})").matches(labels)
    notin_match = parse_label_selector(f"{key} notin ({rendered})").matches(labels)
    assert in_match == (key in labels and labels[key] in values)
    assert notin_match == (key not in labels or labels[key] not in values)
    assert parse_label_selector(key).matches(labels) == (key in labels)
    assert parse_label_selector(f"!{key}").matches(labels) == (key not in labels)


POD = {
    "metadata": {"name": "p1", "namespace": "ns1"},
    "spec": {"nodeName": "n1", "hostNetwork": True},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param("spec.nodeName=n1", True, id="node-name"),
        pytest.param("spec.nodeName==n1", True, id="node-name-double-equal"),
        pytest.param("spec.nodeName!=n1", False, id="node-name-not"),
        pytest.param("spec.nodeName=", False, id="unbound"),
        pytest.param("metadata.name=p1,metadata.namespace=ns1", True, id="name-and-namespace"),
        pytest.param("status.phase!=Succeeded,status.phase!=Failed", True, id="not-terminal"),
        pytest.param("spec.hostNetwork=true", True, id="boolean-rendered-lowercase"),
    ],
)
def test_field_selector_matching(selector: str, expected: bool) -> None:
    assert parse_field_selector(selector, PODS.field_labels).matches(POD) is expected


def test_unbound_pod_matches_empty_node_name() -> None:
    unbound = {"metadata": {"name": "p"}, "spec": {}}
    assert parse_field_selector("spec.nodeName=", PODS.field_labels).matches(unbound)
    assert field_value(unbound, "status.phase") == ""


@pytest.mark.parametrize("selector", ["spec.nodeName=x", "status.phase=Running", "nonsense"], ids=str)
def test_unsupported_field_label_is_400(selector: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_field_selector(selector, NODES.field_labels)
    assert caught.value.code == 400
