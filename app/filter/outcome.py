"""The answer of /filter, shared by the Filter use case (app/filter/usecase.py) and its Nodes path
(app/filter/nodespath.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.core.model import PodDevices
from app.state.podgroups import Quorum


@dataclass
class FilterOutcome:
    node_names: list[str] | None = None
    nodes: list[dict[str, Any]] | None = None
    failed: Mapping[str, str] | None = None
    unresolvable: Mapping[str, str] | None = None  # FailedAndUnresolvableNodes: preemption cannot help
    error: str = ""
    denial: str = ""  # a short reason label for metrics when the pod was not placed
    phases: dict[str, float] = field(default_factory=dict)
    passthrough: bool = False  # the pod asks for no managed device: not ours to decide
    devices: PodDevices | None = None  # the allocation written to the pod (placed)
    score: float | None = None  # the chosen node's score (placed)
    gang: str = ""  # a gang member's plan: planned or refused (app/filter/gang.py); "" for other pods
    quorum: Quorum | None = None  # a planned gang member's: its allocation write waits for the quorum
