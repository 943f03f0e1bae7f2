"""The worker's batched loop (`Worker._batched`), counted: the compiled calls and the system calls a received batch
costs, on a socket stand-in that answers every UPDATE as a one-worker switch would."""

import collections
import math
import types

import numpy as np
import pytest

from hina.codec.ops import Op
from hina.host import agent
from hina.host import sendplane as sp
from hina.host.window import PhaseTransfer, Ring, RttEstimator, SlotPool, warm
from hina.wire.headers import AT_MSG_TYPE, MsgType

WORDS, SLOTS = 16, 8


class EchoSocket:
    """A `BatchSocket`'s interface over a switch that answers each UPDATE of a one-worker job with its RESULT.
    What the worker sends is in flight until the worker waits (`select`): then up to `per_wait` answers arrive,
    as a switch's answers arrive while a worker sleeps; a read without a wait finds only what came before.
    Counts the calls that would be system calls: `select`, `recvmmsg` (and the empty ones), `sendmmsg`."""

    entries, fd, segment, segments, tx_address = 64, 99, 0, 0, 0

    def __init__(self, per_wait: int):
        self.per_wait = per_wait
        self.entry_bytes = Ring.frame_size(WORDS)
        self.rx_array = np.zeros(self.entries * self.entry_bytes, np.uint8)
        self.rx_lengths = np.zeros(2 * self.entries, np.uint32)[::2]  # strided, as the mmsghdr lengths are
        capacity = Ring.frames_for(SLOTS)
        self.tx_array = np.zeros(capacity * self.entry_bytes, np.uint8)
        self.tx_iov = np.zeros(2 * capacity, np.uint64)
        self.in_flight: collections.deque[np.ndarray] = collections.deque()
        self.arrived: collections.deque[np.ndarray] = collections.deque()
        self.calls = collections.Counter()

    def send(self, count: int, coalesced: bool = False) -> int:
        self.calls["sendmmsg"] += 1
        for m in range(count):
            at, size = int(self.tx_iov[2 * m]), int(self.tx_iov[2 * m + 1])
            frame = self.tx_array[at : at + size].copy()
            frame[AT_MSG_TYPE] = MsgType.RESULT  # one worker: the RESULT is the UPDATE's words
            self.in_flight.append(frame)
        return 0

    def select(self, readable, writable, errors, timeout):
        assert readable == (self.fd,) and timeout > 0
        self.calls["select"] += 1
        for _ in range(min(self.per_wait, len(self.in_flight))):
            self.arrived.append(self.in_flight.popleft())
        return (readable if self.arrived else []), [], []

    def recv(self) -> int:
        self.calls["recvmmsg"] += 1
        n = min(self.entries, len(self.arrived))
        for i in range(n):
            frame = self.arrived.popleft()
            self.rx_array[i * self.entry_bytes : i * self.entry_bytes + frame.size] = frame
            self.rx_lengths[i] = frame.size
        self.calls["datagrams"] += n
        self.calls["empty"] += n == 0
        return n


def counting(calls, name, fn):
    def counted(*args):
        calls[name] += 1
        return fn(*args)
    return counted


@pytest.mark.parametrize("per_wait", [1, 3, 64])
def test_a_received_batch_costs_one_compiled_call_one_wait_and_one_read(monkeypatch, per_wait):
    """Each wake-up reads what arrived with one recvmmsg (never an empty read before it waits), takes all of
    it and runs the timers in one compiled call, and sends what that let out with one sendmmsg; the sum is the
    payload, every chunk answered."""
    warm()  # the kernels' warm-up, which drives every entry point, before they are counted
    io = EchoSocket(per_wait)
    monkeypatch.setattr(agent, "select", types.SimpleNamespace(select=io.select))
    compiled = collections.Counter()
    for name in ("step_bytes", "take_bytes", "poll_bytes", "receive_bytes", "fill_bytes", "next_timer_bytes"):
        monkeypatch.setattr(sp, name, counting(compiled, name, getattr(sp, name)))
    chunks = 40
    payload = np.arange(WORDS * chunks, dtype=np.int32) - 77
    # no timer fires in the test's life: every wake-up is an answer's
    rtt = RttEstimator(initial=60.0, minimum=60.0, maximum=60.0, probe_floor=math.inf)
    xfer = PhaseTransfer(job_id=1, worker_id=0, words=WORDS, pool=SlotPool(0, SLOTS), rtt=rtt, tag=5, op=Op.ADD,
                         payload=payload, name="phase", now=0.0, deadline=60.0,
                         ring=Ring(WORDS, SLOTS, tx=io.tx_array, iov=io.tx_iov, base=io.tx_address))
    agent.Worker._batched(xfer, io)
    assert xfer.done and xfer.result.tolist() == payload.tolist()
    assert xfer.stats["frames"] == chunks and xfer.stats["retransmissions"] == 0
    wakeups = io.calls["select"]
    assert wakeups == math.ceil(chunks / min(per_wait, SLOTS)) if per_wait <= SLOTS else wakeups >= chunks // SLOTS
    assert io.calls["recvmmsg"] == wakeups and io.calls["empty"] == 0  # a wake-up: one wait, one read
    assert io.calls["datagrams"] == chunks
    # one compiled call a batch: `step`; the first window and its timer once per transfer
    assert compiled == {"step_bytes": wakeups, "fill_bytes": 1, "next_timer_bytes": 1}, compiled
    assert io.calls["sendmmsg"] <= 1 + wakeups  # the first window, then what each batch let out
