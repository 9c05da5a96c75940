"""The drain hand-over's rules (workers/handover.py): who counts as a peer, and when a cordon hands over."""

from __future__ import annotations

from typing import Any

import pytest

from workers.election import Leadership
from workers.handover import RETRY, Handover, cordoned, peers


def pod(
    name: str, node: str, *, phase: str = "Running", deleting: bool = False, worker: bool | None = True
) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "hami-system"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {"phase": phase}
    if worker is not None:
        status["containerStatuses"] = [
            {"name": "extender", "ready": False},
            {"name": "worker", "ready": worker},
        ]
    return {"metadata": meta, "spec": {"nodeName": node}, "status": status}


@pytest.mark.parametrize(
    ("other", "counts"),
    [
        pytest.param(pod("b", "n2"), True, id="standby-elsewhere"),
        pytest.param(pod("b", "n2", worker=None), True, id="no-container-statuses"),
        pytest.param(pod("b", "n1"), False, id="same-node"),
        pytest.param(pod("b", "n2", phase="Pending"), False, id="pending"),
        pytest.param(pod("b", "n2", deleting=True), False, id="terminating"),
        pytest.param(pod("b", "n2", worker=False), False, id="worker-not-started"),
    ],
)
def test_peers(other: Any, counts: bool) -> None:
    assert peers([pod("a", "n1"), other], "a", "n1") == (["b"] if counts else [])


class Elector:
    def __init__(self, can: bool) -> None:
        self.can, self.calls = can, 0

    def start(self) -> None: ...

    def stop(self, timeout: float) -> None: ...

    def leadership(self, now: float) -> Leadership:
        return Leadership(True)

    def step_down(self, hold_off: float) -> bool:
        self.calls += 1
        return self.can


class Fixed(Handover):
    """The rules without the API: the peers are given."""

    found: tuple[str, ...] = ("b",)

    def _peers(self) -> list[str]:
        return list(self.found)


def handover(elector: Elector, clock: list[float], draining: list[str]) -> Fixed:
    return Fixed(
        None,  # type: ignore[arg-type]
        elector,
        namespace="hami-system",
        pod_name="a",
        node_name="n1",
        hold_off=15.0,
        set_draining=draining.append,
        on_handover=lambda: None,
        clock=lambda: clock[0],
    )


NODE = {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}}


def test_acquire_mode_steps_down_once_then_retries_after_a_minute() -> None:
    elector, clock, draining = Elector(True), [100.0], []
    h = handover(elector, clock, draining)
    h.step({"metadata": {"name": "n1"}, "spec": {}}, leading=True)
    assert elector.calls == 0 and draining == [""]
    h.step(NODE, leading=True)
    h.step(NODE, leading=True)  # still leading (nobody took over yet): not again at once
    assert elector.calls == 1
    clock[0] += RETRY
    h.step(NODE, leading=True)
    assert elector.calls == 2


def test_follow_mode_reports_not_ready_until_uncordoned() -> None:
    elector, clock, draining = Elector(False), [0.0], []
    h = handover(elector, clock, draining)
    h.step(NODE, leading=True)
    assert draining == ["node n1 is cordoned: this replica hands over when it stops"]
    h.step({"metadata": {"name": "n1"}, "spec": {"unschedulable": False}}, leading=True)
    assert draining[-1] == ""


def test_nothing_without_a_peer_or_leadership() -> None:
    elector, clock, draining = Elector(True), [0.0], []
    h = handover(elector, clock, draining)
    h.step(NODE, leading=False)
    h.found = ()
    h.step(NODE, leading=True)
    assert elector.calls == 0 and draining == []
    assert cordoned(NODE) and not cordoned(None)
