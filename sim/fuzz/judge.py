"""What counts as a finding in an answer of our service, and the tally the fuzz report is built from.

An answer is a finding when it is a server error (HTTP 5xx; `/readyz`'s 503 "not ready: ..." is its
contract, not an error), an internal error (an HTTP 200 whose Error or review message says an unexpected
exception was caught: the contract held, the code did not), or an unclear error (an error without a
message: an empty 400 body, a /filter answer that places nothing and says nothing, a denied review without
`status.message`, or an extender/webhook answer that is not JSON). Timeouts, dropped connections and
crashes are counted by the runner. Each category keeps its first few examples, truncated.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import orjson

from sim.fuzz.gen import Case

EXTENDER = ("/filter", "/bind", "/webhook")
INTERNAL = "internal error"
CATEGORIES = ("server_errors", "internal_errors", "unclear_errors", "timeouts", "connection_errors")


def _candidates(case: Case) -> bool:
    """Did the /filter request name any node (so an empty answer owes reasons)?"""
    try:
        body = orjson.loads(case.body or b"")
    except orjson.JSONDecodeError:
        return False
    if not isinstance(body, dict):
        return False
    names, nodes = body.get("NodeNames"), body.get("Nodes")
    items = nodes.get("Items") if isinstance(nodes, dict) else None
    return bool(names) or bool(items)


def _filter_finding(case: Case, answer: dict[str, Any]) -> tuple[str, str] | None:
    error = answer.get("Error")
    if not isinstance(error, str):
        return "unclear_errors", "Error is not a string"
    if error:
        return ("internal_errors", error) if error.startswith(INTERNAL) else None
    nodes = answer.get("Nodes")
    placed = bool(answer.get("NodeNames")) or (isinstance(nodes, dict) and bool(nodes.get("items")))
    failed = answer.get("FailedNodes") or {}
    if not isinstance(failed, dict) or any(not reason for reason in failed.values()):
        return "unclear_errors", "a failed node without a reason"
    if not placed and not failed and _candidates(case):
        return "unclear_errors", "nothing placed, no Error and no FailedNodes"
    return None


def _webhook_finding(answer: dict[str, Any]) -> tuple[str, str] | None:
    response = answer.get("response")
    if not isinstance(response, dict) or not isinstance(response.get("allowed"), bool):
        return "unclear_errors", "no response.allowed"
    status = response.get("status") or {}
    message = status.get("message") if isinstance(status, dict) else None
    if not response["allowed"] and not message:
        return "unclear_errors", "denied without status.message"
    if isinstance(message, str) and message.startswith(INTERNAL):
        return "internal_errors", message
    return None


def judge(case: Case, status: int, body: bytes) -> tuple[str, str] | None:
    """(category, detail) when the answer to `case` is a finding, else None."""
    if status == 0:  # bytes that are not HTTP (raw-http): closing the connection is the answer
        return None
    if status >= 500:
        if case.path == "/readyz" and status == 503 and body.startswith(b"not ready:"):
            return None
        return "server_errors", f"HTTP {status}"
    path = case.path.split("?")[0]
    if status >= 400:
        return ("unclear_errors", f"HTTP {status} with an empty body") if not body.strip() else None
    if case.method not in ("POST", "RAW") or path not in EXTENDER:
        return None
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return "unclear_errors", f"HTTP {status} answer is not JSON"
    if not isinstance(answer, dict):
        return "unclear_errors", "answer is not a JSON object"
    if path == "/filter":
        return _filter_finding(case, answer)
    if path == "/bind":
        error = answer.get("Error")
        if not isinstance(error, str):
            return "unclear_errors", "Error is not a string"
        return ("internal_errors", error) if error.startswith(INTERNAL) else None
    return _webhook_finding(answer)


def _cut(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else f"{text[:limit]}...(+{len(text) - limit} chars)"


class Tally:
    """Thread-safe counters and the first `keep` examples of each finding category."""

    def __init__(self, keep: int = 5) -> None:
        self.keep = keep
        self.requests = 0
        self.by_kind: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.findings: Counter[str] = Counter({c: 0 for c in CATEGORIES})
        self.examples: dict[str, list[dict[str, str]]] = {}
        self.seconds: dict[str, float] = {}  # total time per kind
        self.slowest: dict[str, float] = {}  # slowest answer per kind
        self._lock = threading.Lock()

    def timed(self, case: Case, seconds: float) -> None:
        with self._lock:
            self.seconds[case.kind] = self.seconds.get(case.kind, 0.0) + seconds
            self.slowest[case.kind] = max(seconds, self.slowest.get(case.kind, 0.0))

    def answered(self, case: Case, status: int, body: bytes) -> tuple[str, str] | None:
        finding = judge(case, status, body)
        with self._lock:
            self.requests += 1
            self.by_kind[case.kind] += 1
            self.statuses[str(status)] += 1
        if finding is not None:
            self.found(finding[0], case, finding[1], body.decode("utf-8", "replace"))
        return finding

    def failed(self, case: Case, category: str, detail: str) -> None:
        with self._lock:
            self.requests += 1
            self.by_kind[case.kind] += 1
        self.found(category, case, detail, "")

    def found(self, category: str, case: Case | None, detail: str, answer: str) -> None:
        with self._lock:
            self.findings[category] += 1
            examples = self.examples.setdefault(category, [])
            if len(examples) < self.keep:
                example = {"detail": _cut(detail), "answer": _cut(answer)}
                if case is not None:
                    example.update(kind=case.kind, request=case.describe())
                examples.append(example)

    def as_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self.requests,
                **{c: self.findings[c] for c in CATEGORIES},
                "by_kind": dict(sorted(self.by_kind.items())),
                "status_codes": dict(sorted(self.statuses.items())),
                "seconds_by_kind": {k: round(v, 2) for k, v in sorted(self.seconds.items())},
                "slowest_by_kind": {k: round(v, 3) for k, v in sorted(self.slowest.items())},
                "examples": {k: list(v) for k, v in sorted(self.examples.items())},
            }
