"""The simulator's clock (sim/clock.py) and link (sim/links.py): order, serialisation, a full queue."""

from __future__ import annotations

import math

import pytest

from hina.sim import Clock, Link, Server


def test_simultaneous_events_run_in_the_order_they_were_scheduled():
    clock, ran = Clock(), []
    for name in "abc":
        clock.at(2.0, ran.append, name)
    clock.at(1.0, ran.append, "first")
    clock.at(2.0, ran.append, "d")
    assert clock.run() is False
    assert ran == ["first", "a", "b", "c", "d"] and clock.now == 2.0


def test_run_stops_at_until_and_callbacks_schedule_more():
    clock, ran = Clock(), []

    def tick(n):
        ran.append((clock.now, n))
        if n < 5:
            clock.at(clock.now + 1.0, tick, n + 1)
    clock.at(0.5, tick, 0)
    assert clock.run(until=2.5) is True  # ticks at 0.5, 1.5, 2.5; the next is due at 3.5
    assert ran == [(0.5, 0), (1.5, 1), (2.5, 2)] and clock.now == 2.5 and clock.next_at == 3.5 and len(clock) == 1
    clock.advance(3.0)
    assert clock.now == 3.0
    clock.advance(1.0)  # never back
    assert clock.now == 3.0
    assert clock.step(until=3.2) is False and clock.step(until=3.5) is True and ran[-1] == (3.5, 3)
    assert clock.run() is False and ran[-1] == (5.5, 5) and clock.next_at == math.inf and len(clock) == 0


def test_a_link_serialises_frames_back_to_back_then_adds_its_delay():
    link = Link(8e6, delay=1e-3)  # 8 Mbit/s: a byte per microsecond
    assert link.send(0.0, 1000) == pytest.approx(1000e-6 + 1e-3, rel=1e-12)
    # offered while the first is still leaving: it waits for it
    assert link.send(0.0005, 500) == pytest.approx(1500e-6 + 1e-3, rel=1e-12)
    # offered after the link went idle: it starts at once
    assert link.send(0.01, 250) == pytest.approx(0.01 + 250e-6 + 1e-3, rel=1e-12)
    assert link.free_at == pytest.approx(0.01 + 250e-6, rel=1e-12)
    assert link.carried == {"frames": 1750} and link.drops == {}


def test_a_full_drop_tail_queue_drops():
    link = Link(8e6, queue=2)  # one frame sending, one waiting: the queue holds 2
    assert link.send(0.0, 1000, "hina") == pytest.approx(1e-3)
    assert link.send(0.0, 1000, "hina") == pytest.approx(2e-3)
    assert link.send(0.0, 1000, "tcp") is None  # full
    assert link.send(0.5e-3, 1000, "tcp") is None  # the first is still leaving
    assert link.send(1e-3, 1000, "tcp") == pytest.approx(3e-3)  # the first has left: room for one
    assert link.carried == {"hina": 2000, "tcp": 1000} and link.drops == {"tcp": 2}
    assert link.dropped == 2


def test_a_server_without_a_queue_limit_never_drops():
    server = Server()
    assert [server.serve(0.0, 1.0) for _ in range(1000)][-1] == 1000.0
    assert server.dropped == 0


def test_a_server_counts_the_most_it_held_at_once_with_or_without_a_limit():
    # what a queue of any limit would have had to hold: a limit of `deepest` drops nothing, one less drops
    offered = [(0.0, 1.0), (0.0, 1.0), (0.5, 1.0), (2.5, 1.0), (2.6, 1.0), (10.0, 1.0)]
    free = Server()
    for now, seconds in offered:
        free.serve(now, seconds)
    assert free.deepest == 3  # at 0.5: the first serving, the second and third waiting
    for limit, drops in ((3, 0), (2, 1)):
        held = Server(queue=limit)
        for now, seconds in offered:
            held.serve(now, seconds)
        assert held.dropped == drops and held.deepest == min(3, limit)
