"""The gang planner: places a gang's quorum on the nodes offered, member by member, or says how many it
could place (docs/gangs.md, "The plan").

Input: the members not yet placed (each with its own requests, policies and quota view, read from its own
pod as for a single pod), how many of them must be placed (`needed`: the quorum less the members bound or
already reserved), the candidate nodes, the usage as the asker sees it (every reservation but its own, and
every hold that blocks it), the vendors. Output: a placement per member — node, devices (the allocation
`evaluate_node` gives, HAMi's own device choice and vendor rules) and the device uses it would hold — for
`needed` members, one of them the asker; or how many it could place at best.

The search (what "no placement exists" means here):

- Members are placed one after another; member k is fitted on the node with members 1..k-1's placements
  added to the usage, so a plan never oversubscribes a device (the tests check it against capacity).
- The space searched: every assignment of members to candidate nodes, in the planner's member order
  (largest requests first, the asker first among equals; a member beyond the quorum may be left out, the
  asker never), each member given the devices `evaluate_node` chooses on that node in that state. Device
  choices HAMi would not make, and other member orders, are not searched.
- Nodes are tried in HAMi's winner order for the member (node score under its node policy on the usage
  so far, later position first among equals): the first descent is exactly greedy in HAMi's order, which
  is where the search stops when it succeeds.
- Identical members (same requests, annotations, policies) are interchangeable: a failed fit is
  remembered per member shape and node state, and while backtracking the later of two identical members
  never goes to an earlier candidate than the former (symmetry; not where a quota limits the namespace,
  as the order of identical members then matters).
  When every member is identical and no quota limits the namespace, greedy is exact: members on
  different nodes do not interact and identical members stack on one node the same way in any order, so
  greedy places the most that any assignment can; the planner then never backtracks.
- Otherwise it backtracks (depth first), within `budget` evaluations of a node and ten times as many
  tries; when the bound cuts it short the plan says so (`exhausted` False) and a "cannot" may be wrong.
  Greedy costs at most one evaluation per node and member shape, plus one per placement; nodes the
  caller's screening knows cannot fit a shape (`unfit`) cost none.

Pure: plain data in and out, no clock, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from app.core import quota
from app.core.fit import NodeVerdict, PodContext, evaluate_node
from app.core.model import DeviceUse, NodeDevices, NodeUse, PodDevices, QuotaEntry
from app.core.policy import node_score_sign
from app.core.quota import pod_quota_use
from app.core.reservations import vendor_tags
from app.core.score import node_score
from app.core.usage import allocation_uses, collapse_pod, sum_uses, working_devices
from app.core.vendor import Vendor, core_masks

BUDGET = 4_000  # evaluations of a node one plan may make (a few hundred ms at worst)


@dataclass(frozen=True, slots=True)
class Member:
    uid: str
    ctx: PodContext


@dataclass(frozen=True, slots=True)
class Placement:
    """One member's planned place: its node, devices, the device uses they hold and its quota use."""

    uid: str
    node: str
    devices: PodDevices
    uses: Mapping[str, DeviceUse]
    quota: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GangPlan:
    placements: tuple[Placement, ...]  # `needed` of them when found, else empty
    needed: int
    best: int  # the most members any branch placed (`needed` when found)
    evaluations: int
    exhausted: bool  # False: the bound cut the search short

    @property
    def found(self) -> bool:
        return len(self.placements) >= self.needed


def shape_of(ctx: PodContext) -> Hashable:
    """Everything `evaluate_node` reads of a member but its quota view: equal shapes, equal verdicts."""
    return (
        tuple(tuple(sorted(container.items())) for container in ctx.requests.containers),
        ctx.requests.init_count,
        tuple(sorted(ctx.annotations.items())),
        ctx.gpu_policy,
        ctx.node_policy,
        ctx.numa_bind,
        ctx.weights,
        ctx.namespace,
    )


def _size(ctx: PodContext) -> tuple[int, int, int, int]:
    """Largest first: devices, memory, memory percentage, cores asked for over all containers."""
    totals = [0, 0, 0, 0]
    for container in ctx.requests.containers:
        for request in container.values():
            totals[0] += request.nums
            totals[1] += request.nums * request.memreq
            totals[2] += request.nums * (request.mem_percentage % 101)
            totals[3] += request.nums * request.coresreq
    return totals[0], totals[1], totals[2], totals[3]


