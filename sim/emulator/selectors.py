"""Label and field selectors with kube-apiserver's syntax and semantics.

Parsed once per request into frozen matchers; list, watch (including the ADDED/DELETED transitions when an
object starts or stops matching) and the test hooks all match through these. Syntax errors and unsupported
field labels are 400 BadRequest, as on a real server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.emulator.errors import bad_request

_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(\s*((?:{_VALUE}\s*,\s*)*{_VALUE})\s*\)$")
_CMP_RE = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_EXISTS_RE = re.compile(rf"^(!?)\s*({_KEY})$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op == "exists":
            return value is not None
        if self.op == "!exists":
            return value is None
        if self.op in ("=", "in"):
            return value is not None and value in self.values
        return value is None or value not in self.values


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        present = labels or {}
        return all(r.matches(present) for r in self.requirements)


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms]


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return LabelSelector()
    requirements: list[Requirement] = []
    for term in _split_terms(text):
        if match := _SET_RE.match(term):
            values = frozenset(v.strip() for v in match.group(3).split(","))
            requirements.append(Requirement(match.group(1), match.group(2), values))
        elif match := _CMP_RE.match(term):
            op = "!=" if match.group(2) == "!=" else "="
            requirements.append(Requirement(match.group(1), op, frozenset({match.group(3)})))
        elif match := _EXISTS_RE.match(term):
            requirements.append(Requirement(match.group(2), "!exists" if match.group(1) else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: {term!r} in label selector {text!r}")
    return LabelSelector(tuple(requirements))


def field_value(obj: Mapping[str, Any], label: str) -> str:
    """The string kube-apiserver compares a field selector against; missing fields are ""."""
    value: Any = obj
    for part in label.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class FieldRequirement:
    label: str
    value: str
    negate: bool


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, r.label) == r.value) != r.negate for r in self.requirements)


def parse_field_selector(text: str | None, allowed: frozenset[str]) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector()
    requirements: list[FieldRequirement] = []
    for term in text.split(","):
        term = term.strip()
        for op in ("!=", "==", "="):
            label, sep, value = term.partition(op)
            if sep:
                break
        else:
            raise bad_request(f"invalid selector: {text!r}; can't understand {term!r}")
        label = label.strip()
        if label not in allowed:
            raise bad_request(f"field label not supported: {label}")
        requirements.append(FieldRequirement(label, value.strip(), op == "!="))
    return FieldSelector(tuple(requirements))
