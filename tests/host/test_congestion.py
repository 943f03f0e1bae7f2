"""Workers against a slow switch on a virtual clock: the congestion window keeps resends few, and exact.

The case on BMv2 that set the window: simple_switch_grpc forwards a few thousand packets a
second, and three workers with 64 slots each in flight overran its queues;
every drop timed out and the resends added load.  Here the switch serves one
UPDATE per 0.3 ms (3,333 packets/s) from a 64-packet queue and drops the
rest; 3 workers, K = 32, 64 slots, the workers' own defaults (RFC 6298 timer
from 100 ms, window from 16 chunks).

And beside a TCP flow: a drop-tail link shared with a Reno flow, where the
delay rule alone gave the flow the link and the contested window keeps a
share of it, and the fair-share rules (`CongestionSettings(fair=True)`, every
worker's default) at least 40% of it.
"""

import math

import numpy as np
import pytest

from hina.codec.ops import Op
from hina.control import JobConfig, Member
from hina.emulator import Pipeline
from hina.host.congestion import CongestionWindow
from hina.host.congestion_settings import CONTEST, CongestionSettings
from hina.host.window import RttEstimator
from hina.sim.netsim import VirtualNetwork, beside_reno, expected, run_transfers

WORKERS, WORDS, SLOTS = 3, 32, 64


def slow_switch_run(adaptive: bool, seed: int = 3, chunks: int = 400, drop: float = 0.0, fair: bool = False):
    rng = np.random.default_rng(seed)
    p = Pipeline()
    p.add_job(JobConfig(5, WORKERS, WORDS, 0, SLOTS, tuple(Member(w, ("w", w)) for w in range(WORKERS))))
    payloads = [rng.integers(-(2**20), 2**20, size=chunks * WORDS).astype(np.int32) for _ in range(WORKERS)]
    net = VirtualNetwork(p, rng, drop=drop, latency=1e-4, jitter=5e-5, service=3e-4, queue=64)
    windows = [CongestionWindow(SLOTS, CongestionSettings(fair=fair)) for _ in range(WORKERS)] if adaptive else None
    results, net, stats = run_transfers(p, payloads, Op.ADD, job_id=5, words=WORDS, slot_base=0, slots=SLOTS,
                                        rng=rng, rounds=2, deadline=30.0, net=net, windows=windows,
                                        rtts=[RttEstimator.fair() if fair else RttEstimator() for _ in range(WORKERS)])
    want = expected(Op.ADD, payloads)
    assert all(np.array_equal(r, want) for per_worker in results for r in per_worker)
    resent = sum(s.get("retransmissions", 0) for rnd in stats for s in rnd)
    useful = 2 * WORKERS * chunks
    return resent / useful, net


@pytest.mark.parametrize("fair", [False, True])
def test_the_window_fits_a_slow_switch(fair):
    share, net = slow_switch_run(adaptive=True, fair=fair)
    assert share <= 0.03, f"{share:.1%} of useful packets resent"
    fixed, fixed_net = slow_switch_run(adaptive=False)
    assert fixed > 3 * max(share, 0.01)  # all 64 slots in flight: the queue overflows
    assert fixed_net.overflows > net.overflows


@pytest.mark.parametrize("fair", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_exact_on_a_slow_lossy_switch(seed, fair):
    share, _ = slow_switch_run(adaptive=True, seed=seed, chunks=150, drop=0.01, fair=fair)
    assert share < 0.10  # a lost UPDATE costs every worker a resend (none knows whose was lost)


# -- beside a loss-based TCP flow: Mininet's 85 Mbit/s star with 9000-byte frames and a drop-tail queue
# of 128 packets on rank 0's downlink, shared with a Reno flow from round 1 on (netsim.beside_reno) ------

def beside_tcp(contest: float, seed: int, flow: bool = True):
    r = beside_reno(contest, seed, queue=128, flow=flow)
    return r["alone"], r["later"], r["share"], r["cwnds"], r["window"], r["flow"]


@pytest.mark.parametrize("seed", range(2))
def test_beside_a_tcp_flow_the_window_keeps_a_share_instead_of_yielding_the_link(seed):
    """The flow keeps the queue standing.  Timers that fit the path (a resend waits on the answers that
    are due, not on a constant, and no timeout of a peer's wait is taken for a loss) keep the delay rule
    from collapsing to its floor as it once did (2% of the link, its rounds 44x slower); contested, the
    window grows as Reno does and keeps at least as much (the window can hold at most 64 of the queue's
    128 + 64 frames: 33%)."""
    alone, later, share, cwnds, window, tcp = beside_tcp(CONTEST, seed)
    y_alone, y_later, y_share, y_cwnds, y_window, _ = beside_tcp(math.inf, seed)
    assert y_window.contests == 0 and window.contests >= 1 and tcp.cuts >= 1
    assert share >= 0.25 and y_share >= 0.25 and share >= 0.95 * y_share
    assert min(cwnds) > window.minimum and min(y_cwnds) > y_window.minimum  # neither cut to its floor
    assert later <= 1.05 * y_later
    assert alone == y_alone  # round 0 ran alone, the same either way


# -- the fair-share rules: a 128-packet queue at 30 and 100 Mbit/s, the flow from round 1 on -----------------

@pytest.mark.parametrize("rate", [30, 100])
def test_the_fair_share_rules_keep_a_share_the_shipped_rules_do_not(rate):
    """A 128-packet queue is 310 ms at 30 Mbit/s and 92 ms at 100.  The fair-share window contests the
    flow's queue and catches up towards an equal split (50%): at least a third of the link, and more than
    the delay rule alone; no worker's window is cut to its floor, and every sum is exact (beside_reno
    checks them)."""
    r = beside_reno(None, 0, fair=True, rate_mbps=rate, rounds=4)
    y = beside_reno(math.inf, 0, rate_mbps=rate, rounds=4)
    assert r["window"].fair and r["window"].contests >= 1 and y["window"].contests == 0 and r["flow"].cuts >= 1
    assert r["share"] >= 0.33
    # seeds 0-3 at 100 Mbit/s: 1.13-1.16 times the delay rule's share since the timeout's cap follows the
    # median of the recent round trips (1.14-1.17 when it followed the least, which timed out more)
    assert r["share"] >= 1.1 * y["share"]
    assert min(r["least"]) > r["window"].minimum
    assert r["alone"] == pytest.approx(y["alone"], rel=0.05)  # round 0 ran alone: about as fast either way


def test_alone_the_fair_share_rules_never_contest_and_run_at_line_rate():
    """Without the flow the fair-share window is never contested, and every round is within 5% of
    round 0's time at 93% of the link or better."""
    r = beside_reno(None, 0, fair=True, flow=False)
    assert r["window"].contests == 0 and r["share"] >= 0.93
    assert r["later"] <= r["alone"] * 1.05
