"""The slow pipe's queue: one packet every 1/R seconds, Q waiting at most, drop-tail; and its ring of frames."""

import socket
import time

import numpy as np
import pytest

from hina.codec.ops import Op
from hina.emulator import InProcessSwitch
from hina.emulator.impair import ImpairmentConfig
from hina.emulator.slow_pipe import FrameRing, SlowPipe
from hina.wire.headers import MsgType, pack_header


def test_a_burst_goes_through_one_packet_per_gap_whatever_the_loop_does():
    pipe = SlowPipe(rate=1000, queue=1000)
    assert pipe.arrive(0.0, 100) == 100
    assert pipe.take(0.0) == 1  # the first starts as it arrives
    assert pipe.next_timer() == pytest.approx(0.001)
    assert pipe.take(0.0005) == 0
    assert pipe.take(0.0105) == 10  # packets 1..10 started at 1..10 ms
    assert pipe.take(1.0) == 89  # a loop that woke late takes every turn that came: the rate is kept
    assert pipe.next_timer() is None and pipe.waiting == 0
    assert pipe.stats == {"queued": 100, "waited": 99, "dropped": 0}


def test_a_full_queue_drops_what_comes_and_counts_it():
    pipe = SlowPipe(rate=1000, queue=10)
    assert pipe.arrive(0.0, 100) == 11  # one starts now, ten wait
    assert pipe.stats["dropped"] == 89
    assert pipe.arrive(0.0002, 5) == 0  # none started since: the queue is still full
    assert pipe.take(0.0002) == 1
    assert pipe.take(0.0031) == 3  # packets 1..3 started: three places free
    assert pipe.arrive(0.0031, 5) == 3
    assert pipe.stats == {"queued": 14, "waited": 13, "dropped": 96}


def test_an_idle_pipe_takes_the_next_packet_when_it_comes():
    pipe = SlowPipe(rate=100, queue=4)
    assert pipe.arrive(0.0, 1) == 1 and pipe.take(0.0) == 1
    assert pipe.arrive(0.004, 1) == 1 and pipe.take(0.004) == 0  # the pipe is busy until 10 ms
    assert pipe.take(0.010) == 1
    assert pipe.arrive(5.0, 2) == 2 and pipe.take(5.0) == 1 and pipe.next_timer() == pytest.approx(5.01)


def test_over_a_second_of_steady_overload_the_pipe_takes_its_rate_and_drops_the_rest():
    pipe = SlowPipe(rate=2000, queue=50)
    taken = kept = 0
    for i in range(10_000):  # 10,000 packets a second, one every 100 us
        now = i * 1e-4
        taken += pipe.take(now)
        kept += pipe.arrive(now, 1)
    taken += pipe.take(1.0)
    assert taken == pytest.approx(2000, abs=2) and kept - taken == pipe.waiting <= 50
    assert pipe.stats["dropped"] == 10_000 - kept


@pytest.mark.parametrize("rate,queue", [(0, 10), (-1, 10), (float("inf"), 10), (10, 0), (10, 1.5)])
def test_a_bad_rate_or_queue_is_refused(rate, queue):
    with pytest.raises(ValueError):
        SlowPipe(rate, queue)


@pytest.mark.parametrize("bad", [dict(pipe_rate=-1), dict(pipe_rate=float("inf")), dict(pipe_queue=0),
                                 dict(pipe_queue=1 << 20), dict(pipe_queue=True)])
def test_a_bad_config_is_refused(bad):
    with pytest.raises(ValueError, match="pipe_"):
        ImpairmentConfig(**bad)


def batch(frames: list[bytes], entry_bytes: int = 64):
    """Frames laid out as `recvmmsg` leaves them: fixed entries, strided lengths, a name row each."""
    rx = np.zeros(len(frames) * entry_bytes, np.uint8)
    lengths = np.zeros(2 * len(frames), np.uint32)[::2]
    names = np.zeros((len(frames), 4), np.uint8)
    for i, f in enumerate(frames):
        rx[i * entry_bytes : i * entry_bytes + len(f)] = np.frombuffer(f, np.uint8)
        lengths[i] = len(f)
        names[i] = i
    return rx, entry_bytes, lengths, names


def held(ring: FrameRing, runs) -> list[bytes]:
    return [ring.rx[i * ring.stride : i * ring.stride + int(ring.lengths[i])].tobytes()
            for start, end in runs for i in range(start, end)]


