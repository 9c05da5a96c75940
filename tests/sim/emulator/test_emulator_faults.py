"""Fault injection as a real client experiences it, plus the rule bookkeeping and the request log."""

from __future__ import annotations

import json
import threading
import time

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from sim.emulator.testing import EmulatorHandle, HookError, node, pod


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (409, "Conflict"),
        (429, "TooManyRequests"),
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
        (504, "Timeout"),
    ],
    ids=lambda v: str(v),
)
def test_injected_status_surfaces_as_api_exception(
    sim: EmulatorHandle, core: client.CoreV1Api, status: int, reason: str
) -> None:
    sim.seed([node("n1")])
    rule = sim.add_fault(action="error", status=status, verb="patch", resource="nodes", count=1)
    patch = {"metadata": {"labels": {"x": "1"}}}
    with pytest.raises(ApiException) as caught:
        core.patch_node("n1", patch)
    body = json.loads(caught.value.body)
    assert caught.value.status == status
    assert (body["kind"], body["status"], body["reason"], body["code"]) == (
        "Status",
        "Failure",
        reason,
        status,
    )
    if status == 429:
        assert caught.value.headers["Retry-After"] == "1"
    stored = sim.get("nodes", "n1")
    assert stored is not None and stored["metadata"]["labels"] == {}, "the failed patch was not applied"
    assert core.patch_node("n1", patch).metadata.labels == {"x": "1"}, (
        "count=1: the next request goes through"
    )
    report = sim.faults()
    assert report["faults_injected"] == 1
    assert (report["rules"][0]["id"], report["rules"][0]["fired"]) == (rule, 1)
    assert [(r["verb"], r["status"], r["faults"]) for r in sim.requests()] == [
        ("patch", status, [f"error#{rule}"]),
        ("patch", 200, []),
    ]


def test_a_429_on_a_get_is_retried_by_urllib3_after_retry_after(
    sim: EmulatorHandle, core: client.CoreV1Api
) -> None:
    """urllib3's default Retry honours Retry-After on 429 for idempotent methods, as against a real server."""
    sim.seed([node("n1")])
    sim.add_fault(action="error", status=429, verb="get", count=1)
    started = time.monotonic()
    assert core.read_node("n1").metadata.name == "n1"
    assert time.monotonic() - started >= 0.9
    assert [r["status"] for r in sim.requests()] == [429, 200]


def test_an_injected_error_does_not_do_the_work(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.add_fault(action="error", status=500, verb="create", resource="pods")
    with pytest.raises(ApiException):
        core.create_namespaced_pod("default", client.V1Pod(metadata=client.V1ObjectMeta(name="p")))
    assert sim.get("pods", "p") is None


def test_subresource_and_path_matching(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.seed([pod("p"), node("n1")])
    sim.add_fault(action="error", status=503, resource="pods", subresource="binding")
    sim.add_fault(action="error", status=500, method="GET", path=r"^/api/v1/nodes$")
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="p"), target=client.V1ObjectReference(name="n1")
    )
    with pytest.raises(ApiException) as binding:
        core.create_namespaced_pod_binding("p", "default", body, _preload_content=False)
    assert binding.value.status == 503
    assert core.read_namespaced_pod("p", "default").spec.node_name is None
    with pytest.raises(ApiException) as listing:
        core.list_node()
    assert listing.value.status == 500
    assert core.read_node("n1").metadata.name == "n1", "the path regex does not match /api/v1/nodes/n1"


