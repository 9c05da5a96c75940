"""The examples under examples/: what each says it needs and the state it must reach, read from its header,
and the check of that state against what a cluster shows — so that an example cannot rot unnoticed
(tests/real/test_examples.py applies every one to the real control plane).

Each example is a YAML file with a comment block that starts with `# hami-example:`; the indented comment
lines after it are YAML (the schema, docs/real-control-plane.md "The examples"):

    # hami-example:
    #   needs: {vendors: [nvidia], sim_up: [--workload-api]}   # node kinds; `sim up` flags beyond `make up`'s
    #   after: quota.yaml                   # applied once that example (same folder) reached its state
    #   expect:
    #     pods:                             # by name, or namespace/name (default: default)
    #       NAME: {phase: Running, annotations: {KEY: VALUE}, devices: [NVIDIA], memory_mib: 4096,
    #              memory_percent: 25, cores: 30}
    #       NAME: {phase: Pending, unschedulable: TEXT}  # its PodScheduled condition says TEXT
    #       NAME: {refused: TEXT}           # kubectl apply failed saying TEXT, and the pod does not exist
    #       NAME: {gone: true}              # no longer exists (a preemption victim)
    #     same_device: [[A, B]]             # the pods hold exactly the same devices
    #     distinct_devices: [[A, B]]        # no device held by two of them
    #     quota_limits: {NAMESPACE: {RESOURCE: LIMIT}}   # the scheduler's /metrics shows these limits

`devices` lists the vendor of every device the pod holds, `memory_mib` its memory in all of them,
`memory_percent` and `cores` what it holds of each device; all of it as the scheduler's replica holds it
(`/debug/state`, what `hami-scheduler inspect --url` shows).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MARKER = "# hami-example:"
POD_KEYS = {
    "phase", "annotations", "devices", "memory_mib", "memory_percent", "cores", "unschedulable", "refused",
    "gone",
}  # fmt: skip
EXPECT_KEYS = {"pods", "same_device", "distinct_devices", "quota_limits"}


class ExampleError(ValueError):
    """An example whose header does not follow the schema; the message names the file."""


@dataclass(frozen=True)
class Held:
    """One device a pod holds, as `inspect -o json` shows it."""

    uuid: str
    vendor: str
    memory_mib: int
    cores: int
    device_memory_mib: int


@dataclass
class Facts:
    """What the cluster shows after an example was applied."""

    pods: dict[str, dict[str, Any]]  # namespace/name -> the pod
    held: dict[str, list[Held]]  # namespace/name -> its devices
    metrics: str  # the scheduler's /metrics text
    applied: dict[str, str] = field(default_factory=dict)  # example name -> kubectl apply's output


@dataclass(frozen=True)
class Example:
    path: Path
    name: str  # relative to the examples folder, e.g. vendors/amd.yaml
    vendors: tuple[str, ...]
    sim_up: tuple[str, ...]
    after: str
    expect: Mapping[str, Any]

    @property
    def pods(self) -> dict[str, Mapping[str, Any]]:
        return {pod_key(k): v for k, v in (self.expect.get("pods") or {}).items()}

    def objects(self) -> list[dict[str, Any]]:
        return [d for d in yaml.safe_load_all(self.path.read_text()) if isinstance(d, dict)]

    def created_pods(self) -> set[str]:
        """namespace/name of the pods the file creates."""
        return {_key(o) for o in self.objects() if o.get("kind") == "Pod"}


def pod_key(name: str) -> str:
    return name if "/" in name else f"default/{name}"


def header(text: str, where: str) -> dict[str, Any]:
    """The YAML of the `# hami-example:` block."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == MARKER]
    if len(starts) != 1:
        raise ExampleError(f"{where}: expected one `{MARKER}` comment block, found {len(starts)}")
    block = []
    for line in lines[starts[0] + 1 :]:
        if not re.match(r"#\s{2,}\S", line):
            break
        block.append(line[1:])
    try:
        data = yaml.safe_load("\n".join(block))
    except yaml.YAMLError as exc:
        raise ExampleError(f"{where}: the {MARKER} block is no YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ExampleError(f"{where}: the {MARKER} block must be a mapping")
    return data


def _strings(value: Any, what: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ExampleError(f"{where}: {what} must be a list of strings")
    return tuple(value)


def _check_expect(expect: Any, where: str) -> None:
    if not isinstance(expect, dict) or not expect or set(expect) - EXPECT_KEYS:
        raise ExampleError(f"{where}: expect must map some of {sorted(EXPECT_KEYS)}")
    for name, want in (expect.get("pods") or {}).items():
        if not isinstance(want, dict) or not want or set(want) - POD_KEYS:
            raise ExampleError(f"{where}: pod {name}: expected some of {sorted(POD_KEYS)}")
        if "phase" in want and want["phase"] not in ("Running", "Pending"):
            raise ExampleError(f"{where}: pod {name}: phase must be Running or Pending")
    for key in ("same_device", "distinct_devices"):
        for group in expect.get(key) or []:
            names = _strings(group, key, where)
            if len(names) < 2 or set(map(pod_key, names)) - set(map(pod_key, expect.get("pods") or {})):
                raise ExampleError(f"{where}: {key} groups name two or more pods of expect.pods")


def load(path: Path, root: Path) -> Example:
    where = str(path.relative_to(root.parent))
    data = header(path.read_text(), where)
    unknown = set(data) - {"needs", "after", "expect"}
    needs = data.get("needs") or {}
    if unknown or not isinstance(needs, dict) or set(needs) - {"vendors", "sim_up"}:
        raise ExampleError(f"{where}: the header has needs {{vendors, sim_up}}, after and expect")
    _check_expect(data.get("expect"), where)
    vendors = _strings(needs.get("vendors") or [], "needs.vendors", where)
    if not vendors:
        raise ExampleError(f"{where}: needs.vendors names the node kinds its pods need")
    after = str(data.get("after") or "")
    if after and not (path.parent / after).is_file():
        raise ExampleError(f"{where}: after names {after}, which is not beside it")
    name = str(path.relative_to(root))
    sim_up = _strings(needs.get("sim_up") or [], "needs.sim_up", where)
    return Example(
        path, name, vendors, sim_up, str(Path(name).parent / after) if after else "", data["expect"]
    )


def load_all(root: Path) -> list[Example]:
    """Every example under `root`, each after the one it names in `after`, otherwise by name."""
    examples = {e.name: e for e in (load(p, root) for p in sorted(root.rglob("*.yaml")))}
    ordered: list[Example] = []

    def place(example: Example, seen: tuple[str, ...]) -> None:
        if example in ordered:
            return
        if example.name in seen:
            raise ExampleError(f"examples/{example.name}: `after` goes round in a circle")
        if example.after:
            place(examples[example.after], (*seen, example.name))
        ordered.append(example)

    for example in examples.values():
        place(example, ())
    for example in ordered:  # what it expects is its own or its predecessors' pods, on the same cluster
        if example.after and examples[example.after].sim_up != example.sim_up:
            raise ExampleError(f"examples/{example.name}: needs.sim_up differs from that of {example.after}")
        known = {
            pod_key(_key(o)) for e in chain(example, examples) for o in e.objects() if o["kind"] == "Pod"
        }
        missing = set(example.pods) - known
        if missing:
            raise ExampleError(f"examples/{example.name}: expects pods it does not create: {sorted(missing)}")
    return ordered


def chain(example: Example, examples: Mapping[str, Example]) -> list[Example]:
    """The example and those it comes after, first first."""
    found = [example]
    while found[0].after:
        found.insert(0, examples[found[0].after])
    return found


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _pod_problems(key: str, want: Mapping[str, Any], facts: Facts, applied: str) -> list[str]:
    pod = facts.pods.get(key)
    if want.get("gone") or "refused" in want:
        problems = [f"{key} exists"] if pod is not None else []
        if "refused" in want and want["refused"] not in applied:
            problems.append(f"kubectl apply did not say {want['refused']!r}: {applied.strip()!r}")
        return problems
    if pod is None:
        return [f"{key} does not exist"]
    status, meta = pod.get("status") or {}, pod.get("metadata") or {}
    problems = []
    if "phase" in want and status.get("phase") != want["phase"]:
        problems.append(f"{key} is {status.get('phase')}, not {want['phase']}")
    annotations = meta.get("annotations") or {}
    for name, value in (want.get("annotations") or {}).items():
        if annotations.get(name) != value:
            problems.append(f"{key}: annotation {name} is {annotations.get(name)!r}, not {value!r}")
    if "unschedulable" in want:
        conditions = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
        message = " ".join(str(c.get("message") or "") for c in conditions if c.get("status") == "False")
        if want["unschedulable"] not in message:
            problems.append(f"{key}: PodScheduled does not say {want['unschedulable']!r}: {message!r}")
    held = facts.held.get(key, [])
    if "devices" in want and sorted(h.vendor for h in held) != sorted(want["devices"]):
        problems.append(f"{key} holds {sorted(h.vendor for h in held)}, not {sorted(want['devices'])}")
    if "memory_mib" in want and sum(h.memory_mib for h in held) != want["memory_mib"]:
        problems.append(f"{key} holds {sum(h.memory_mib for h in held)} MiB, not {want['memory_mib']}")
    for h in held:
        percent = round(100 * h.memory_mib / h.device_memory_mib) if h.device_memory_mib else 0
        if "memory_percent" in want and percent != want["memory_percent"]:
            problems.append(f"{key} holds {percent}% of {h.uuid}'s memory, not {want['memory_percent']}%")
        if "cores" in want and h.cores != want["cores"]:
            problems.append(f"{key} holds {h.cores}% of {h.uuid}'s cores, not {want['cores']}%")
    return problems


def quota_limit(metrics: str, namespace: str, resource: str) -> float | None:
    """hami_resource_quota_limit of (namespace, resource) in a /metrics text."""
    for line in metrics.splitlines():
        labels = (f'namespace="{namespace}"', f'quota_name="{resource}"')
        if line.startswith("hami_resource_quota_limit{") and all(label in line for label in labels):
            return float(line.rsplit(" ", 1)[1])
    return None


def problems(example: Example, facts: Facts) -> list[str]:
    """Why the cluster is not (yet) in the state `example` expects; empty once it is."""
    found: list[str] = []
    applied = facts.applied.get(example.name, "")
    for key, want in example.pods.items():
        found += _pod_problems(key, want, facts, applied)
    devices = {key: {h.uuid for h in facts.held.get(key, [])} for key in example.pods}
    for group in example.expect.get("same_device") or []:
        held = [devices[pod_key(n)] for n in group]
        if not held[0] or any(h != held[0] for h in held):
            found.append(f"{', '.join(group)} do not hold the same devices: {held}")
    for group in example.expect.get("distinct_devices") or []:
        held = [devices[pod_key(n)] for n in group]
        if any(not h for h in held) or sum(map(len, held)) != len(set().union(*held)):
            found.append(f"{', '.join(group)} share a device (or hold none): {held}")
    for namespace, limits in (example.expect.get("quota_limits") or {}).items():
        for resource, limit in limits.items():
            seen = quota_limit(facts.metrics, namespace, resource)
            if seen != float(limit):
                found.append(
                    f"the scheduler's quota limit of {resource} in {namespace} is {seen}, not {limit}"
                )
    return found


def held_devices(state: Mapping[str, Any]) -> dict[str, list[Held]]:
    """namespace/name -> the devices it holds, from a replica's `GET /debug/state?all=true` (what
    `hami-scheduler inspect --url` shows: every vendor the replica runs)."""
    held: dict[str, list[Held]] = {}
    for node in state.get("nodes") or []:
        devices = {str(d["uuid"]): d for d in node.get("devices") or []}
        for reservation in node.get("reservations") or []:
            for uuid, use in (reservation.get("devices") or {}).items():
                device = devices.get(str(uuid)) or {}
                held.setdefault(str(reservation["pod"]), []).append(
                    Held(
                        str(uuid),
                        str(device.get("vendor", "")),
                        int(use.get("mem", 0)),
                        int(use.get("cores", 0)),
                        int(device.get("memory", 0)),
                    )
                )
    return held


def vendor_kinds(examples: Iterable[Example]) -> list[str]:
    """The node kinds (sim.nodes.vendors parts) the examples need, in first-seen order."""
    return list(dict.fromkeys(kind for e in examples for kind in e.vendors))


def groups(examples: Sequence[Example]) -> dict[tuple[str, ...], list[Example]]:
    """The examples by the extra `sim up` flags they need (one cluster each), in order."""
    found: dict[tuple[str, ...], list[Example]] = {}
    for example in examples:
        found.setdefault(example.sim_up, []).append(example)
    return found