def test_the_ring_keeps_frames_in_order_across_its_end_and_grows_to_a_longer_frame():
    ring = FrameRing(capacity=4, name_bytes=4, stride=8)
    frames = [bytes([i]) * (3 + i) for i in range(7)]
    ring.push(*batch(frames[:3]), 3)
    assert held(ring, ring.pop(2)) == frames[:2]
    ring.push(*batch(frames[3:6]), 3)  # entries 3, 0, 1: around the end; frame 5 is 8 bytes, 6 is 9
    assert held(ring, ring.pop(1)) == frames[2:3]
    ring.push(*batch(frames[6:7]), 1)  # wider than the stride: the ring grows, keeping what it holds
    assert ring.stride == 16
    runs = ring.pop(10)
    assert runs == [(3, 4), (0, 3)] and held(ring, runs) == frames[3:7] and ring.count == 0
    with pytest.raises(ValueError):
        ring.push(*batch(frames[:5]), 5)


# -- through the UDP switch: the batched path's ring and the per-packet path's queue ------------------------------
def burst(sw, n: int) -> tuple[float, float]:
    """n frames for a job the switch lacks, sent at once; when the first went, and when the last did."""
    frame = pack_header(MsgType.UPDATE, Op.ADD, 99, 0, 0, 0, 0, 0, 0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        began = time.monotonic()
        for _ in range(n):
            sock.sendto(frame, sw.data_address)
        return began, time.monotonic()


def settled(sw, want) -> dict:
    """The switch's counters once `want(counters)` holds (5 s at most)."""
    give_up = time.monotonic() + 5
    while not want(counters := sw.counters()) and time.monotonic() < give_up:
        time.sleep(0.01)
    return counters


@pytest.mark.parametrize("batch", [None, False], ids=["batched", "per-packet"])
def test_the_switch_takes_a_burst_at_the_pipes_rate_and_drops_past_its_queue(make_switch, batch):
    """200 packets a second: a burst of 60 reaches the rules no faster than that (an upper bound, which a busy
    host cannot break: it can only make them later), all of them in the end; a queue of 10 drops the rest of
    a burst and counts them (how many depends on how the switch's reads split the burst), and what it kept
    reaches the rules."""
    sw = make_switch(batch=batch, pipe_rate=200, pipe_queue=100)
    began, _ = burst(sw, 60)
    time.sleep(0.02)  # a switch at full speed would have taken them all by now
    assert sw.counters()["frames"] <= 1 + 200 * (time.monotonic() - began)
    done = settled(sw, lambda c: c["frames"] == 60)
    assert done["frames"] == 60 and done["drops"] == {"unknown_job": 60}
    assert done["slow_pipe"]["queued"] == 60 and done["slow_pipe"]["dropped"] == 0
    assert done["slow_pipe"]["waited"] > 0

    small = make_switch(batch=batch, pipe_rate=200, pipe_queue=10)
    burst(small, 60)
    done = settled(small, lambda c: c["slow_pipe"]["queued"] + c["slow_pipe"]["dropped"] == 60
                   and c["frames"] == c["slow_pipe"]["queued"])
    kept = done["slow_pipe"]["queued"]
    assert done["slow_pipe"]["dropped"] == 60 - kept > 0 and done["frames"] == kept >= 11  # 10 waiting, 1 taken


def test_the_in_process_switch_has_a_slow_pipe_too():
    """Frames a port sends reach the rules one per 1/R: at 100 packets a second with a queue of 3, of 5 sent at
    once one goes through at once, three wait their turns (the ports' `recv` wakes the switch for each) and one
    is dropped (a job the switch lacks: the rules drop and count each that reaches them)."""
    sw = InProcessSwitch(impair=ImpairmentConfig(pipe_rate=100, pipe_queue=3))
    port = sw.attach("w0")
    frame = pack_header(MsgType.UPDATE, Op.ADD, 99, 0, 0, 0, 0, 0, 0)
    for _ in range(5):
        port.send(frame)
    assert sw.pipeline.counters()["frames"] == 1 and sw.slow_pipe.stats == {"queued": 4, "waited": 3, "dropped": 1}
    give_up = time.monotonic() + 5
    while sw.pipeline.counters()["frames"] < 4 and time.monotonic() < give_up:
        port.recv(0.05)
    assert sw.pipeline.counters()["frames"] == 4 and sw.next_timer() is None
