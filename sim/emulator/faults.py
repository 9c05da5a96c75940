"""Fault injection: rules that make matching requests fail the way a real control plane fails.

A rule matches on the Kubernetes view of a request (verb, resource, subresource, namespace, name) and/or the
HTTP view (method, path regex), fires with a probability and at most ``count`` times, and does one of:

- ``error``: answer ``status`` (409, 429, 500, 503, 504, ...) with a Status body, without doing the work;
- ``delay``: sleep ``delay`` seconds, then carry on (every matching delay applies, before any other action);
- ``lost_response``: do the work, then close the connection without answering;
- ``drop_watch``: end a watch after ``after_events`` events, by closing the connection (or cleanly, when
  ``graceful``);
- ``expire``: answer a watch with an ERROR event 410 Expired, as kube-apiserver does when the watch's
  resourceVersion left its window (after a compaction or a restart of its watch cache): the client must
  list again (a forced relist).

``user_agent`` (a regular expression searched in the User-Agent header) aims a rule at one client: our
registration worker and Gunicorn say who they are (app/k8s/client.py), so a chaos run can hold up the
leader's worker alone.

Counters per rule and in total survive ``clear()`` of the rules so a chaos run can report ``faults_injected``.
"""

from __future__ import annotations

import dataclasses
import random
import re
import threading
from dataclasses import dataclass
from typing import Any

from sim.emulator.errors import STALE, ApiError, bad_request
from sim.emulator.routing import Route

ACTIONS = ("error", "delay", "lost_response", "drop_watch", "expire")
WATCH_ONLY = ("drop_watch", "expire")


@dataclass(frozen=True)
class FaultRule:
    action: str
    status: int = 500
    message: str = ""
    delay: float = 0.0
    after_events: int = 0
    graceful: bool = False
    verb: str | None = None
    resource: str | None = None
    subresource: str | None = None  # None: any; "": the main resource only
    namespace: str | None = None
    name: str | None = None
    method: str | None = None
    path: str | None = None  # regular expression searched in the URL path
    user_agent: str | None = None  # regular expression searched in the User-Agent header
    probability: float = 1.0
    count: int | None = None  # fire at most this many times

    @classmethod
    def from_json(cls, data: Any) -> FaultRule:
        if not isinstance(data, dict):
            raise bad_request("a fault rule must be a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise bad_request(f"unknown fault rule fields: {sorted(unknown)}")
        try:
            rule = cls(**data)
        except TypeError as error:
            raise bad_request(f"invalid fault rule: {error}") from error
        if rule.action not in ACTIONS:
            raise bad_request(f"fault action must be one of {ACTIONS}")
        if not 0.0 <= rule.probability <= 1.0:
            raise bad_request("probability must be within [0, 1]")
        for field, pattern in (("path", rule.path), ("user_agent", rule.user_agent)):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as error:
                    raise bad_request(f"invalid {field} regex: {error}") from error
        return rule

    def matches(self, method: str, path: str, route: Route | None, user_agent: str = "") -> bool:
        if self.method is not None and self.method.upper() != method:
            return False
        if self.path is not None and not re.search(self.path, path):
            return False
        if self.user_agent is not None and not re.search(self.user_agent, user_agent):
            return False
        wants_route = (self.verb, self.resource, self.subresource, self.namespace, self.name) != (None,) * 5
        if not wants_route:
            return True
        if route is None:
            return False
        return (
            (self.verb is None or self.verb == route.verb)
            and (self.resource is None or self.resource in (route.rtype.key, route.rtype.plural))
            and (self.subresource is None or self.subresource == route.subresource)
            and (self.namespace is None or self.namespace == route.namespace)
            and (self.name is None or self.name == route.name)
        )

    def error(self, route: Route | None) -> ApiError:
        name = route.name if route else ""
        kind = route.rtype.plural if route else ""
        if self.status == 409:
            target = f'{kind} "{name}"' if route else "the object"
            message = self.message or f"Operation cannot be fulfilled on {target}: {STALE}"
            return ApiError(409, message, name=name, kind=kind)
        if self.status == 429:
            message = self.message or "Too many requests, please try again later."
            return ApiError(429, message, retry_after=1)
        defaults = {
            500: "Internal error occurred: injected fault",
            503: "The server is currently unable to handle the request (injected fault)",
            504: "Timeout: request did not complete within requested timeout - context deadline exceeded",
        }
        return ApiError(
            self.status, self.message or defaults.get(self.status, "injected fault"), name=name, kind=kind
        )


@dataclass(frozen=True)
class Fault:
    """The combined effect of the rules that fired for one request."""

    delay: float = 0.0
    error: ApiError | None = None
    lost_response: bool = False
    drop_watch: FaultRule | None = None
    expire: bool = False
    fired: tuple[str, ...] = ()


NO_FAULT = Fault()


@dataclass
class _Slot:
    id: int
    rule: FaultRule
    fired: int = 0


class FaultInjector:
    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self._slots: list[_Slot] = []
        self._next_id = 1
        self._injected = 0
        self._by_action: dict[str, int] = {}

    def add(self, rule: FaultRule) -> int:
        with self._lock:
            slot = _Slot(self._next_id, rule)
            self._next_id += 1
            self._slots.append(slot)
            return slot.id

    def remove(self, rule_id: int) -> bool:
        with self._lock:
            before = len(self._slots)
            self._slots = [s for s in self._slots if s.id != rule_id]
            return len(self._slots) != before

    def clear(self) -> int:
        with self._lock:
            cleared = len(self._slots)
            self._slots = []
            return cleared

    def reset(self, seed: int | None = None) -> None:
        with self._lock:
            self._slots = []
            self._random = random.Random(seed)
            self._injected = 0
            self._by_action = {}

    @property
    def injected(self) -> int:
        return self._injected

    def report(self) -> dict[str, Any]:
        with self._lock:
            rules = [{"id": s.id, "fired": s.fired, **dataclasses.asdict(s.rule)} for s in self._slots]
            return {"faults_injected": self._injected, "by_action": dict(self._by_action), "rules": rules}

    def decide(self, method: str, path: str, route: Route | None, user_agent: str = "") -> Fault:
        if not self._slots:
            return NO_FAULT
        delay, error, lost, drop, expire, fired = 0.0, None, False, None, False, []
        terminated = False  # every matching delay applies; of the other actions, the first that fires wins
        with self._lock:
            for slot in self._slots:
                rule = slot.rule
                if rule.count is not None and slot.fired >= rule.count:
                    continue
                if terminated and rule.action != "delay":
                    continue
                if rule.action in WATCH_ONLY and (route is None or route.verb != "watch"):
                    continue
                if not rule.matches(method, path, route, user_agent):
                    continue
                if rule.probability < 1.0 and self._random.random() >= rule.probability:
                    continue
                slot.fired += 1
                self._injected += 1
                self._by_action[rule.action] = self._by_action.get(rule.action, 0) + 1
                fired.append(f"{rule.action}#{slot.id}")
                if rule.action == "delay":
                    delay += rule.delay
                    continue
                terminated = True
                if rule.action == "error":
                    error = rule.error(route)
                elif rule.action == "lost_response":
                    lost = True
                elif rule.action == "expire":
                    expire = True
                else:
                    drop = rule
        return Fault(delay, error, lost, drop, expire, tuple(fired))
