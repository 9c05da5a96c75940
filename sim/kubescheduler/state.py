"""What the simulated kube-scheduler (sim/kubescheduler/scheduler.py) is configured with and keeps: its
settings, each pod's place in its queues (active, in flight, binding, backoff, unschedulable, rejected) with
its attempt counts, the run's statistics, and kube-scheduler's FitError text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SchedulerConfig:
    scheduler_name: str = "hami-scheduler"
    max_unschedulable: int = 5
    max_errors: int = 10
    unschedulable_timeout: float = 5.0
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    bind_workers: int = 16
    percentage_of_nodes_to_score: int = 0
    default_profile: bool = False


@dataclass
class PodState:
    key: str
    first_seen: float
    priority: int = 0
    where: str = "active"  # active | inflight | binding | backoff | unschedulable | rejected
    attempts: int = 0
    unschedulable: int = 0
    errors: int = 0
    ready_at: float = 0.0
    parked_at: float = 0.0
    parked_event: int = 0
    reason: str = ""
    condition: str = ""


@dataclass
class SchedulerStats:
    counters: Counter[str] = field(default_factory=Counter)
    filter_ms: list[float] = field(default_factory=list)
    bind_ms: list[float] = field(default_factory=list)
    e2e_ms: list[float] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)  # error answers by message shape
    first_seen_wall: float = 0.0
    last_bound_wall: float = 0.0


def fit_error(total: int, failed: Mapping[str, str]) -> str:
    """kube-scheduler's FitError text: `0/N nodes are available: <count> <reason>, ...`."""
    counts = Counter(failed.values())
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return (
        f"0/{total} nodes are available: {', '.join(parts)}." if parts else f"0/{total} nodes are available."
    )
