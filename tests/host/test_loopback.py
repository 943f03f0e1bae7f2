"""End to end on loopback: the UDP emulator, N workers, impairments, a flood; always exact."""

import socket
import threading
import time

import numpy as np
import pytest
from helpers import aggregate_over_udp, dense_fixed_sum, run_threads, sparse_gradients

from hina import codec
from hina.control import Member
from hina.host import AggregationTimeout, JobSpec, UdpTransport, Worker
from hina.wire.headers import pack_header

pytestmark = pytest.mark.slow


def check_exact(results, grads):
    want = dense_fixed_sum(grads, results[0].shift)
    for w, r in enumerate(results):
        assert np.array_equal(r.fixed, want), f"worker {w}"


@pytest.mark.parametrize("mode", codec.MODES)
@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_exact_with_loss_duplication_reordering(make_switch, workers, mode):
    sw = make_switch(drop=0.03, dup=0.02, reorder=0.02, seed=workers)
    grads = sparse_gradients(np.random.default_rng(workers), workers, 30_011, 0.05)
    params = codec.CodecParams(length=30_011, workers=workers, mode=mode)
    results, ws = aggregate_over_udp(sw, JobSpec(job_id=3, words=128, slots=8), params, grads)
    check_exact(results, grads)
    counters = sw.impairment_counters()
    assert counters["impair_in"]["dropped"] + counters["impair_out"]["dropped"] > 0
    assert sum(w.stats["retransmissions"] for w in ws) > 0


def test_workers_move_frames_by_the_batch_and_every_frame_reaches_the_switch(make_switch):
    """A worker on a UdpTransport sends with sendmmsg from the compiled sender's ring: every frame its
    counters name was handed to the kernel in a batch, and arrived (no loss here) as an UPDATE."""
    sw = make_switch()
    grads = sparse_gradients(np.random.default_rng(11), 3, 50_000, 0.05)
    params = codec.CodecParams(length=50_000, workers=3)
    results, ws = aggregate_over_udp(sw, JobSpec(job_id=6, words=64, slots=16), params, grads)
    check_exact(results, grads)
    frames = [w.stats["frames"] for w in ws]
    assert all(w.batch_io is not None and w.batch_io.sent == n and w.batch_io.failed == 0 for w, n in zip(ws, frames))
    # a RESULT for every chunk, taken by recvmmsg (a resend that met an incomplete copy is dropped by the switch,
    # and one answered after its worker finished is never read, so only first transmissions are owed one)
    assert all(w.batch_io.received >= n - w.stats["retransmissions"] > 0 for w, n in zip(ws, frames))
    # every frame arrives: taken into a copy, or a resend (a busy host's timer) answered from a complete copy
    # or dropped as a duplicate; one sent just before its worker's last RESULT may still be in the switch's socket
    deadline = time.monotonic() + 5
    while True:
        job = sw.pipeline.counters()["jobs"][6]
        seen = job["updates"] + job["resends"] + sum(job["drops"].values())
        if seen >= sum(frames) or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert seen == sum(frames) and set(job["drops"]) <= {"duplicate"}, job