def test_latency(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.add_fault(action="delay", delay=0.3, verb="list", resource="nodes")
    started = time.monotonic()
    core.list_node()
    assert 0.29 <= time.monotonic() - started < 5
    assert sim.requests()[-1]["duration_ms"] >= 290


def test_lost_response_after_a_post_the_write_happened(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.add_fault(action="lost_response", verb="create", resource="nodes", count=1)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1")))
    assert core.read_node("n1").metadata.name == "n1"
    assert [r["status"] for r in sim.requests() if r["verb"] == "create"] == [0]


def test_lost_response_on_put_and_delete_is_retried_by_urllib3(
    sim: EmulatorHandle, core: client.CoreV1Api
) -> None:
    """urllib3 resends idempotent methods after a dropped connection: the client sees the retry's answer."""
    sim.seed([node("n1")])
    current = core.read_node("n1")
    current.metadata.labels = {"changed": "yes"}
    sim.add_fault(action="lost_response", verb="update", count=1)
    with pytest.raises(ApiException) as replaced:
        core.replace_node("n1", current)
    assert replaced.value.status == 409, "the first PUT was applied, so the resent one is stale"
    assert core.read_node("n1").metadata.labels == {"changed": "yes"}
    sim.add_fault(action="lost_response", verb="delete", count=1)
    with pytest.raises(ApiException) as deleted:
        core.delete_node("n1")
    assert deleted.value.status == 404, "the first DELETE was applied, so the resent one finds nothing"
    assert sim.get("nodes", "n1") is None


@pytest.mark.parametrize("graceful", [False, True], ids=["abrupt", "graceful"])
def test_dropped_watch_ends_the_stream_early(
    sim: EmulatorHandle, core: client.CoreV1Api, graceful: bool
) -> None:
    sim.seed([node(f"n{i}") for i in range(5)])
    sim.add_fault(action="drop_watch", after_events=2, graceful=graceful, count=1)
    received: list[str] = []
    started = time.monotonic()
    try:
        for event in watch.Watch().stream(core.list_node, timeout_seconds=30):
            received.append(event["object"].metadata.name)
    except urllib3.exceptions.ProtocolError:
        assert not graceful, "only an abrupt drop breaks the connection"
    else:
        assert graceful, "an abrupt drop must surface as a connection error"
    assert len(received) == 2 and time.monotonic() - started < 10


def test_probability_and_count(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.seed([node("n1")])
    never = sim.add_fault(action="error", status=500, verb="get", probability=0.0)
    half = sim.add_fault(action="error", status=503, verb="get", probability=0.5, count=5)
    failures = 0
    for _ in range(40):
        try:
            core.read_node("n1")
        except ApiException as error:
            assert error.status == 503
            failures += 1
    fired = {rule["id"]: rule["fired"] for rule in sim.faults()["rules"]}
    assert fired == {never: 0, half: 5} and failures == 5


def test_rules_can_be_removed_and_cleared_but_the_total_stays(
    sim: EmulatorHandle, core: client.CoreV1Api
) -> None:
    first = sim.add_fault(action="error", status=500, verb="list", count=1)
    sim.add_fault(action="delay", delay=0.01, verb="list")
    with pytest.raises(ApiException):
        core.list_node()
    assert sim.remove_fault(first) and not sim.remove_fault(first)
    assert sim.clear_faults() == 1
    core.list_node()
    report = sim.faults()
    assert report["rules"] == [] and report["faults_injected"] == 2
    assert report["by_action"] == {"error": 1, "delay": 1}


@pytest.mark.parametrize(
    "rule",
    [
        {"action": "explode"},
        {"action": "error", "colour": "red"},
        {"action": "error", "probability": 2},
        {"action": "error", "path": "("},
    ],
    ids=["unknown-action", "unknown-field", "bad-probability", "bad-regex"],
)
def test_invalid_rules_are_rejected(sim: EmulatorHandle, rule: dict[str, object]) -> None:
    with pytest.raises(HookError) as caught:
        sim.add_fault(**rule)
    assert caught.value.status == 400


def test_request_log_records_and_clears(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    core.list_namespaced_pod("default", label_selector="app=web")
    with pytest.raises(ApiException):
        core.read_node("ghost")
    records = sim.requests()
    assert [(r["method"], r["path"], r["verb"], r["resource"], r["status"]) for r in records] == [
        ("GET", "/api/v1/namespaces/default/pods", "list", "pods", 200),
        ("GET", "/api/v1/nodes/ghost", "get", "nodes", 404),
    ]
    assert records[0]["query"] == "labelSelector=app%3Dweb" and records[0]["duration_ms"] >= 0
    sim.clear_requests()
    assert sim.requests() == []


def test_a_rule_aimed_at_one_user_agent_spares_the_others(sim: EmulatorHandle, api: client.ApiClient) -> None:
    """Our worker and Gunicorn say who they are (app/k8s/client.py): a chaos run can hold up one of them."""
    sim.seed([node("n1")])
    sim.add_fault(action="error", status=503, verb="get", user_agent=r"worker/.*\(replica-0\)")
    core = client.CoreV1Api(api)
    api.user_agent = "hami-scheduler-worker/0 (replica-1)"
    assert core.read_node("n1").metadata.name == "n1"
    api.user_agent = "hami-scheduler-worker/0 (replica-0)"
    with pytest.raises(ApiException) as caught:
        core.read_node("n1")
    assert caught.value.status == 503
    assert sim.faults()["rules"][0]["fired"] == 1


def _watch_lines(api: client.ApiClient, **query: object) -> list[dict[str, object]]:
    """Every line of one watch of nodes, as JSON, until the server ends the stream."""
    response = client.CoreV1Api(api).list_node(watch=True, _preload_content=False, **query)
    try:
        return [json.loads(line) for line in response.read().splitlines() if line.strip()]
    finally:
        response.release_conn()


def test_an_expire_fault_answers_a_watch_with_410_so_the_client_lists_again(
    sim: EmulatorHandle, api: client.ApiClient
) -> None:
    sim.seed([node("n1")])
    sim.add_fault(action="expire", verb="watch", resource="nodes", count=1)
    sim.add_fault(action="expire", verb="list", resource="nodes")  # watch-only: never fires on a list
    assert client.CoreV1Api(api).list_node().items[0].metadata.name == "n1"
    lines = _watch_lines(api, resource_version="1", timeout_seconds=5)
    assert [(line["type"], line["object"]["code"]) for line in lines] == [("ERROR", 410)]  # type: ignore[index]
    assert [rule["fired"] for rule in sim.faults()["rules"]] == [1, 0]


@pytest.mark.parametrize("ending", ["expired", "dropped", "closed"])
def test_open_watches_of_one_client_can_be_ended_now(
    sim: EmulatorHandle, api: client.ApiClient, ending: str
) -> None:
    """The chaos storm's forced relists (expired) and cut watches (dropped) of the leader's worker alone."""
    sim.seed([node("n1")])
    api.user_agent = "hami-scheduler-worker/0 (replica-0)"
    received: list[object] = []
    errors: list[BaseException] = []

    def watch_nodes() -> None:
        try:
            received.extend(_watch_lines(api, timeout_seconds=30))
        except urllib3.exceptions.HTTPError as exc:
            errors.append(exc)

    thread = threading.Thread(target=watch_nodes)
    thread.start()
    deadline = time.monotonic() + 10
    while sim.stats()["watchers"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sim.close_watches("nodes", "replica-1", ending) == 0  # another client's: untouched
    assert sim.close_watches("nodes", "replica-0", ending) == 1
    thread.join(10)
    assert not thread.is_alive(), "the watch did not end"
    if ending == "dropped":
        assert errors, "a dropped watch must surface as a connection error"
        return
    assert not errors
    assert [line["type"] for line in received] == (  # type: ignore[index]
        ["ADDED", "ERROR"] if ending == "expired" else ["ADDED"]
    )


def test_closing_watches_validates_its_request(sim: EmulatorHandle) -> None:
    with pytest.raises(HookError) as caught:
        sim.close_watches("nodes", "", "exploded")
    assert caught.value.status == 400
