"""Every example under examples/ reaches the state its header says, on the real control plane, applied with
the kubectl of the server's version — so that an example cannot rot (sim.workload.examples has the schema).

One `python -m sim up` per set of extra flags the examples need (`needs.sim_up`), each in `make up`'s shape:
a node of every kind of the Makefile's DEMO_VENDORS. In each, the examples run one after the other as a
newcomer would run them on a fresh playground: apply, wait for the state, delete (an example and those that
come `after` it are applied in turn and deleted together), so no example depends on another's leftovers.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import orjson
import pytest
from playground import Playground, sim_up

from sim.emulator.testing import REPO_ROOT
from sim.kit.kube import pool_manager
from sim.workload import examples
from sim.workload.examples import Example, Facts

pytestmark = [pytest.mark.integration, pytest.mark.real]
ROOT = REPO_ROOT / "examples"
EXAMPLES = examples.load_all(ROOT)
GROUPS = examples.groups(EXAMPLES)
STATE_TIMEOUT = 120.0  # preemption waits for kube-scheduler's backoff and the victim's deletion


def demo_vendors() -> str:
    """The Makefile's DEMO_VENDORS, which `make up` starts one node of each."""
    found = re.search(r"^DEMO_VENDORS \?= (\S+)$", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found, "the Makefile sets no DEMO_VENDORS"
    return found.group(1)


def make_up_flags() -> list[str]:
    """What `make up` passes to `sim up` besides UP_FLAGS."""
    vendors = demo_vendors()
    return ["--vendors", vendors, "--nodes", str(len(vendors.split(",")))]


def facts(playground: Playground, applied: dict[str, str]) -> Facts:
    ready = playground.ready
    http = pool_manager(
        1, Path(ready["service_ca"]).read_bytes(), client_cert=(ready["client_cert"], ready["client_key"])
    )
    try:
        state = orjson.loads(http.request("GET", f"{ready['extender_url']}/debug/state?all=true").data)
        metrics = http.request("GET", f"{ready['service_url']}/metrics").data.decode()
    finally:
        http.clear()
    pods = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p
        for p in playground.kube.list("/api/v1/pods")[1]
    }
    return Facts(pods, examples.held_devices(state), metrics, applied)


def wait_for_state(playground: Playground, example: Example, applied: dict[str, str]) -> None:
    deadline, found = time.monotonic() + STATE_TIMEOUT, ["not checked"]
    while time.monotonic() < deadline:
        found = examples.problems(example, facts(playground, applied))
        if not found:
            return
        time.sleep(0.5)
    pytest.fail(f"examples/{example.name} did not reach its state in {STATE_TIMEOUT:g}s: {'; '.join(found)}")


def delete(playground: Playground, chain: list[Example]) -> None:
    """`kubectl delete -f` of the chain, last first, then wait until its pods are gone (the namespace
    controller removes a namespace afterwards; nothing waits for that)."""
    pods = set()
    for example in reversed(chain):
        done = (
            playground.kubectl(  # a second of grace: the kubelets would keep each pod its 30 s (capped 10 s)
                "delete", "-f", str(example.path), "--ignore-not-found", "--wait=false", "--grace-period=1"
            )
        )
        assert done.returncode == 0, done.stderr
        pods |= example.created_pods()
    deadline = time.monotonic() + 60
    while left := pods & set(facts(playground, {}).pods):
        assert time.monotonic() < deadline, f"still there after kubectl delete: {sorted(left)}"
        time.sleep(0.5)


@pytest.mark.parametrize("flags", list(GROUPS), ids=[" ".join(f) or "make-up" for f in GROUPS])
def test_examples_reach_their_state(real_binaries: object, tmp_path: Path, flags: tuple[str, ...]) -> None:
    with sim_up(tmp_path / "up", *make_up_flags(), *flags) as playground:
        chain: list[Example] = []
        for example in GROUPS[flags]:
            if not example.after and chain:
                delete(playground, chain)
                chain = []
            chain.append(example)
            started = time.monotonic()
            applied = playground.kubectl("apply", "-f", str(example.path))
            refused = any("refused" in want for want in example.pods.values())
            assert applied.returncode == (1 if refused else 0), applied.stderr
            wait_for_state(playground, example, {example.name: applied.stdout + applied.stderr})
            print(f"examples/{example.name}: its state in {time.monotonic() - started:.1f}s")
        delete(playground, chain)