def test_repeated_aggregations_reuse_slots(make_switch):
    sw = make_switch(drop=0.02, seed=7)
    spec = JobSpec(job_id=2, words=64, slots=4)
    rng = np.random.default_rng(5)
    transports = [UdpTransport(sw.data_address) for _ in range(3)]
    sw.pipeline.add_job(spec.switch_config(3, [Member(w, t.address) for w, t in enumerate(transports)]))
    workers = [Worker(t, spec, w) for w, t in enumerate(transports)]
    for step in range(3):
        grads = sparse_gradients(rng, 3, 5000 + step, 0.1)
        params = codec.CodecParams(length=grads[0].size, workers=3)
        out = [None] * 3
        def run(w, params=params, grads=grads, out=out):
            out[w] = workers[w].aggregate(params, grads[w])

        threads = [threading.Thread(target=run, args=(w,)) for w in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check_exact(out, grads)
    for t in transports:
        t.close()


def test_flood_of_random_and_mutated_frames_then_an_exact_aggregation(make_switch):
    sw = make_switch()
    spec = JobSpec(job_id=9, words=64, slots=4)
    grads = sparse_gradients(np.random.default_rng(1), 3, 20_000, 0.05)
    params = codec.CodecParams(length=20_000, workers=3)
    aggregate_over_udp(sw, spec, params, grads)  # installs the job and runs once
    before = sw.pipeline.counters()

    rng = np.random.default_rng(2)
    valid = pack_header(0, 0, 9, 0, 0, 1, 0, 64, 0) + bytes(4 * 64)
    flood = []
    for i in range(3000):
        kind = i % 3
        if kind == 0:
            frame = rng.bytes(int(rng.integers(0, 400)))
        elif kind == 1:
            frame = bytearray(valid)
            for _ in range(int(rng.integers(1, 4))):
                frame[int(rng.integers(0, 16))] = int(rng.integers(0, 256))
            frame = bytes(frame)
        else:
            frame = valid[: int(rng.integers(0, len(valid)))] + rng.bytes(int(rng.integers(0, 8)))
        flood.append(frame)
    attacker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for frame in flood:
        attacker.sendto(frame, sw.data_address)
    attacker.close()
    deadline = time.monotonic() + 10  # the switch thread counts the flood as it drains it
    while sw.pipeline.frames < before["frames"] + len(flood) and time.monotonic() < deadline:
        time.sleep(0.01)
    after = sw.pipeline.counters()
    assert after["frames"] - before["frames"] == len(flood)
    assert sum(after["drops"].values()) - sum(before["drops"].values()) == len(flood)
    assert after["jobs"][9]["updates"] == before["jobs"][9]["updates"]

    results, _ = aggregate_over_udp(sw, spec, params, grads)
    check_exact(results, grads)


def test_worker_without_answers_fails_naming_job_phase_offset(make_switch):
    sw = make_switch()  # no job installed: every UPDATE is dropped as unknown_job
    with UdpTransport(sw.data_address) as t:
        w = Worker(t, JobSpec(job_id=77, words=16, slots=2), 0, deadline=0.5)
        params = codec.CodecParams(length=1000, workers=2)
        told = r"job 77, worker 0: phase 'hello' .* offset 0 .* are all its workers running"
        with pytest.raises(AggregationTimeout, match=told):
            w.aggregate(params, np.ones(1000, dtype=np.float32))
    assert sw.pipeline.drops


def test_refuses_before_sending(make_switch):
    sw = make_switch()
    with UdpTransport(sw.data_address) as t:
        w = Worker(t, JobSpec(), 0)
        params = codec.CodecParams(length=100, workers=2)
        for bad, match in ((np.full(100, np.nan, np.float32), "non-finite"),
                           (np.ones(99, np.float32), "has 99 elements"),
                           (np.ones(100, np.float64), "is float64")):
            with pytest.raises(ValueError, match=match):
                w.aggregate(params, bad)
    assert sw.pipeline.frames == 0


@pytest.mark.parametrize("mode", ["auto", "dense"])
@pytest.mark.parametrize("drop", [0.001, 0.01, 0.05, 0.10])
def test_exact_at_each_loss_rate_with_duplication_and_reordering(make_switch, drop, mode):
    sw = make_switch(drop=drop, dup=0.01, reorder=0.01, seed=int(drop * 1000))
    grads = sparse_gradients(np.random.default_rng(11), 4, 50_000, 0.05)
    params = codec.CodecParams(length=50_000, workers=4, mode=mode)
    results, ws = aggregate_over_udp(sw, JobSpec(job_id=3, words=128, slots=16), params, grads)
    check_exact(results, grads)
    sent = sum(w.stats["frames"] for w in ws)
    retrans = sum(w.stats["retransmissions"] for w in ws)
    assert retrans < sent  # backoff: far from a storm even at 10% each way


def fresh_workers(sw, spec, n, deadline=5.0, join=True):
    """New worker processes' view: new sockets, new slot pools starting at copy 0.

    join: each worker joins through the control plane (which empties what an earlier run left);
    else the members are authorized and the slots left as they are, as on a switch whose
    workers speak only the data plane (BMv2 with its members configured).
    """
    transports = [UdpTransport(sw.data_address) for _ in range(n)]
    members = [Member(w, t.address) for w, t in enumerate(transports)]
    if join:
        for m in members:
            sw.pipeline.join(spec.switch_config(n), m)
    elif spec.job_id in sw.pipeline.jobs:
        sw.pipeline.jobs[spec.job_id].set_members(spec.switch_config(n, members))
    else:
        sw.pipeline.add_job(spec.switch_config(n, members))
    return [Worker(t, spec, w, deadline=deadline) for w, t in enumerate(transports)], transports


def close_all(transports):
    for t in transports:
        t.close()


def settle(sw, quiet=0.1, timeout=5.0):
    """Wait until the switch has seen no new frame for `quiet` seconds (what was sent is processed)."""
    deadline = time.monotonic() + timeout
    seen = sw.counters()["frames"]
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = sw.counters()["frames"]
        if now == seen:
            return
        seen = now


def test_rerunning_a_finished_job_is_exact_when_the_workers_join(make_switch):
    """Four workers aggregate, then four fresh workers run the same job again: the second run meets the first
    run's copies on the switch and must still sum exactly."""
    sw = make_switch()
    spec = JobSpec(job_id=1, words=64, slots=8)
    params = codec.CodecParams(length=20_000, workers=4)
    resent = 0
    for run in range(3):
        grads = sparse_gradients(np.random.default_rng(50 + run), 4, 20_000, 0.05)
        workers, transports = fresh_workers(sw, spec, 4)
        check_exact(run_threads(workers, params, grads), grads)
        resent += sum(w.stats["retransmissions"] for w in workers)
        close_all(transports)
    # no old RESULT went out again: the switch answers from a complete copy only a chunk sent
    # twice in this run (a timeout on a loaded machine), never a fresh worker's first send
    assert sw.pipeline.jobs[1].resends <= resent


def test_rerunning_a_finished_job_on_the_data_plane_alone_refuses_at_once_then_is_exact_after_a_reset(make_switch):
    from hina.host import StaleSwitchState

    sw = make_switch()
    spec = JobSpec(job_id=1, words=64, slots=8)
    grads = sparse_gradients(np.random.default_rng(50), 4, 20_000, 0.05)
    params = codec.CodecParams(length=20_000, workers=4)
    first, transports = fresh_workers(sw, spec, 4, join=False)
    check_exact(run_threads(first, params, grads), grads)
    close_all(transports)
    again, transports = fresh_workers(sw, spec, 4, join=False)
    start = time.monotonic()
    results = run_threads(again, params, grads)
    assert all(isinstance(r, StaleSwitchState) for r in results), results  # same gradients: nothing else
    assert time.monotonic() - start < 4.0  # refused at once, not at the deadline
    assert "earlier run" in str(results[0]) and "reset_job(1)" in str(results[0])
    close_all(transports)
    settle(sw)
    sw.pipeline.reset_job(1)
    after, transports = fresh_workers(sw, spec, 4, join=False)
    check_exact(run_threads(after, params, grads), grads)
    close_all(transports)


def test_a_hello_answered_from_an_earlier_run_is_refused(make_switch):
    """Fresh workers whose hello lands on the copy of an earlier run's identical hello get its nonces back."""
    from hina.host import StaleSwitchState

    sw = make_switch()
    spec = JobSpec(job_id=1, words=64, slots=4)
    old, transports = fresh_workers(sw, spec, 2, join=False)
    threads = [threading.Thread(target=w.hello) for w in old]  # a run that died right after its hello
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    close_all(transports)
    again, transports = fresh_workers(sw, spec, 2, join=False, deadline=1.0)
    errors = []

    def hello(w):
        try:
            w.hello()
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=hello, args=(w,)) for w in again]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 2 and all(isinstance(e, StaleSwitchState) for e in errors), errors
    assert "answered this worker's hello with an earlier run's" in str(errors[0])
    assert sw.pipeline.jobs[1].resends == 2  # the old hello's RESULT, sent again to each
    close_all(transports)


