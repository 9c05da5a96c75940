"""kube-apiserver's request counts per scheduled pod (bench/apicounts.py), from two real scrapes of
kube-apiserver v1.34.4 (tests/bench/data) taken on a fresh control plane before and after REQUESTS, sent
as the admin user through the harness's counting client: the difference is keyed by verb and resource as
the benchmark reports it, the client's own count of the same requests uses the same keys, and the
per-pod view leaves the driver's requests out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import apicounts, real_summary, summary

DATA = Path(__file__).parent / "data"

# (method, path, params) in the order they were sent between the two scrapes
REQUESTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/api/v1/nodes", None),
    ("POST", "/api/v1/namespaces/default/pods", None),
    ("POST", "/api/v1/namespaces/default/pods", None),  # the same pod again: 409
    ("PATCH", "/api/v1/namespaces/default/pods/p1", None),
    ("PATCH", "/api/v1/nodes/n1", None),
    ("PATCH", "/api/v1/nodes/n1", None),
    ("GET", "/api/v1/namespaces/default/pods/p1", None),
    ("GET", "/api/v1/namespaces/default/pods/missing", None),  # 404
    ("GET", "/api/v1/namespaces/default/pods", {"limit": 500}),
    ("GET", "/api/v1/namespaces/default/pods/p1", None),
    ("POST", "/api/v1/namespaces/default/pods/p1/binding", None),
    ("PATCH", "/api/v1/namespaces/default/pods/p1/status", None),
    ("GET", "/api/v1/nodes", {"limit": 500}),
    ("GET", "/api/v1/nodes", {"watch": "true"}),
    ("DELETE", "/api/v1/namespaces/default/pods/p1", None),
]
SENT = {
    "POST nodes": 1.0,
    "POST pods": 2.0,
    "PATCH pods": 1.0,
    "PATCH nodes": 2.0,
    "GET pods": 3.0,
    "LIST pods": 1.0,
    "POST pods/binding": 1.0,
    "PATCH pods/status": 1.0,
    "LIST nodes": 1.0,
    "WATCH nodes": 1.0,
    "DELETE pods": 1.0,
}
# kube-apiserver's own request in the same interval: the LimitRanger admission plugin listing the
# namespace's LimitRanges for the created pod
SERVER_ONLY = {"LIST limitranges": 1.0}


def scrape(name: str) -> summary.Scrape:
    return summary.parse_metrics((DATA / f"apiserver-{name}.prom").read_text(), apicounts.WANTED)


def test_the_difference_of_two_real_scrapes_counts_every_request_between_them() -> None:
    (before, _), (after, _) = (
        apicounts.request_counts(scrape("before")),
        apicounts.request_counts(scrape("after")),
    )
    assert apicounts.difference(before, after) == {**SENT, **SERVER_ONLY}


def test_the_counting_client_keys_each_request_as_kube_apiserver_does() -> None:
    counted: dict[str, float] = {}
    for method, path, params in REQUESTS:
        key = apicounts.path_key(method, path, params)
        counted[key] = counted.get(key, 0.0) + 1.0
    assert counted == SENT


@pytest.mark.parametrize(
    ("harness", "pods", "per_pod", "total"),
    [
        pytest.param(
            {},
            2,
            {
                "GET pods": 1.5,
                "PATCH nodes": 1.0,
                "POST pods": 1.0,
                "DELETE pods": 0.5,
                "LIST limitranges": 0.5,
                "LIST nodes": 0.5,
                "LIST pods": 0.5,
                "PATCH pods": 0.5,
                "PATCH pods/status": 0.5,
                "POST nodes": 0.5,
                "POST pods/binding": 0.5,
                "WATCH nodes": 0.5,
            },
            8.0,
            id="no-harness-two-pods-largest-first",
        ),
        pytest.param(SENT, 1, {"LIST limitranges": 1.0}, 1.0, id="everything-sent-by-the-harness-left-out"),
        pytest.param(
            {"POST pods": 2.0, "LIST pods": 1.0, "WATCH nodes": 1.0, "GET /readyz": 3.0},
            1,
            {
                "GET pods": 3.0,
                "PATCH nodes": 2.0,
                "DELETE pods": 1.0,
                "LIST limitranges": 1.0,
                "LIST nodes": 1.0,
                "PATCH pods": 1.0,
                "PATCH pods/status": 1.0,
                "POST nodes": 1.0,
                "POST pods/binding": 1.0,
            },
            12.0,
            id="driver-creations-and-watch-left-out-a-harness-key-the-server-never-saw-ignored",
        ),
        pytest.param({}, 0, {}, 0.0, id="no-pod-scheduled-no-per-pod-figures"),
    ],
)
def test_per_pod_view(harness: dict[str, float], pods: int, per_pod: dict[str, float], total: float) -> None:
    view = apicounts.view(scrape("before"), scrape("after"), harness, pods)
    assert view["per_pod"] == per_pod
    assert list(view["per_pod"]) == list(per_pod)  # largest first, then by key
    assert view["per_pod_total"] == total
    assert view["all_clients"] == dict(sorted({**SENT, **SERVER_ONLY}.items()))
    assert view["errors"] == {"GET pods 404": 1.0, "POST pods 409": 1.0}


def test_flow_schemas_split_the_requests_by_client() -> None:
    view = apicounts.view(scrape("before"), scrape("after"), {}, 1)
    assert view["by_flow_schema"] == {"exempt": 17.0}  # the admin user: 15 requests, 2 scrapes


@pytest.mark.parametrize(
    ("labels", "key"),
    [
        pytest.param(("PATCH", "", "pods", ""), "PATCH pods", id="core"),
        pytest.param(("POST", "", "pods", "binding"), "POST pods/binding", id="subresource"),
        pytest.param(
            ("PUT", "coordination.k8s.io", "leases", ""), "PUT leases.coordination.k8s.io", id="group"
        ),
        pytest.param(("PATCH", "apps", "deployments", "scale"), "PATCH deployments.apps/scale", id="both"),
        pytest.param(("GET", "", "", "/readyz"), "GET /readyz", id="non-resource-path"),
        pytest.param(("GET", "", "", ""), "GET (non-resource)", id="non-resource-unnamed"),
    ],
)
def test_resource_key(labels: tuple[str, str, str, str], key: str) -> None:
    assert apicounts.resource_key(*labels) == key


@pytest.mark.parametrize(
    ("method", "path", "params", "key"),
    [
        pytest.param("GET", "/api/v1/pods", None, "LIST pods", id="list-all-namespaces"),
        pytest.param("GET", "/api/v1/namespaces", None, "LIST namespaces", id="list-namespaces"),
        pytest.param("GET", "/api/v1/namespaces/default", None, "GET namespaces", id="get-a-namespace"),
        pytest.param(
            "DELETE", "/api/v1/namespaces/d/pods", None, "DELETECOLLECTION pods", id="deletecollection"
        ),
        pytest.param(
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/d/leases/l",
            None,
            "GET leases.coordination.k8s.io",
            id="group-resource",
        ),
        pytest.param(
            "GET", "/api/v1/namespaces/d/pods?watch=true", {"watch": True}, "WATCH pods", id="watch"
        ),
        pytest.param("GET", "/readyz", None, "GET /readyz", id="non-resource"),
    ],
)
def testpath_key(method: str, path: str, params: dict[str, Any] | None, key: str) -> None:
    assert apicounts.path_key(method, path, params) == key


def test_a_counter_that_went_down_is_no_negative_count() -> None:
    assert apicounts.difference(
        {"PATCH pods": 5.0, "GET pods": 1.0}, {"PATCH pods": 2.0, "GET pods": 4.0}
    ) == {"GET pods": 3.0}


def test_the_printed_table_has_a_column_per_run_and_folds_keys_small_in_every_run() -> None:
    def phase(per_pod: dict[str, float], harness: dict[str, float]) -> dict[str, Any]:
        total = round(sum(per_pod.values()), 3)
        return {"api_requests": {"per_pod": per_pod, "per_pod_total": total, "harness_per_pod": harness}}

    phases = {
        "baseline": phase(
            {"POST pods/binding": 1.0, "LIST nodes": 0.02, "WATCH nodes": 0.02}, {"POST pods": 1.0}
        ),
        "extender": phase(
            {"POST pods/binding": 1.0, "PATCH pods": 4.0, "LIST nodes": 0.5}, {"POST pods": 1.0}
        ),
    }
    lines = [line.split() for line in real_summary.api_table(phases)]
    assert lines[0][-2:] == ["baseline", "extender"]
    rows = {" ".join(cells[:-2]): cells[-2:] for cells in lines[1:]}
    assert rows == {
        "LIST nodes": ["0.02", "0.50"],  # small in one run only: shown
        "PATCH pods": ["-", "4.00"],
        "POST pods/binding": ["1.00", "1.00"],
        "others < 0.1 each (1 keys)": ["0.02", "0.00"],
        "total": ["1.04", "5.50"],
        "(the driver's own, not above)": ["1.00", "1.00"],
    }
