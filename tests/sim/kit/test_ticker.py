"""The harness's background loop (sim/kit/ticker.py): a tick every period until stopped, none after."""

from __future__ import annotations

import threading
import time

from sim.kit.ticker import Ticker


def test_ticks_every_period_until_stopped() -> None:
    ticks: list[float] = []
    third = threading.Event()

    def tick() -> None:
        ticks.append(time.monotonic())
        if len(ticks) == 3:
            third.set()

    ticker = Ticker("test-ticker", 0.01, tick)
    ticker.start()
    assert third.wait(5)
    ticker.stop(5)
    stopped_at = len(ticks)
    time.sleep(0.05)
    assert len(ticks) == stopped_at >= 3


def test_the_first_tick_waits_a_period_and_stop_does_not() -> None:
    ticks: list[float] = []
    ticker = Ticker("test-ticker", 30.0, lambda: ticks.append(time.monotonic()))
    started = time.monotonic()
    ticker.start()
    ticker.stop(5)
    assert ticks == []
    assert time.monotonic() - started < 5
