"""Request bodies the fuzzer (`python -m sim fuzz`) found to escape the HTTP contract, kept as regressions.

- JSON nested a few hundred levels deep (orjson accepts 1024) made the webhook's deepcopy raise
  RecursionError: answered "internal error" (seed 1, a deep-nesting AdmissionReview). Reviews nesting more
  than MAX_DEPTH levels are now refused as invalid JSON with a message; /filter and /bind never recurse
  into a body and answer such bodies as any other.
- A body whose reading fails in the server (broken chunked framing raised Gunicorn's InvalidChunkSize, not
  an OSError; a stall raises TimeoutError) escaped the routes as an unexpected exception (seed 0, raw-http).
  It is now an Error naming the failure, and the body is not read a second time.
- `Nodes: {}` next to NodeNames took the Nodes path with no node at all and answered nothing at all: no
  node, no FailedNodes, no Error (seed 2). It is now an Error.
- A body a handler leaves unread (the webhook refusing a Content-Type) is read to its end within the cap
  afterwards, so Gunicorn keeps the connection usable (it drains only 64 KiB itself).
"""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest
from flask.testing import FlaskClient

from app.routes.common import MAX_DEPTH, nested_deeper

FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


def bomb(depth: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    return opener * depth + b"1" + closer * depth


def review_with(obj: bytes) -> bytes:
    """An AdmissionReview whose pod's spec carries `obj` (bytes spliced in, so any depth serialises)."""
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":'
    return head + b'"CREATE","object":{"kind":"Pod","metadata":{"name":"p"},"spec":{"x":' + obj + b"}}}}"


def answer_error(path: str, answer: dict[str, Any]) -> str:
    """The error text of an extender or webhook answer (the webhook's must be a code-400 denial)."""
    if path == "/webhook":
        response = answer["response"]
        assert response["allowed"] is False and response["status"]["code"] == 400
        return str(response["status"]["message"])
    if path == "/filter":
        assert set(answer) == FILTER_KEYS
    return str(answer["Error"])


@pytest.mark.parametrize(
    "body",
    [review_with(bomb(900)), review_with(bomb(MAX_DEPTH, b'{"a":', b"}")), bomb(1000)],
    ids=["spec-900", "objects-just-over", "root-1000"],
)
def test_a_deep_review_is_invalid_json_with_a_message(body: bytes, client: FlaskClient) -> None:
    reply = client.post("/webhook", data=body, content_type="application/json")
    assert reply.status_code == 200
    message = answer_error("/webhook", orjson.loads(reply.data))
    assert message == f"invalid JSON: nested deeper than {MAX_DEPTH} levels"


def update_with(obj: bytes, sub_resource: str = "") -> bytes:
    """An UPDATE (or, with `sub_resource` binding, a CREATE of pods/binding) whose object carries `obj`."""
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"'
    if sub_resource:
        binding = b'{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"x":' + obj + b"}}"
        return head + b'CREATE","subResource":"' + sub_resource.encode() + b'","object":' + binding + b"}}"
    pod = b'{"kind":"Pod","metadata":{"name":"p"},"spec":{"x":' + obj + b"}}"
    return head + b'UPDATE","object":' + pod + b',"oldObject":' + pod + b"}}"


@pytest.mark.parametrize(
    "body",
    [update_with(bomb(900)), update_with(bomb(900, b'{"a":', b"}"), "binding")],
    ids=["update-900", "binding-900"],
)
def test_a_deep_update_is_answered_on_its_annotations(body: bytes, client: FlaskClient) -> None:
    """UPDATE and pods/binding read annotations only (nothing copies or diffs the pod), so their larger
    bodies are not walked for the nesting limit (issue 20): the rule's answer, here allowed."""
    reply = client.post("/webhook", data=body, content_type="application/json")
    assert reply.status_code == 200
    response = orjson.loads(reply.data)["response"]
    assert response["allowed"] is True and "patch" not in response


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/filter", bomb(1000)),
        (
            "/filter",
            b'{"Pod": {"metadata": {"annotations": ' + bomb(900, b'{"a":', b"}") + b'}}, "NodeNames": []}',
        ),
        ("/filter", b'{"Pod": {"spec": {"containers": [' + bomb(900) + b"]}}}"),
        ("/bind", b'{"PodName": ' + bomb(1000) + b"}"),
    ],
    ids=["filter-root", "filter-annotations", "filter-containers", "bind-field"],
)
def test_deep_extender_bodies_are_answered_without_walking_them(
    path: str, body: bytes, client: FlaskClient
) -> None:
    """The extender verbs never recurse into a body, so they skip the depth walk and still answer."""
    reply = client.post(path, data=body, content_type="application/json")
    assert reply.status_code == 200
    assert not answer_error(path, orjson.loads(reply.data)).startswith("internal error")


