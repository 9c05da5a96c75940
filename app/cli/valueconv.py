"""The converters of the HAMi values table (app/cli/hamivalues.py): one HAMi value -> our values.

Why it exists: a HAMi value is often not ours as it is (a string "false" where we take a boolean, image
registry and repository in two values where we take one, kube-scheduler flags where we take a verbosity),
and a value we cannot take must say why instead of producing a values file our chart's schema rejects.
Each converter returns `{our dotted path: value}` or raises `Unconvertible` with the reason; `merged` is
HAMi's values (its defaults overlaid with the user's file), for the converters that need a neighbour.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.core.policy import BINPACK, MUTEX, NUMA, SPREAD, TOPOLOGY, policy_names


class Unconvertible(ValueError):
    """This value has no equivalent here (the message says why)."""


Merged = Mapping[str, Any]
Convert = Callable[[Any, Merged], dict[str, Any]]
SCHEDULER, DEVICES, OTHER = "scheduler", "devices", "other"  # the parts of HAMi's values a row belongs to
PLUGIN = "unchanged: HAMi's device plugin and its DaemonSet stay in HAMi's release"
_MISSING = object()


@dataclass(frozen=True)
class Row:
    """One value of HAMi's chart and what it becomes here (app/cli/hamivalues.py)."""

    hami: str  # a value of HAMi's chart (dotted); a trailing `*` matches every value whose path starts so
    ours: str  # what it becomes here ("—": nothing)
    note: str
    part: str = SCHEDULER
    to: Convert | None = None
    hami_default: Any = _MISSING
    keep: str = ""  # set: HAMi's default is not carried over, ours stays, for this reason

    def matches(self, path: str) -> bool:
        if self.hami.endswith("*"):
            return path.startswith(self.hami[:-1])
        return path == self.hami


def get_path(values: Mapping[str, Any], path: str) -> Any:
    current: Any = values
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return None
        current = current[part]
    return current


def same(ours: str, kind: type | tuple[type, ...] = str, what: str = "a string") -> Convert:
    """The value as it is, if it has the type our schema takes."""

    def convert(value: Any, _merged: Merged) -> dict[str, Any]:
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise Unconvertible(f"expected {what}, got {value!r}")
        return {ours: value}

    return convert


def optional_map(ours: str) -> Convert:
    """A map (labels, annotations, a selector): nothing when empty."""

    def convert(value: Any, _merged: Merged) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            raise Unconvertible("expected a map of strings")
        return {ours: dict(value)} if value else {}

    return convert


def optional_list(ours: str) -> Convert:
    def convert(value: Any, _merged: Merged) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, list):
            raise Unconvertible("expected a list")
        return {ours: list(value)} if value else {}

    return convert


def boolean(ours: str) -> Convert:
    """HAMi writes some booleans as strings ("false")."""

    def convert(value: Any, _merged: Merged) -> dict[str, Any]:
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise Unconvertible(f"expected true or false, got {value!r}")
        return {ours: text == "true"}

    return convert


def integer(ours: str, low: int = 0) -> Convert:
    def convert(value: Any, _merged: Merged) -> dict[str, Any]:
        text = str(value).strip()
        if isinstance(value, bool) or not text.lstrip("-").isdigit() or int(text) < low:
            raise Unconvertible(f"expected an integer of at least {low}, got {value!r}")
        return {ours: int(text)}

    return convert


def number(ours: str) -> Convert:
    def convert(value: Any, _merged: Merged) -> dict[str, Any]:
        try:
            found = float(value)
        except (TypeError, ValueError):
            raise Unconvertible(f"expected a number, got {value!r}") from None
        if isinstance(value, bool) or not found > 0:
            raise Unconvertible(f"expected a positive number, got {value!r}")
        return {ours: int(found) if found.is_integer() else found}

    return convert


def choice(ours: str, *allowed: str) -> Convert:
    def convert(value: Any, _merged: Merged) -> dict[str, Any]:
        if value not in allowed:
            raise Unconvertible(f"expected one of {', '.join(allowed)}, got {value!r}")
        return {ours: value}

    return convert


def gpu_policy(value: Any, _merged: Merged) -> dict[str, Any]:
    known = (BINPACK, SPREAD, MUTEX, NUMA, TOPOLOGY)
    if not isinstance(value, str) or not policy_names(value) or not set(policy_names(value)) <= set(known):
        raise Unconvertible(f"expected a comma list of {', '.join(known)}, got {value!r}")
    return {"defaultSchedulerPolicy.gpuSchedulerPolicy": value}


def pull_secrets(value: Any, _merged: Merged) -> dict[str, Any]:
    """HAMi lists Secret names (or `{name: ...}` objects); ours takes `{name: ...}` objects."""
    if value is None:
        return {}
    names = (
        [item.get("name") if isinstance(item, Mapping) else item for item in value]
        if isinstance(value, list)
        else [None]
    )
    if not all(isinstance(name, str) and name for name in names):
        raise Unconvertible("expected a list of Secret names")
    return {"imagePullSecrets": [{"name": name} for name in names]} if names else {}


def kube_scheduler_image(_value: Any, merged: Merged) -> dict[str, Any]:
    image = get_path(merged, "scheduler.kubeScheduler.image") or {}
    registry, repository = str(image.get("registry") or ""), str(image.get("repository") or "")
    if not repository:
        raise Unconvertible("no repository")
    return {"kubeScheduler.image.repository": f"{registry}/{repository}" if registry else repository}


_VERBOSITY = re.compile(r"^--?v=(\d+)$")


def _flags(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(arg, str) for arg in value):
        raise Unconvertible("expected a list of flags")
    return list(value)


def kube_scheduler_args(value: Any, _merged: Merged) -> dict[str, Any]:
    """`-v=N` -> the verbosity; `--config` is the chart's own; the rest are extra flags."""
    result: dict[str, Any] = {}
    extra = []
    for arg in _flags(value):
        verbosity = _VERBOSITY.match(arg)
        if verbosity:
            result["kubeScheduler.verbosity"] = int(verbosity.group(1))
        elif not arg.startswith("--config"):
            extra.append(arg)
    if extra:
        result["kubeScheduler.extraArgs"] = extra
    return result


def log_level(value: Any, _merged: Merged) -> dict[str, Any]:
    """The extender's `--debug` and `-v=N` -> our log level; other flags have no equivalent."""
    flags = _flags(value)
    unknown = [arg for arg in flags if arg != "--debug" and not _VERBOSITY.match(arg)]
    if unknown:
        raise Unconvertible(f"flags without equivalent: {' '.join(unknown)} (logLevel covers --debug and -v)")
    levels = [int(m.group(1)) for m in map(_VERBOSITY.match, flags) if m]
    return {"logLevel": "DEBUG" if "--debug" in flags or any(level >= 4 for level in levels) else "INFO"}


def reinvocation(value: Any, _merged: Merged) -> dict[str, Any]:
    if value != "Never":
        raise Unconvertible("our webhook never asks to be reinvoked (its mutation is idempotent)")
    return {}


def nvidia_name(key: str) -> Convert:
    return same(f"deviceConfig.nvidia.{key}", str, "a resource name")
