"""The answer of /bind and how its steps fail, shared by the Bind use case (app/bind/usecase.py) and its
bounded waits (app/bind/wait.py): the outcome, the bounded `reason` labels, and the exceptions a step
raises."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The bounded `reason` of a bind answer (metric label and decision log): where it failed, never the text.
BOUND_OK = "ok"
NOT_LEADER = "not-leader"
POD_LOOKUP = "pod-lookup"
POD_RECREATED = "pod-recreated"
NOT_OURS = "adopted-pod"  # a pod of an adopted scheduler name: counted, never bound by us
NO_UID = "bad-request"  # the request carries no PodUID (the route's label for malformed requests)
NOT_SCHEDULABLE = "not-bindable"  # bound elsewhere, terminating, or not our scheduler's
INVALID_REQUEST = "invalid-request"
NOT_FILTERED = "not-filtered-here"
NODE_LOOKUP = "node-lookup"
RECHECK = "recheck-failed"
WRITE_PENDING = "write-pending"
LOCK_CONTENDED = "lock-contention"
LOCK_ERROR = "lock-error"
PATCH_FAILED = "patch-failed"
BINDING_FAILED_REASON = "binding-failed"
BINDING_UNKNOWN = "binding-unknown"
INTERNAL = "internal"  # an exception of no expected type (a bug, SQLite busy past its timeout, a bad answer)


@dataclass
class BindOutcome:
    error: str = ""
    phases: dict[str, float] = field(default_factory=dict)
    lock_waited: float = 0.0
    lock_contended: bool = False
    took_over: str = ""
    reason: str = BOUND_OK  # one of the bounded reasons above


class Failed(Exception):
    """A step of the bind failed: `reason` labels it, `event` is the Warning's text ("" for none)."""

    def __init__(
        self, message: str, reason: str, *, event: str | None = None, compensate: bool = True
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.event = message if event is None else event
        self.compensate = compensate  # False: the binding may have happened, keep the lock and reservation


class AlreadyBound(Exception):
    """The pod is bound to the requested node already: the bind answers success and writes nothing.
    `pod` is the read that showed it bound (what decides which of our locks its device plugin still needs)."""

    def __init__(self, pod: Mapping[str, Any]) -> None:
        super().__init__("already bound")
        self.pod = pod