def ordered(members: Sequence[Member], asker: str) -> list[Member]:
    """The planner's member order: largest first, members of one shape together, the asker first among its
    shape, then by UID (deterministic)."""
    shapes = {m.uid: shape_of(m.ctx) for m in members}
    first_of_shape: dict[Hashable, tuple[tuple[int, ...], int, str]] = {}
    for m in members:
        rank = (tuple(-v for v in _size(m.ctx)), 0 if m.uid == asker else 1, m.uid)
        current = first_of_shape.get(shapes[m.uid])
        if current is None or rank < current:
            first_of_shape[shapes[m.uid]] = rank
    return sorted(members, key=lambda m: (first_of_shape[shapes[m.uid]], 0 if m.uid == asker else 1, m.uid))


def _with_quota(ctx: PodContext, added: Mapping[str, int]) -> PodContext:
    """The member's quota view with the amounts planned for earlier members added to the namespace's."""
    if not added:
        return ctx
    entries = dict(ctx.quota.get(ctx.namespace, {}))
    for name, amount in added.items():
        entry = entries.get(name, QuotaEntry())
        entries[name] = dataclasses.replace(entry, used=entry.used + amount)
    return dataclasses.replace(ctx, quota={**ctx.quota, ctx.namespace: entries})


class _Search:
    """One planning run over one set of candidate nodes (depth first, bounded)."""

    def __init__(
        self,
        members: Sequence[Member],
        needed: int,
        nodes: Mapping[str, NodeDevices],
        usage: Mapping[str, NodeUse],
        vendors: Sequence[Vendor],
        budget: int,
        asker: str,
        unfit: Mapping[Hashable, frozenset[str]],
    ) -> None:
        self.members, self.needed, self.asker = list(members), needed, asker
        self.nodes, self.usage, self.vendors = nodes, usage, vendors
        self.by_key = {v.key: v for v in vendors}
        self.masks = core_masks(vendors)
        self.shapes = [shape_of(m.ctx) for m in self.members]
        self.limited = any(
            quota.limited(m.ctx.quota, m.ctx.namespace, v) for m in self.members for v in vendors
        )
        self.exact = len(set(self.shapes)) <= 1 and not self.limited
        self.symmetric = not self.exact and not self.limited  # (quota: the order of identical ones matters)
        self.unfit = unfit
        # greedy (exact) walks each node once per member shape at most: only a backtracking search is bounded
        self.budget = budget if not self.exact else 1 << 62
        self.steps = self.budget * 10
        self.evaluations, self.best, self.exhausted = 0, 0, True
        self._failed: set[Hashable] = set()
        self._scores: dict[str, float] = {}

    def run(self, candidates: Sequence[str]) -> tuple[Placement, ...] | None:
        names = [c for c in dict.fromkeys(candidates) if c in self.nodes]
        self.position = {name: i for i, name in enumerate(names)}
        self.names = names
        self.on_node: dict[str, list[Placement]] = {}
        self.placed: list[Placement] = []
        self.added: dict[str, int] = {}
        self.history: dict[str, tuple[Hashable, ...]] = {}
        found = self._place(0, -1)
        return tuple(self.placed) if found else None

    # -- the depth-first search ---------------------------------------------------------------------------

    def _place(self, index: int, floor: int) -> bool:
        """Place members[index:] so that `needed` are placed; `floor`: the candidate position the previous
        member took when it has this member's shape (symmetry), else -1."""
        placed = len(self.placed)
        asker_in = not self.asker or any(p.uid == self.asker for p in self.placed)
        # a quorum without the asker is no plan for it: a place must be left for it
        self.best = max(self.best, placed if asker_in else min(placed, self.needed - 1))
        if placed >= self.needed:
            return asker_in
        if index >= len(self.members) or placed + len(self.members) - index < self.needed:
            return False
        member, shape = self.members[index], self.shapes[index]
        unfit = self.unfit.get(shape, frozenset())
        next_same = self.symmetric and index + 1 < len(self.members) and self.shapes[index + 1] == shape
        mandatory = member.uid == self.asker
        for name in self._winner_order(member.ctx, floor, unfit):
            if self.steps <= 0 or self.evaluations >= self.budget:
                self.exhausted = False
                return False
            self.steps -= 1
            verdict = self._evaluate(member, shape, name)
            if verdict is None:
                continue
            self._push(member, name, verdict)
            if self._place(index + 1, self.position[name] if next_same else -1):
                return True
            self._pop(name)
            if self.exact:
                return False  # greedy is exact for identical members (module docstring)
        if mandatory:
            return False  # the asker is never left out
        # Leave this member out, and with it the rest of its shape (identical members are interchangeable).
        after = index + 1
        while after < len(self.members) and self.shapes[after] == shape:
            after += 1
        return self._place(after, -1)

    def _winner_order(self, ctx: PodContext, floor: int, unfit: frozenset[str]) -> list[str]:
        sign = node_score_sign(ctx.node_policy)
        keyed = []
        for name in self.names[max(floor, 0) :]:
            if name in unfit:
                continue
            score = self._scores.get(name) if name not in self.on_node else None
            if score is None:
                score = node_score(working_devices(self.nodes[name], self._use(name)))
                if name not in self.on_node:
                    self._scores[name] = score
            keyed.append((sign * score, self.position[name], name))
        keyed.sort(reverse=True)
        return [name for _key, _position, name in keyed]

    def _use(self, name: str) -> NodeUse:
        base = self.usage.get(name, {})
        planned = self.on_node.get(name)
        if not planned:
            return base
        return sum_uses([base, *(p.uses for p in planned)])

    def _evaluate(self, member: Member, shape: Hashable, name: str) -> NodeVerdict | None:
        quota_key = tuple(sorted(self.added.items())) if self.limited else ()
        key = (shape, name, self.history.get(name, ()), quota_key)
        if key in self._failed:
            return None
        self.evaluations += 1
        ctx = _with_quota(member.ctx, self.added)
        verdict = evaluate_node(self.nodes[name], self._use(name), ctx, self.by_key)
        if not verdict.fits or verdict.devices is None:
            self._failed.add(key)
            return None
        return verdict

    def _push(self, member: Member, name: str, verdict: NodeVerdict) -> None:
        assert verdict.devices is not None
        ctx = member.ctx
        devices = verdict.devices
        uses = allocation_uses(
            devices, ctx.requests.init_count, vendor_tags(ctx.annotations, self.vendors), self.masks
        )
        amounts = pod_quota_use(collapse_pod(devices, ctx.requests.init_count), self.vendors)
        placement = Placement(member.uid, name, devices, uses, amounts)
        self.placed.append(placement)
        self.on_node.setdefault(name, []).append(placement)
        self.history[name] = (*self.history.get(name, ()), shape_of(ctx))
        for resource, amount in amounts.items():
            self.added[resource] = self.added.get(resource, 0) + amount

    def _pop(self, name: str) -> None:
        placement = self.placed.pop()
        self.on_node[name].pop()
        if not self.on_node[name]:
            del self.on_node[name]
        self.history[name] = self.history[name][:-1]
        for resource, amount in placement.quota.items():
            self.added[resource] -= amount


def plan(
    members: Sequence[Member],
    needed: int,
    domains: Sequence[Sequence[str]],
    nodes: Mapping[str, NodeDevices],
    usage: Mapping[str, NodeUse],
    vendors: Sequence[Vendor],
    *,
    asker: str = "",
    budget: int = BUDGET,
    unfit: Mapping[Hashable, frozenset[str]] | None = None,
) -> GangPlan:
    """Place `needed` of `members` (the asker, `members[uid == asker]`, always among them) within one of
    `domains` (candidate node lists in NodeNames order: one list, or one per topology domain, tried in
    order). The plan's placements follow the planner's member order.

    `unfit`: per member shape (`shape_of`), nodes known not to fit it on less usage than `usage` (a
    screening the caller ran: usage only grows while planning, so they cannot fit here either); they are
    skipped without an evaluation. It saves time and never changes the plan."""
    if needed <= 0:
        return GangPlan((), needed, 0, 0, True)
    search = _Search(ordered(members, asker), needed, nodes, usage, vendors, budget, asker, unfit or {})
    for domain in domains:
        found = search.run(domain)
        if found is not None:
            return GangPlan(found, needed, needed, search.evaluations, True)
    return GangPlan((), needed, search.best, search.evaluations, search.exhausted)
