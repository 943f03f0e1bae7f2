"""Workers against a slow switch on a virtual clock: the congestion window keeps resends few, and exact.

The issue's BMv2 case: simple_switch_grpc forwards a few thousand packets a
second, and three workers with 64 slots each in flight overran its queues;
every drop timed out and the resends added load.  Here the switch serves one
UPDATE per 0.3 ms (3,333 packets/s) from a 64-packet queue and drops the
rest; 3 workers, K = 32, 64 slots, the workers' own defaults (RFC 6298 timer
from 100 ms, window from 16 chunks).
"""

import numpy as np
import pytest

from codec.ops import Op
from host.window import CongestionWindow, RttEstimator
from netsim import VirtualNetwork, expected, run_transfers
from switch_emulator import JobConfig, Member, Pipeline

WORKERS, WORDS, SLOTS = 3, 32, 64


def slow_switch_run(adaptive: bool, seed: int = 3, chunks: int = 400, drop: float = 0.0):
    rng = np.random.default_rng(seed)
    p = Pipeline()
    p.add_job(JobConfig(5, WORKERS, WORDS, 0, SLOTS, tuple(Member(w, ("w", w)) for w in range(WORKERS))))
    payloads = [rng.integers(-(2**20), 2**20, size=chunks * WORDS).astype(np.int32) for _ in range(WORKERS)]
    net = VirtualNetwork(p, rng, drop=drop, latency=1e-4, jitter=5e-5, service=3e-4, queue=64)
    windows = [CongestionWindow(SLOTS) for _ in range(WORKERS)] if adaptive else None
    results, net, stats = run_transfers(p, payloads, Op.ADD, job_id=5, words=WORDS, slot_base=0, slots=SLOTS,
                                        rng=rng, rounds=2, deadline=30.0, net=net, windows=windows,
                                        rtts=[RttEstimator() for _ in range(WORKERS)])
    want = expected(Op.ADD, payloads)
    assert all(np.array_equal(r, want) for per_worker in results for r in per_worker)
    resent = sum(s.get("retransmissions", 0) for rnd in stats for s in rnd)
    useful = 2 * WORKERS * chunks
    return resent / useful, net


def test_the_window_fits_a_slow_switch():
    share, net = slow_switch_run(adaptive=True)
    assert share <= 0.03, f"{share:.1%} of useful packets resent"
    fixed, fixed_net = slow_switch_run(adaptive=False)
    assert fixed > 3 * max(share, 0.01)  # all 64 slots in flight: the queue overflows
    assert fixed_net.overflows > net.overflows


@pytest.mark.parametrize("seed", range(3))
def test_exact_on_a_slow_lossy_switch(seed):
    share, _ = slow_switch_run(adaptive=True, seed=seed, chunks=150, drop=0.01)
    assert share < 0.10  # a lost UPDATE costs every worker a resend (none knows whose was lost)