def crash(sw, spec, params, grads, rounds):
    """Workers run `rounds` rounds, then die, leaving slot copies mid-use and half a chunk behind."""
    n = len(grads)
    crashed, transports = fresh_workers(sw, spec, n, deadline=1.0)
    sessions = [codec.WorkerSession(params, g) for g in grads]
    for _ in range(rounds):  # drive the rounds by hand, then abandon them, as a crash would
        phases = [s.next_phase() for s in sessions]
        if phases[0] is None:
            break
        aggs = [None] * n

        def one(w):
            aggs[w] = crashed[w].transfer(phases[w].name, phases[w].ops, phases[w].words)

        threads = [threading.Thread(target=one, args=(w,)) for w in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s, a in zip(sessions, aggs):
            s.receive(a)
    crashed[0].transport.send(pack_header(0, 0, 1, 0, 0, 3, 999 * 64, 64, 4242) + bytes(4 * 64))  # half a chunk
    time.sleep(0.05)
    close_all(transports)


@pytest.mark.parametrize("mode", ["aligned", "dense", "sketch", "blocks"])
@pytest.mark.parametrize("crash_after", range(0, 5))
def test_restart_after_a_crash_in_any_round_is_exact_when_the_workers_join(make_switch, crash_after, mode):
    sw = make_switch()
    spec = JobSpec(job_id=1, words=64, slots=4)
    params = codec.CodecParams(length=10_000, workers=3, mode=mode, group=4 if mode == "aligned" else 0)
    crash(sw, spec, params, sparse_gradients(np.random.default_rng(60 + crash_after), 3, 10_000, 0.05), crash_after)
    new_grads = sparse_gradients(np.random.default_rng(90 + crash_after), 3, 10_000, 0.05, magnitudes=(0.1, 10))
    again, transports = fresh_workers(sw, spec, 3)
    results = run_threads(again, params, new_grads)
    check_exact(results, new_grads)
    assert results[0].shift == codec.shift_for(max(codec.exponent(g) for g in new_grads), 3)
    close_all(transports)


@pytest.mark.parametrize("mode", ["aligned", "dense"])
@pytest.mark.parametrize("crash_after", range(0, 5))
def test_restart_after_a_crash_on_the_data_plane_alone_never_sums_wrong(make_switch, crash_after, mode):
    """Without a join nothing clears the crashed run's copies: fresh workers with new gradients either
    aggregate exactly or refuse at once; after the control plane resets the job they are exact."""
    from hina.host import StaleSwitchState

    sw = make_switch()
    spec = JobSpec(job_id=1, words=64, slots=4)
    params = codec.CodecParams(length=10_000, workers=3, mode=mode, group=4 if mode == "aligned" else 0)
    crash(sw, spec, params, sparse_gradients(np.random.default_rng(60 + crash_after), 3, 10_000, 0.05), crash_after)
    new_grads = sparse_gradients(np.random.default_rng(90 + crash_after), 3, 10_000, 0.05, magnitudes=(0.1, 10))
    again, transports = fresh_workers(sw, spec, 3, deadline=3.0, join=False)
    start = time.monotonic()
    results = run_threads(again, params, new_grads)
    for r in results:
        if isinstance(r, codec.WorkerResult):
            assert np.array_equal(r.fixed, dense_fixed_sum(new_grads, r.shift))  # never a wrong sum
        else:
            assert isinstance(r, StaleSwitchState) and "earlier run" in str(r), r
    assert any(isinstance(r, StaleSwitchState) for r in results)
    assert time.monotonic() - start < 2.5  # at once, not at the 3 s deadline
    close_all(transports)
    settle(sw)  # the refused run's last frames processed first: a reset must not precede them
    sw.pipeline.reset_job(1)
    after, transports = fresh_workers(sw, spec, 3, join=False)
    check_exact(run_threads(after, params, new_grads), new_grads)
    close_all(transports)


def test_two_different_jobs_in_sequence_on_the_same_slots(make_switch):
    sw = make_switch()
    for job_id, n, length, words in ((1, 3, 20_000, 64), (2, 2, 7_001, 32)):
        spec = JobSpec(job_id=job_id, words=words, slots=8)
        grads = sparse_gradients(np.random.default_rng(job_id), n, length, 0.05)
        params = codec.CodecParams(length=length, workers=n)
        workers, transports = fresh_workers(sw, spec, n)
        check_exact(run_threads(workers, params, grads), grads)
        for t in transports:
            t.close()
        sw.pipeline.remove_job(job_id)  # the next job gets the same slots, empty
