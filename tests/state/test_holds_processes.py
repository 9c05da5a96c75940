"""Invariant 1 and H1 hold at all times across processes (docs/held-reservations.md).

Three writer processes share one ledger file, each with its own connection and `Judge`, and race for two
nodes' GPUs: pods of random priorities and gangs assume devices (re-checked in the assume's transaction
against the rows and the slots that block them), nominations and gang plans are created (re-checked in
theirs), rows go away, holds are released and swept. Meanwhile this process reads the ledger in read
transactions (one consistent snapshot each) and checks every snapshot: the rows alone never exceed a
device (invariant 1), and the rows no live nomination claims plus every live slot never do either (H1).
"""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from core_builders import VENDORS, gpu, node

from app.core.holds import GANG, NOMINATION, Asker, Hold, gang_key, nomination_key, overflowing
from app.core.model import DeviceUse
from app.core.recheck import misfit
from app.core.usage import sum_uses
from app.state.holdstore import HOLD_COLUMNS, Asking, Judge, NodeState, hold_of
from app.state.ledger import ASSUMED, Entry, Ledger
from app.state.usecodec import decode_uses

NODES = {n: node(n, gpu(f"{n}-0", 0, count=4, mem=10000), gpu(f"{n}-1", 1, count=4, mem=10000)) for n in "ab"}
SECONDS = 6.0


def _use(rng: random.Random, name: str) -> dict[str, DeviceUse]:
    return {f"{name}-{rng.randrange(2)}": DeviceUse(1, rng.randrange(500, 6000), rng.choice([0, 10, 30]))}


def _assume(ledger: Ledger, rng: random.Random, now: float) -> None:
    name, uid = rng.choice(list(NODES)), f"pod-{rng.randrange(40)}"
    uses, asker = _use(rng, name), Asker(uid, rng.randrange(4), rng.choice(["", "ns/g1"]))

    def check(others: list[Mapping[str, DeviceUse]] | None, quota: dict[str, int]) -> Entry | None:
        assert others is not None
        if misfit(NODES[name], sum_uses(others), uses, VENDORS):
            return None
        return Entry(
            uid, "ns", uid, name, ASSUMED, uses, updated_at=now, priority=asker.priority, gang=asker.gang
        )

    ledger.assume(uid, name, check, asking=Asking(asker, now, -1, f"ns/{uid}"))


def _hold(ledger: Ledger, rng: random.Random, now: float) -> None:
    gang = rng.random() < 0.4
    owner = "ns/g1" if gang else f"pod-{rng.randrange(40)}"
    key, priority = (gang_key(owner) if gang else nomination_key(owner)), rng.randrange(4)
    names = [rng.choice(list(NODES)) for _ in range(2 if gang else 1)]
    victims: list[str] = []

    def check(states: Mapping[str, NodeState]) -> Sequence[Hold] | None:
        slots = []
        for i, name in enumerate(names):
            state = states[name]
            if not gang and state.rows:
                victims.extend(rng.sample(sorted(state.rows), k=min(1, len(state.rows))))
            rows = [u for uid, u in state.rows.items() if uid not in victims]
            ahead = [h.uses for h in state.holds if h.priority >= priority]
            uses = _use(rng, name)
            taken = sum_uses([*rows, *ahead, *(s.uses for s in slots if s.node == name)])
            if misfit(NODES[name], taken, uses, VENDORS):
                return None
            kind, slot = (GANG, f"pod-{i}") if gang else (NOMINATION, "")
            expires = now + rng.uniform(0.2, 2)
            claimed = tuple(victims)
            slots.append(
                Hold(key, slot, kind, owner, "ns", owner, priority, name, uses, claimed, "", now, expires)
            )
        return slots

    ledger.create_holds(key, set(names), check, now=now)


def _writer(path: str, seed: int, until: float) -> None:
    ledger = Ledger(Path(path))
    ledger.use_judge(Judge(NODES.get, VENDORS, time.time))
    rng = random.Random(seed)
    while time.time() < until:
        now, op = time.time(), rng.random()
        if op < 0.5:
            _assume(ledger, rng, now)
        elif op < 0.75:
            _hold(ledger, rng, now)
        elif op < 0.9:
            ledger.remove([f"pod-{rng.randrange(40)}"])
        elif op < 0.97:
            ledger.release_holds(
                [nomination_key(f"pod-{rng.randrange(40)}"), gang_key("ns/g1")], "released", now
            )
        else:
            ledger.sweep_holds(now)
    ledger.close()


def _check(ledger: Ledger) -> int:
    """One consistent snapshot: invariant 1 and H1 on every node; returns the live holds seen."""
    with ledger.transaction(write=False) as db:
        now = time.time()
        rows = db.execute("SELECT uid, node, uses FROM reservations").fetchall()
        slots = db.execute(f"SELECT {HOLD_COLUMNS} FROM holds").fetchall()
    stored = [hold_of(s) for s in slots]
    for name, devices in NODES.items():
        mine = {str(uid): decode_uses(uses) for uid, n, uses in rows if n == name}
        total = sum_uses(mine.values())
        for device in devices.devices:
            used = total.get(device.id, DeviceUse())
            assert used.slots <= device.count and used.mem <= device.devmem and used.cores <= device.devcore
        assert overflowing(devices, mine, stored, now, VENDORS) == [], f"H1 broken on {name}"
    return sum(h.live(now) for h in stored)


def test_h1_and_invariant_1_hold_at_all_times_across_processes(tmp_path: Path) -> None:
    Ledger(tmp_path).close()  # the schema, before the writers race to open it
    until = time.time() + SECONDS
    context = multiprocessing.get_context("fork")  # each writer opens its own connection after the fork
    writers = [context.Process(target=_writer, args=(str(tmp_path), seed, until)) for seed in range(3)]
    for writer in writers:
        writer.start()
    ledger = Ledger(tmp_path)
    snapshots, with_holds = 0, 0
    try:
        while any(w.is_alive() for w in writers):
            with_holds += _check(ledger) > 0
            snapshots += 1
            time.sleep(0.01)
        with_holds += _check(ledger) > 0
    finally:
        for writer in writers:
            writer.join(30)
            if writer.is_alive():
                writer.kill()
        ledger.close()
    assert all(w.exitcode == 0 for w in writers)
    assert snapshots > 20 and with_holds > 5, (snapshots, with_holds)
