"""Writers racing on one object with resourceVersion preconditions: no lost update, conflicts are 409s."""

from __future__ import annotations

import threading

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from sim.emulator.testing import EmulatorHandle, node

THREADS, WRITES = 8, 50
MERGE = "application/merge-patch+json"


def _writer(
    sim: EmulatorHandle, versions: list[int], conflicts: list[int], errors: list[BaseException]
) -> None:
    try:
        with sim.api_client() as api:
            core = client.CoreV1Api(api)
            for _ in range(WRITES):
                current = core.read_node("n1")
                count = int(current.metadata.annotations["count"])
                patch = {
                    "metadata": {
                        "resourceVersion": current.metadata.resource_version,
                        "annotations": {"count": str(count + 1)},
                    }
                }
                try:
                    written = core.patch_node("n1", patch, _content_type=MERGE)
                except ApiException as error:
                    if error.status != 409:
                        raise
                    conflicts.append(1)
                    continue
                versions.append(int(written.metadata.resource_version))
    except BaseException as error:  # surfaced by the test thread
        errors.append(error)


def _watch_counts(url: str, rv: str, expected: int, seen: list[int]) -> None:
    http = urllib3.PoolManager(retries=False)
    try:
        response = http.request(
            "GET",
            f"{url}/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=60",
            preload_content=False,
        )
        buffer = b""
        for chunk in response.stream(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            seen.extend(
                int(orjson.loads(line)["object"]["metadata"]["annotations"]["count"])
                for line in lines
                if line
            )
            if len(seen) >= expected:
                break
        response.release_conn()
        response.close()
    finally:
        http.clear()


def test_concurrent_conditional_patches_lose_no_update(sim: EmulatorHandle) -> None:
    start_rv = sim.seed([node("n1", annotations={"count": "0"})])
    versions: list[int] = []
    conflicts: list[int] = []
    errors: list[BaseException] = []
    writers = [
        threading.Thread(target=_writer, args=(sim, versions, conflicts, errors)) for _ in range(THREADS)
    ]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(versions) + len(conflicts) == THREADS * WRITES
    final = sim.get("nodes", "n1")
    assert final is not None and final["metadata"]["annotations"]["count"] == str(len(versions)), (
        "no lost update"
    )
    assert len(set(versions)) == len(versions), "every successful write has its own version"
    statuses = [r["status"] for r in sim.requests() if r["verb"] == "patch"]
    assert sorted(statuses) == sorted([200] * len(versions) + [409] * len(conflicts))
    seen: list[int] = []
    _watch_counts(sim.url, start_rv, len(versions), seen)
    assert seen == list(range(1, len(versions) + 1)), (
        "a watch from before the race replays every write, in order"
    )
