"""The chaos storm's seeded plan: one seed, one storm — the same pods in the same order with the same gaps,
the same pods deleted and recreated at the same stage, the leader killed after the same number of
submitted pods, and the same fault rules (faults then fire from the emulator's own seeded generator, but
which requests they hit depends on timing).

Fault rules (`fault_rules`) cover every path our processes use: pods (get, list, patch incl. status,
binding), nodes (get, list, patch: the node lock and the handshakes), events, leases, resource quotas, and
every watch. Each group fires with probability `rate` per request, split over its actions (a group of
rules with shares s_i fires each with 1 - (1 - rate)^s_i, so that one of them fires with probability
`rate`): errors without doing the work (409, 429, 500, 503, 504), lost responses after the work was done,
slow answers (1 s; 2 s on leases, beyond the elector's 1.5 s request timeout) and dropped watches (at once,
after a few events, or cleanly). A watch is one request that lives for a minute, so at the plain rate it
would hardly ever be cut: watches are cut with probability 4 x rate (at most 1/2) each time one opens.
409 Conflict is injected only where a real server can answer it: on writes with a resourceVersion
precondition (the node lock's CAS, Lease updates); a merge patch of a pod without one never conflicts.
Pod `create` and `delete` stay fault-free: only the storm (the users) creates and deletes pods, and our
processes never do.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sim.chaos.stormfaults import LongFault
from sim.workload.mix import DemoPod, demo_pods

STAGES = ("pending", "assumed", "bound")
WATCH_FACTOR = 4  # a watch is one request that lives a minute: cut at 4 x the rate each time one opens
Rule = dict[str, Any]

_E409: Rule = {"action": "error", "status": 409}
_E429: Rule = {"action": "error", "status": 429}
_E500: Rule = {"action": "error", "status": 500}
_E503: Rule = {"action": "error", "status": 503}
_E504: Rule = {"action": "error", "status": 504}
_LOST: Rule = {"action": "lost_response"}
_SLOW: Rule = {"action": "delay", "delay": 1.0}
_TIMEOUT: Rule = {"action": "delay", "delay": 2.0}

FAULT_GROUPS: tuple[tuple[Rule, tuple[tuple[float, Rule], ...]], ...] = (
    ({"resource": "pods", "verb": "get"}, ((0.35, _E500), (0.2, _E503), (0.15, _E504), (0.3, _SLOW))),
    ({"resource": "pods", "verb": "list"}, ((0.5, _E500), (0.3, _E503), (0.2, _SLOW))),
    ({"resource": "pods", "verb": "patch"}, ((0.3, _E500), (0.2, _E503), (0.1, _E504), (0.4, _LOST))),
    (
        {"resource": "pods", "subresource": "binding", "verb": "create"},
        ((0.3, _E500), (0.2, _E503), (0.1, _E504), (0.4, _LOST)),
    ),
    ({"resource": "nodes", "verb": "get"}, ((0.4, _E500), (0.3, _E503), (0.3, _SLOW))),
    ({"resource": "nodes", "verb": "list"}, ((0.5, _E500), (0.5, _E503))),
    ({"resource": "nodes", "verb": "patch"}, ((0.3, _E409), (0.2, _E500), (0.2, _E503), (0.3, _LOST))),
    ({"resource": "events", "verb": "create"}, ((0.3, _E500), (0.2, _E503), (0.2, _E429), (0.3, _LOST))),
    ({"resource": "leases"}, ((0.3, _E500), (0.2, _E503), (0.1, _E409), (0.2, _LOST), (0.2, _TIMEOUT))),
    ({"resource": "resourcequotas", "verb": "list"}, ((0.5, _E500), (0.5, _E503))),
    (
        {"verb": "watch"},
        (
            (0.4, {"action": "drop_watch", "after_events": 0}),
            (0.3, {"action": "drop_watch", "after_events": 20}),
            (0.3, {"action": "drop_watch", "after_events": 200, "graceful": True}),
        ),
    ),
)


def fault_rules(rate: float) -> list[Rule]:
    """The emulator fault rules of a storm at `rate` (0 disables faults)."""
    if not 0.0 <= rate < 1.0:
        raise ValueError("the fault rate must be in [0, 1)")
    if rate == 0.0:
        return []
    rules = []
    for matcher, actions in FAULT_GROUPS:
        group = min(0.5, WATCH_FACTOR * rate) if matcher.get("verb") == "watch" else rate
        for share, action in actions:
            probability = round(1.0 - (1.0 - group) ** share, 6)
            rules.append({**matcher, **action, "probability": probability})
    return rules


@dataclass(frozen=True)
class Recreation:
    """Delete `key` once it reached `stage`, then create it again under the same name (a new UID)."""

    key: str
    stage: str


@dataclass(frozen=True)
class Plan:
    seed: int
    pods: tuple[DemoPod, ...]
    gaps: tuple[float, ...]  # seconds to wait before submitting each pod
    admit_via: tuple[int, ...]  # the replica each pod's admission review goes to first
    kills: tuple[int, ...]  # kill the leader once this many pods were submitted
    recreations: tuple[Recreation, ...]
    faults: tuple[Rule, ...]
    long_faults: tuple[LongFault, ...] = ()
    two_leaders: tuple[float, ...] = ()  # shares of the submissions at which a two-leader fault starts

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.pods]


def kill_points(rng: random.Random, pods: int, kills: int) -> tuple[int, ...]:
    """One kill in each of `kills` equal slices of the middle 70 % of the submissions."""
    low, width = 0.15, 0.70 / max(1, kills)
    return tuple(int(pods * (low + width * (i + rng.random()))) for i in range(kills))


def choose_recreations(rng: random.Random, pods: Sequence[DemoPod], count: int) -> tuple[Recreation, ...]:
    """`count` pods that can fit somewhere, cycling through the stages."""
    fitting = [p.key for p in pods if p.kind != "unfit"]
    chosen = rng.sample(fitting, min(count, len(fitting)))
    return tuple(Recreation(key, STAGES[i % len(STAGES)]) for i, key in enumerate(chosen))


WORKER_DOWN = 2.0  # seconds a restarted worker container stays down (the kubelet's first restart is at once)
ROUND: tuple[tuple[str, str, str], ...] = (  # (kind, resource, target) of one round of long faults, in order
    ("watch-delay", "pods", "leader"),  # first: pods created while it lags are what finding 1 lost
    ("watch-delay", "nodes", "leader"),
    ("relist", "pods", "leader"),
    ("relist", "nodes", "standby"),
    (
        "worker-restart",
        "",
        "standby",
    ),  # after the lags (sim.chaos.stormfaults waits): fresh informers end them
    ("worker-restart", "", "leader"),
)


def long_fault_plan(rng: random.Random, rounds: int, lag: float) -> tuple[LongFault, ...]:
    """`rounds` x ROUND, each round in its own slice of the middle 80 % of the submissions at seeded
    points; watches and relists held `lag` seconds (sim.chaos.stormfaults)."""
    faults = []
    width = 0.8 / max(1, rounds)
    for index in range(rounds):
        low = 0.1 + index * width
        points = sorted(round(low + width * rng.random(), 3) for _ in ROUND)
        for at, (kind, resource, target) in zip(points, ROUND, strict=True):
            seconds = WORKER_DOWN if kind == "worker-restart" else lag
            faults.append(LongFault(kind, at, seconds, target, resource))
    return tuple(faults)


def two_leader_points(seed: int, count: int) -> tuple[float, ...]:
    """One two-leader fault (sim.chaos.twoleaders) in each of `count` equal slices of the submissions
    from 15 to 55 %, at seeded points (their own generator: the rest of a seed's plan does not change).
    Early enough that pods keep arriving through the stall and the retries (a fault at 79 % left the new
    leader ~10 s of arrivals, and on a loaded machine sometimes none)."""
    rng = random.Random(f"chaos-two-leaders-{seed}")
    width = 0.4 / max(1, count)
    return tuple(round(0.15 + width * (i + rng.random()), 3) for i in range(count))


def make_plan(
    seed: int,
    pods: int,
    *,
    kills: int,
    replicas: int,
    arrival_rate: float,
    recreate: int,
    fault_rate: float,
    long_faults: int = 0,
    lag: float = 45.0,
    vendors: Sequence[tuple[str, ...]] = (),
    two_leaders: int = 0,
) -> Plan:
    """The plan of one seed; `vendors` (sim.nodes.vendors.parse_vendors, () for NVIDIA alone) adds the other
    vendors' pods to the mix, as in the demo."""
    if pods < 1 or kills < 0 or replicas < 1 or arrival_rate <= 0 or recreate < 0:
        raise ValueError("pods, replicas and the arrival rate must be positive; kills and recreate >= 0")
    if two_leaders < 0 or (two_leaders and replicas < 2):
        raise ValueError("two-leader faults must be >= 0 and need at least 2 replicas")
    if long_faults < 0 or lag <= 0:
        raise ValueError("long faults must be >= 0 and the lag positive")
    rng = random.Random(f"chaos-{seed}")
    mix = tuple(demo_pods(pods, seed, vendors=vendors))
    gaps = tuple(round(rng.expovariate(arrival_rate), 4) for _ in mix)
    admit_via = tuple(rng.randrange(replicas) for _ in mix)
    return Plan(
        seed=seed,
        pods=mix,
        gaps=gaps,
        admit_via=admit_via,
        kills=kill_points(rng, pods, kills),
        recreations=choose_recreations(rng, mix, recreate),
        faults=tuple(fault_rules(fault_rate)),
        long_faults=long_fault_plan(random.Random(f"chaos-long-{seed}"), long_faults, lag),
        two_leaders=two_leader_points(seed, two_leaders),
    )
