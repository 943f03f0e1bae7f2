"""Eight workers through a switch as slow as BMv2's one thread: what BMv2 showed, in the fast lane.

On BMv2 (a few thousand packets a second, a queue in front) members that had sent kept resending while one
member's UPDATE was missing, every resend queueing behind the frames it repeated, and rounds crawled.  The
emulator's slow pipe (`ImpairmentConfig(pipe_rate=..., pipe_queue=...)`, docs/switch.md) makes the emulator
as slow; here several rounds over loopback must be exact, each within a small factor of the fastest, with
duplicates a small share of the UPDATEs, the switch's PENDING answers doing the telling, and members the
switch has counted holding their chunks while a peer is late (docs/design.md, "Loss recovery and
congestion").  Round times are compared only with each other, in one run.
"""

import collections
import threading
import time

import numpy as np
import pytest
from helpers import dense_fixed_sum, sparse_gradients

from hina import codec
from hina.control import Member
from hina.host import JobSpec, UdpTransport, Worker

WORKERS, LENGTH = 8, 10_000
SPEC = JobSpec(job_id=7, words=64, slots=16)  # 157 chunks a worker, 1,256 UPDATEs a round
RATE = 3000  # packets a second: a round's UPDATEs take 0.4 s of the pipe, its resends queue behind them


def slow_rounds(make_switch, rounds: int, late: float = 0.0, **impair) -> tuple[list[float], dict, list[Worker]]:
    """`rounds` dense aggregations of the same workers through a slow pipe, the last worker starting each
    `late` seconds after the others, each checked exact: the rounds' seconds, the switch's counters, the
    workers."""
    sw = make_switch(pipe_rate=RATE, **impair)
    transports = [UdpTransport(sw.data_address) for _ in range(WORKERS)]
    sw.pipeline.add_job(SPEC.switch_config(WORKERS, [Member(w, t.address) for w, t in enumerate(transports)]))
    workers = [Worker(t, SPEC, w, deadline=20.0) for w, t in enumerate(transports)]
    grads = sparse_gradients(np.random.default_rng(4), WORKERS, LENGTH, 1.0)
    params = codec.CodecParams(length=LENGTH, workers=WORKERS, mode="dense")
    seconds = []

    def run(w, results):
        try:
            if w == WORKERS - 1:
                time.sleep(late)
            results[w] = workers[w].aggregate(params, grads[w])
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread
            results[w] = exc

    try:
        for r in range(rounds):
            results: list = [None] * WORKERS
            threads = [threading.Thread(target=run, args=(w, results)) for w in range(WORKERS)]
            began = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            seconds.append(time.perf_counter() - began)
            for w, result in enumerate(results):
                if isinstance(result, BaseException):
                    raise result
                assert np.array_equal(result.fixed, dense_fixed_sum(grads, result.shift)), f"round {r}, worker {w}"
    finally:
        for t in transports:
            t.close()
    return seconds, sw.counters(), workers


@pytest.mark.parametrize("impair", [dict(drop=0.01, seed=3), dict(pipe_queue=48)],
                         ids=["one-percent-loss", "a-short-queue"])
def test_a_slow_switch_with_a_little_loss_keeps_every_round_near_the_fastest(make_switch, impair):
    """1% of the frames lost each way (the per-packet path), or a queue of 48 that drops past it (the batched
    path's ring): every round exact and within 3x of the fastest; the switch answered repeats PENDING, the
    workers heard it, and repeats stayed a small share of the UPDATEs."""
    seconds, counters, workers = slow_rounds(make_switch, 5, **impair)
    job = counters["jobs"][SPEC.job_id]
    pipe = counters["slow_pipe"]
    assert pipe["waited"] > pipe["queued"] / 2, pipe  # the pipe, not the host, set the pace
    assert counters["impair_in"].get("dropped", 0) + pipe["dropped"] > 0, counters  # frames were lost
    duplicates = job["drops"].get("duplicate", 0)
    assert job["pending"] == duplicates > 0, job  # each repeat of a waiting copy was answered PENDING
    assert sum(w.stats["pending"] for w in workers) >= job["pending"]  # each went to its sender, the first to all
    assert duplicates < 0.15 * job["updates"], job
    assert max(seconds) <= 3 * min(seconds), seconds


def test_while_a_member_is_late_the_members_counted_hold_their_chunks(make_switch):
    """The last worker starts half a second after the others, every round.  The switch holds the others'
    chunks and answers their first repeats PENDING with them counted: they hold those chunks and ask again
    only after ever longer holds, so their timers fire once or twice a round each, not at every backed-off
    timeout (five times a round each where the sender ignores PENDING), and repeats stay a small share of
    the UPDATEs."""
    rounds = 3
    seconds, counters, workers = slow_rounds(make_switch, rounds, late=0.5)
    job = counters["jobs"][SPEC.job_id]
    stats = sum((w.stats for w in workers), start=collections.Counter())
    assert stats["pending"] > 0 and stats["asked"] > 0, stats  # held, and asked again
    assert stats["timeouts"] <= 3 * WORKERS * rounds, stats
    assert job["drops"].get("duplicate", 0) < 0.15 * job["updates"], job
    assert min(seconds) >= 0.5 and max(seconds) <= 3 * min(seconds), seconds
