"""The examples' headers (sim.workload.examples) without a cluster: every example under examples/ follows
the schema, is listed in examples/README.md and needs only node kinds `make up` runs; a header that breaks
the schema is refused naming the file; the state check says what differs and nothing once it holds."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sim.emulator.testing import REPO_ROOT
from sim.workload import examples
from sim.workload.examples import Example, ExampleError, Facts, Held

ROOT = REPO_ROOT / "examples"
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: []}\n"


def test_every_example_loads_and_is_listed() -> None:
    loaded = examples.load_all(ROOT)
    assert len(loaded) == len(list(ROOT.rglob("*.yaml"))) >= 20
    listed = (ROOT / "README.md").read_text()
    assert [e.name for e in loaded if f"({e.name})" not in listed] == []
    assert "(examples/README.md)" in (REPO_ROOT / "README.md").read_text()


def test_make_up_runs_every_node_kind_an_example_needs() -> None:
    found = re.search(r"^DEMO_VENDORS \?= (\S+)$", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found is not None
    parts = {part for kind in found.group(1).split(",") for part in kind.split("+")}
    assert set(examples.vendor_kinds(examples.load_all(ROOT))) <= parts


def write(folder: Path, name: str, header: str, body: str = POD) -> Path:
    path = folder / name
    lines = "\n".join(f"#   {line}" for line in header.strip().splitlines())
    path.write_text(f"# what it shows\n#\n# hami-example:\n{lines}\n{body}")
    return path


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ("needs: {vendors: []}\nexpect: {pods: {a: {phase: Running}}}", "needs.vendors names the node kinds"),
        (
            "needs: {vendors: [nvidia]}\nexpect: {pods: {a: {phase: Done}}}",
            "phase must be Running or Pending",
        ),
        ("needs: {vendors: [nvidia]}\nexpect: {pods: {a: {colour: red}}}", "pod a: expected some of"),
        ("needs: {vendors: [nvidia]}\nexpect: {}", "expect must map some of"),
        ("needs: {vendors: [nvidia], gpus: 2}\nexpect: {pods: {a: {gone: true}}}", "needs {vendors, sim_up}"),
        (
            "needs: {vendors: [nvidia]}\nafter: nowhere.yaml\nexpect: {pods: {a: {gone: true}}}",
            "not beside it",
        ),
        ("needs: {vendors: [nvidia]}\nexpect: {pods: {b: {gone: true}}}", "does not create: ['default/b']"),
        (
            "needs: {vendors: [nvidia]}\nexpect: {pods: {a: {gone: true}}, same_device: [[a, c]]}",
            "same_device groups name two or more pods of expect.pods",
        ),
        ("needs: {vendors: [nvidia]}\nexpect: [a]", "expect must map some of"),
    ],
    ids=[
        "no-vendor",
        "bad-phase",
        "unknown-pod-key",
        "empty-expect",
        "unknown-need",
        "after-missing",
        "foreign-pod",
        "bad-group",
        "expect-list",
    ],
)
def test_a_header_off_the_schema_is_refused(tmp_path: Path, header: str, said: str) -> None:
    root = tmp_path / "examples"
    root.mkdir()
    write(root, "x.yaml", header)
    with pytest.raises(ExampleError, match=re.escape(said)) as refused:
        examples.load_all(root)
    assert str(refused.value).startswith("examples/x.yaml: ")


def test_no_header_and_a_circle_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "examples"
    root.mkdir()
    (root / "plain.yaml").write_text(POD)
    with pytest.raises(ExampleError, match="expected one `# hami-example:` comment block, found 0"):
        examples.load_all(root)
    (root / "plain.yaml").unlink()
    write(root, "a.yaml", "needs: {vendors: [nvidia]}\nafter: b.yaml\nexpect: {pods: {a: {gone: true}}}")
    write(root, "b.yaml", "needs: {vendors: [nvidia]}\nafter: a.yaml\nexpect: {pods: {a: {gone: true}}}")
    with pytest.raises(ExampleError, match="goes round in a circle"):
        examples.load_all(root)


def pod(name: str, phase: str = "Running", **annotations: str) -> dict[str, Any]:
    conditions = [
        {"type": "PodScheduled", "status": "False", "message": "0/2 nodes: 2 CardInsufficientMemory"}
    ]
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "status": {"phase": phase, "conditions": conditions if phase == "Pending" else []},
    }


def held(uuid: str, memory: int = 4096, cores: int = 30, vendor: str = "NVIDIA") -> Held:
    return Held(uuid, vendor, memory, cores, 16384)


def example(expect: dict[str, Any]) -> Example:
    return Example(Path("x.yaml"), "x.yaml", ("nvidia",), (), "", expect)


RUNNING = {"phase": "Running", "annotations": {"hami.io/bind-phase": "success"}, "devices": ["NVIDIA"]}
METRICS = 'hami_resource_quota_limit{namespace="q",quota_name="nvidia.com/gpumem",zone="vGPU"} 10240\n'
SUCCESS = {"hami.io/bind-phase": "success"}
TWO = {"a": {"phase": "Running"}, "b": {"phase": "Running"}}


def seen(
    *pods: dict[str, Any], on: dict[str, str] | None = None, metrics: str = "", applied: str = ""
) -> Facts:
    """What the cluster shows: these pods, each holding the devices `on` names (pod -> UUID)."""
    return Facts(
        {f"default/{p['metadata']['name']}": p for p in pods},
        {f"default/{name}": [held(uuid)] for name, uuid in (on or {}).items()},
        metrics,
        {"x.yaml": applied},
    )


CASES = {
    "running": ({"pods": {"a": RUNNING}}, seen(pod("a", **SUCCESS), on={"a": "g0"}), []),
    "missing": ({"pods": {"a": RUNNING}}, seen(), ["default/a does not exist"]),
    "pending-instead": (
        {"pods": {"a": RUNNING}},
        seen(pod("a", "Pending")),
        [
            "default/a is Pending, not Running",
            "annotation hami.io/bind-phase is None, not 'success'",
            "default/a holds [], not ['NVIDIA']",
        ],
    ),
    "amounts": (
        {"pods": {"a": {"memory_mib": 4096, "cores": 30, "memory_percent": 25}}},
        seen(pod("a"), on={"a": "g0"}),
        [],
    ),
    "percent-differs": (
        {"pods": {"a": {"memory_percent": 50}}},
        seen(pod("a"), on={"a": "g0"}),
        ["default/a holds 25% of g0's memory, not 50%"],
    ),
    "unschedulable": (
        {"pods": {"a": {"phase": "Pending", "unschedulable": "CardInsufficientMemory"}}},
        seen(pod("a", "Pending")),
        [],
    ),
    "other-reason": (
        {"pods": {"a": {"unschedulable": "CardInsufficientCore"}}},
        seen(pod("a", "Pending")),
        ["PodScheduled does not say 'CardInsufficientCore'"],
    ),
    "refused": (
        {"pods": {"a": {"refused": "exceeding resource quota"}}},
        seen(applied="denied the request: exceeding resource quota"),
        [],
    ),
    "admitted-instead": (
        {"pods": {"a": {"refused": "exceeding resource quota"}}},
        seen(pod("a")),
        ["default/a exists", "kubectl apply did not say 'exceeding resource quota'"],
    ),
    "gone": ({"pods": {"a": {"gone": True}}}, seen(), []),
    "not-shared": (
        {"pods": TWO, "same_device": [["a", "b"]]},
        seen(pod("a"), pod("b"), on={"a": "g0", "b": "g1"}),
        ["a, b do not hold the same devices"],
    ),
    "shared": (
        {"pods": TWO, "distinct_devices": [["a", "b"]]},
        seen(pod("a"), pod("b"), on={"a": "g0", "b": "g0"}),
        ["a, b share a device"],
    ),
    "quota-seen": ({"quota_limits": {"q": {"nvidia.com/gpumem": 10240}}}, seen(metrics=METRICS), []),
    "quota-differs": (
        {"quota_limits": {"q": {"nvidia.com/gpumem": 8192}}},
        seen(metrics=METRICS),
        ["the scheduler's quota limit of nvidia.com/gpumem in q is 10240.0, not 8192"],
    ),
}


@pytest.mark.parametrize(("expect", "facts", "said"), list(CASES.values()), ids=list(CASES))
def test_the_state_check_says_what_differs(expect: dict[str, Any], facts: Facts, said: list[str]) -> None:
    found = examples.problems(example(expect), facts)
    assert len(found) == len(said) and all(s in f for s, f in zip(said, found, strict=True)), found


def test_held_devices_from_a_replicas_state() -> None:
    state = {
        "nodes": [
            {
                "node": "n",
                "devices": [{"uuid": "g0", "vendor": "NVIDIA", "memory": 81920}],
                "reservations": [
                    {"pod": "default/a", "devices": {"g0": {"slots": 1, "mem": 20480, "cores": 0}}}
                ],
            }
        ]
    }
    assert examples.held_devices(state) == {"default/a": [Held("g0", "NVIDIA", 20480, 0, 81920)]}
