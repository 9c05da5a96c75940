"""What a lock's holder still needs the lock for (app.core.nodelock.classify_holder)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.nodelock import Holder, classify_holder

NOW = 10_000.0
ASSIGNED = "hami.io/vgpu-node"


def holder(
    *,
    node: str | None = None,
    assigned: str | None = "gpu-a",
    phase: str = "Pending",
    host_ip: str = "",
    **annotations: str,
) -> dict[str, Any]:
    annos = {k.replace("_", "-").replace("hami-io-", "hami.io/"): v for k, v in annotations.items()}
    if assigned is not None:
        annos[ASSIGNED] = assigned
    status = {"phase": phase, **({"hostIP": host_ip} if host_ip else {})}
    return {"metadata": {"annotations": annos}, "spec": {"nodeName": node}, "status": status}


@pytest.mark.parametrize(
    ("pod", "locked_at", "expected"),
    [
        pytest.param(None, None, Holder.GONE, id="deleted"),
        pytest.param(holder(phase="Succeeded"), None, Holder.TERMINAL, id="succeeded"),
        pytest.param(holder(phase="Failed", node="gpu-a"), None, Holder.TERMINAL, id="failed"),
        pytest.param(holder(assigned="gpu-b"), None, Holder.GONE, id="re-filtered-elsewhere"),
        pytest.param(
            holder(node="gpu-a", hami_io_bind_phase="allocating", hami_io_bind_time=str(NOW - 1000)),
            None,
            Holder.PENDING_ALLOCATION,
            id="bound-waiting-for-allocate",
        ),
        pytest.param(
            holder(node="gpu-a", hami_io_bind_phase="success"), None, Holder.ALLOCATED, id="bound-allocated"
        ),
        pytest.param(
            holder(node="gpu-a", hami_io_bind_phase="failed"),
            None,
            Holder.ALLOCATED,
            id="bound-allocate-failed",
        ),
        pytest.param(holder(hami_io_bind_phase="success"), None, Holder.ACTIVE, id="not-bound-old-success"),
        pytest.param(  # a multi-vendor pod: another vendor's plugin set success, NVIDIA's group is left
            holder(
                node="gpu-a",
                hami_io_bind_phase="success",
                hami_io_vgpu_devices_to_allocate="GPU-0,NVIDIA,1024,30:;",
            ),
            None,
            Holder.PENDING_ALLOCATION,
            id="bound-success-while-devices-left",
        ),
        pytest.param(
            holder(node="gpu-a", hami_io_bind_phase="success", hami_io_vgpu_devices_to_allocate=";;"),
            None,
            Holder.ALLOCATED,
            id="bound-success-groups-erased",
        ),
        pytest.param(  # our bind lock's vendors: no plugin stamps a phase; the kubelet admitted it
            holder(node="gpu-a", phase="Running", hami_io_bind_phase="allocating"),
            None,
            Holder.ALLOCATED,
            id="bound-running-phase-never-stamped",
        ),
        pytest.param(
            holder(node="gpu-a", host_ip="10.0.0.1"), None, Holder.ALLOCATED, id="bound-admitted-pending"
        ),
        pytest.param(holder(hami_io_bind_time=str(NOW - 5)), None, Holder.ACTIVE, id="bind-in-flight"),
        pytest.param(holder(hami_io_bind_time=str(NOW - 61)), None, Holder.GONE, id="bind-attempt-stale"),
        pytest.param(  # a new bind took the lock; its bind-time patch has not landed yet (the chaos storm)
            holder(hami_io_bind_time=str(NOW - 61)), NOW - 1, Holder.ACTIVE, id="old-bind-time-fresh-lock"
        ),
        pytest.param(
            holder(hami_io_bind_time=str(NOW - 1)), NOW - 61, Holder.ACTIVE, id="fresh-bind-old-lock"
        ),
        pytest.param(holder(), NOW - 5, Holder.ACTIVE, id="no-bind-time-recent-lock"),
        pytest.param(holder(), NOW - 61, Holder.GONE, id="no-bind-time-stale-lock"),
        pytest.param(holder(), None, Holder.ACTIVE, id="no-bind-time-no-lock-time"),
        pytest.param(
            holder(hami_io_bind_time="garbage"), NOW - 61, Holder.GONE, id="bad-bind-time-stale-lock"
        ),
    ],
)
def test_classify_holder(pod: dict[str, Any] | None, locked_at: float | None, expected: Holder) -> None:
    assert classify_holder(pod, "gpu-a", ASSIGNED, NOW, 60.0, locked_at) is expected