@pytest.mark.parametrize(
    ("value", "limit", "deeper"),
    [
        (1, 0, False),
        ([], 1, False),
        ([], 0, True),
        ([[]], 1, True),
        ({"a": {"b": [1]}}, 3, False),
        ({"a": {"b": [1]}}, 2, True),
        ({"a": 1, "b": [[[2]]], "c": "x"}, 4, False),
        ({"a": 1, "b": [[[[2]]]], "c": "x"}, 4, True),
        (orjson.loads(bomb(1000)), MAX_DEPTH, True),
    ],
    ids=["scalar", "one-level", "no-level", "two-levels", "at-limit", "over", "wide-at", "wide-over", "bomb"],
)
def test_nested_deeper_counts_container_levels(value: Any, limit: int, deeper: bool) -> None:
    assert nested_deeper(value, limit) is deeper


class BrokenStream(io.RawIOBase):
    """A request body whose reading fails the way a WSGI server's does; counts the reads.

    `wsgi.input_terminated` (Gunicorn sets it) makes Werkzeug hand the server's stream to the app as is.
    """

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.reads += 1
        raise self.error


@pytest.mark.parametrize("path", ["/filter", "/bind", "/webhook"])
@pytest.mark.parametrize(
    "error",
    [ValueError("Invalid chunk size: b'zz'"), TimeoutError("timed out"), ConnectionResetError("reset")],
    ids=["bad-chunk", "stall", "reset"],
)
def test_a_body_that_cannot_be_read_is_an_error_and_read_once(
    path: str, error: Exception, client: FlaskClient
) -> None:
    stream = BrokenStream(error)
    reply = client.post(
        path,
        content_type="application/json",
        environ_overrides={"wsgi.input": stream, "wsgi.input_terminated": True, "CONTENT_LENGTH": "100"},
    )
    assert reply.status_code == 200
    message = answer_error(path, orjson.loads(reply.data))
    assert message.startswith("could not read the request body:") and str(error) in message
    assert stream.reads == 1


def test_an_empty_nodes_list_is_an_error(client: FlaskClient) -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {
        "nvidia.com/gpu": "1"}}}]}}  # fmt: skip
    body = {"Pod": pod, "Nodes": {}, "NodeNames": ["gpu-1"]}
    answer = orjson.loads(
        client.post("/filter", data=orjson.dumps(body), content_type="application/json").data
    )
    assert answer["Error"] == "extender args carry Nodes without any node object"
    assert answer["NodeNames"] is None and answer["Nodes"] is None


@pytest.mark.parametrize(
    ("path", "content_type"),
    [("/webhook", "text/plain"), ("/healthz", "application/json"), ("/nowhere", "application/json")],
    ids=["webhook-wrong-type", "get-route", "unknown-route"],
)
def test_a_body_left_unread_is_read_to_its_end_within_the_cap(
    path: str, content_type: str, client: FlaskClient
) -> None:
    data = b'{"pad": "' + b"x" * 40_000 + b'"}'
    stream = io.BytesIO(data)
    reply = client.post(
        path,
        content_type=content_type,
        environ_overrides={"wsgi.input": stream, "CONTENT_LENGTH": str(len(data))},
    )
    assert reply.status_code in (200, 404, 405)
    assert stream.tell() == len(data)


@pytest.mark.parametrize(
    "names",
    [["gpu-1", 7], ["gpu-1", None], [["gpu-1"]], "gpu-1", {"gpu-1": True}],
    ids=["a-number", "a-null", "a-nested-list", "a-string", "an-object"],
)
def test_node_names_must_be_a_list_of_strings(names: Any, client: FlaskClient) -> None:
    body = {"Pod": {"metadata": {"name": "p"}}, "NodeNames": names}
    answer = orjson.loads(
        client.post("/filter", data=orjson.dumps(body), content_type="application/json").data
    )
    assert answer["Error"] == "json: cannot unmarshal NodeNames: expected a list of strings"


class CountingStream(io.BytesIO):
    """A request body that counts the reads made once it is at its end."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.reads_at_end = 0

    def read(self, size: int | None = -1) -> bytes:
        if self.tell() == len(self.getbuffer()):
            self.reads_at_end += 1
        return super().read(size)


@pytest.mark.parametrize(
    ("method", "path", "data"),
    [
        ("POST", "/filter", b'{"Pod":{"metadata":{"name":"p"}},"NodeNames":["gpu-1"]}'),
        ("POST", "/webhook", b'{"kind":"AdmissionReview"}'),
        ("GET", "/healthz", b""),
    ],
    ids=["filter-read-whole", "webhook-read-whole", "get-without-body"],
)
def test_a_body_read_to_its_end_is_not_read_again(
    method: str, path: str, data: bytes, client: FlaskClient
) -> None:
    """The after-request drain skips a body the route read whole and a request without one (issue 20)."""
    stream = CountingStream(data)
    environ = {"wsgi.input": stream, "wsgi.input_terminated": True}
    if data:
        environ["CONTENT_LENGTH"] = str(len(data))
    reply = client.open(path, method=method, content_type="application/json", environ_overrides=environ)
    assert reply.status_code == 200
    assert stream.tell() == len(data) and stream.reads_at_end == 0
