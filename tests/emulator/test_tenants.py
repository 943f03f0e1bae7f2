"""One switch, many jobs: slots the switch hands out, freed when the last member leaves, the answers of a full
switch (refuse, fewer, wait), and tenants who change only their own jobs.  In-process UDP switches."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from helpers import dense_fixed_sum, sparse_gradients

from hina import codec
from hina.control import ControlClient, ControlError, JobConfig, Member, Placement, SwitchFull
from hina.host import UdpTransport, Worker
from hina.host.job import JobSpec
from hina.host.window import AggregationTimeout

OPERATOR, ALICE, BOB = b"operator secret 0123456789", b"alice's secret 0123456789", b"bob's secret 0123456789"


def placed_job(sw, job: JobSpec, workers: int, grads, params, *, token=None, owner=None, leave=True):
    """Every worker of `job` joins at the control port (the switch chooses its slots), aggregates in its own
    thread and leaves; (the job as granted, each worker's result)."""
    transports = [UdpTransport(sw.data_address) for _ in range(workers)]
    granted = []
    for w, t in enumerate(transports):
        with ControlClient(sw.control_address, token=token, owner=owner) as ctl:
            ctl.join(job.switch_config(workers), Member(w, t.address), place=job.placement())
            granted.append(job.granted(ctl.granted))
    assert len(set(granted)) == 1  # every member was told the same range
    results: list = [None] * workers

    def run(w: int) -> None:
        try:
            results[w] = Worker(transports[w], granted[w], w, deadline=20.0).aggregate(params, grads[w])
        except BaseException as exc:  # noqa: BLE001 - checked below
            results[w] = exc
        finally:
            if leave:
                with ControlClient(sw.control_address, token=token, owner=owner) as ctl:
                    ctl.leave(job.job_id, w)
            transports[w].close()

    threads = [threading.Thread(target=run, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    return granted[0], threads, results


def test_two_jobs_get_distinct_ranges_sum_exactly_at_once_and_their_leaving_frees_the_slots(make_switch):
    sw = make_switch()
    rng = np.random.default_rng(5)
    params = codec.CodecParams(length=20_000, workers=3)
    grads = {j: sparse_gradients(rng, 3, 20_000, 0.05) for j in (11, 12)}
    runs = {j: placed_job(sw, JobSpec(job_id=j, words=64, slots=16), 3, grads[j], params) for j in (11, 12)}
    for _, threads, _ in runs.values():
        for t in threads:
            t.join()
    (a, _, ra), (b, _, rb) = runs[11], runs[12]
    assert (a.slot_base, a.slots) == (0, 16) and (b.slot_base, b.slots) == (16, 16)
    for results, g in ((ra, grads[11]), (rb, grads[12])):
        for r in results:
            assert not isinstance(r, BaseException), r
            assert np.array_equal(r.fixed, dense_fixed_sum(g, r.shift))
    with ControlClient(sw.control_address) as ctl:
        assert ctl.jobs() == []  # the last member of each job left: both ranges are free again
        ctl.join(JobConfig(13, 2, 64, 0, 40), Member(0, ("127.0.0.1", 7000)), place=Placement(40))
        assert (ctl.granted.slot_base, ctl.granted.slots) == (0, 40)


def test_a_job_with_a_dead_worker_stalls_only_itself(make_switch):
    """Job 21's second worker joined and died: its first worker's chunks wait in job 21's slots until its
    deadline; job 22, on the slots beside, sums exactly meanwhile, and job 21 fails naming no wrong sum."""
    sw = make_switch()
    rng = np.random.default_rng(21)
    params = codec.CodecParams(length=20_000, workers=2)
    stuck = sparse_gradients(rng, 2, 20_000, 0.05)
    dead_job = JobSpec(job_id=21, words=64, slots=16)
    alive = UdpTransport(sw.data_address)
    with ControlClient(sw.control_address) as ctl:
        ctl.join(dead_job.switch_config(2), Member(0, alive.address), place=dead_job.placement())
        ctl.join(dead_job.switch_config(2), Member(1, ("127.0.0.1", 7999)), place=dead_job.placement())  # dies
        granted = dead_job.granted(ctl.granted)
    outcome: list = []
    lone = threading.Thread(target=lambda: outcome.append(_attempt(
        lambda: Worker(alive, granted, 0, deadline=6.0).aggregate(params, stuck[0]))))
    lone.start()
    grads = sparse_gradients(rng, 2, 20_000, 0.05)
    began = time.monotonic()
    other, threads, results = placed_job(sw, JobSpec(job_id=22, words=64, slots=16), 2, grads, params)
    for t in threads:
        t.join()
    took = time.monotonic() - began
    assert lone.is_alive() and took < 6.0  # job 22 finished while job 21 still waited for its dead worker
    assert (other.slot_base, other.slots) == (16, 16)
    for r in results:
        assert not isinstance(r, BaseException), r
        assert np.array_equal(r.fixed, dense_fixed_sum(grads, r.shift))
    lone.join()
    alive.close()
    assert isinstance(outcome[0], AggregationTimeout), outcome


def _attempt(call):
    try:
        return call()
    except BaseException as exc:  # noqa: BLE001 - the caller checks which
        return exc


def test_a_member_that_leaves_keeps_the_job_for_the_others_and_a_fixed_range_still_works(make_switch):
    sw = make_switch()
    with ControlClient(sw.control_address) as ctl:
        ctl.join(JobConfig(1, 2, 8, 100, 8), Member(0, ("127.0.0.1", 7000)))  # a range of its own, as before
        ctl.join(JobConfig(1, 2, 8, 100, 8), Member(1, ("127.0.0.1", 7001)))
        assert (ctl.granted.slot_base, ctl.granted.slots) == (100, 8)
        assert ctl.leave(1, 0) is False
        (job,) = ctl.jobs()
        assert [m["worker_id"] for m in job["members"]] == [1]
        assert ctl.leave(1, 1) is True and ctl.jobs() == []
        ctl.add_job(JobConfig(2, 1, 8, 0, 4, (Member(0, ("127.0.0.1", 7002)),)))
        assert ctl.leave(2, 0) is False and len(ctl.jobs()) == 1  # installed by add_job: the operator removes it


def test_a_full_switch_refuses_or_gives_fewer_slots_as_the_job_asks(make_switch):
    sw = make_switch()
    sw.set_slots(96, "request")
    with ControlClient(sw.control_address) as ctl:
        ctl.join(JobConfig(1, 2, 8, 0, 64), Member(0, ("127.0.0.1", 7000)), place=Placement(64))
        with pytest.raises(SwitchFull) as err:
            ctl.join(JobConfig(2, 2, 8, 0, 64), Member(0, ("127.0.0.1", 7001)), place=Placement(64))
        assert "job 2 asks for 64 slots and the switch has 32 of its 96 free" in str(err.value)
        assert "job 1 [0, 64)" in str(err.value) and "\n" not in str(err.value)
        ctl.join(JobConfig(2, 2, 8, 0, 64), Member(0, ("127.0.0.1", 7001)), place=Placement(64, 16, "fewer"))
        assert (ctl.granted.slot_base, ctl.granted.slots) == (64, 32)
        ctl.join(JobConfig(2, 2, 8, 0, 64), Member(1, ("127.0.0.1", 7002)), place=Placement(64, 16, "fewer"))
        assert (ctl.granted.slot_base, ctl.granted.slots) == (64, 32)  # the second member: the job's range
        with pytest.raises(SwitchFull):
            ctl.join(JobConfig(3, 2, 8, 0, 64), Member(0, ("127.0.0.1", 7003)), place=Placement(64, 8, "fewer"))


def test_a_job_that_waits_joins_when_the_slots_come_free_and_its_window_is_what_it_got(make_switch):
    sw = make_switch()
    sw.set_slots(64, "request")
    rng = np.random.default_rng(9)
    params = codec.CodecParams(length=30_000, workers=2)
    first = sparse_gradients(rng, 2, 30_000, 0.05)
    (a, threads, ra) = placed_job(sw, JobSpec(job_id=1, words=64, slots=64), 2, first, params, leave=False)
    for t in threads:
        t.join()
    assert all(not isinstance(r, BaseException) for r in ra)
    positions, got = [], {}

    def wait_in_line() -> None:  # job 2 waits while job 1 holds every slot
        with ControlClient(sw.control_address) as ctl:
            ctl.join(JobConfig(2, 1, 64, 0, 48), Member(0, ("127.0.0.1", 7010)),
                     place=Placement(48, when_full="wait"), waiting=positions.append, deadline=30)
            got["job"] = ctl.granted

    waiter = threading.Thread(target=wait_in_line)
    waiter.start()
    deadline = time.monotonic() + 10
    while not positions and time.monotonic() < deadline:
        time.sleep(0.05)
    assert positions == [1] and sw.info()["waiting"] == [2] and not got
    with ControlClient(sw.control_address) as ctl:  # job 1's last member leaving lets it in
        assert ctl.leave(1, 0) is False and ctl.leave(1, 1) is True
    waiter.join()
    assert (got["job"].slot_base, got["job"].slots) == (0, 48) and positions == [1] and sw.info()["waiting"] == []
    worker = Worker(UdpTransport(sw.data_address), JobSpec(job_id=2, words=64, slots=64).granted(got["job"]), 0)
    assert worker.window.limit == 48 and worker.pool.slots == 48  # the window is the slots it got
    worker.transport.close()


def test_a_waiting_join_gives_up_at_its_deadline(make_switch):
    sw = make_switch()
    sw.set_slots(8, "request")
    with ControlClient(sw.control_address) as ctl:
        ctl.join(JobConfig(1, 2, 8, 0, 8), Member(0, ("127.0.0.1", 7000)), place=Placement(8))
        with pytest.raises(ControlError, match="waited 0.5 s for slots and is still number 1 in line"):
            ctl.join(JobConfig(2, 2, 8, 0, 8), Member(0, ("127.0.0.1", 7001)), place=Placement(8, when_full="wait"),
                     deadline=0.5)
        assert sw.info()["waiting"] == [2]


def test_each_owner_changes_only_their_own_jobs_and_the_operator_changes_all(make_switch):
    sw = make_switch()
    sw.set_token(OPERATOR, {"alice": ALICE, "bob": BOB})
    alice = ControlClient(sw.control_address, token=ALICE, owner="alice")
    bob = ControlClient(sw.control_address, token=BOB, owner="bob")
    operator = ControlClient(sw.control_address, token=OPERATOR)
    try:
        alice.join(JobConfig(1, 2, 8, 0, 8), Member(0, ("127.0.0.1", 7000)), place=Placement(8))
        bob.join(JobConfig(2, 2, 8, 0, 8), Member(0, ("127.0.0.1", 7001)), place=Placement(8))
        assert {j["job_id"]: j["owner"] for j in bob.jobs()} == {1: "alice", 2: "bob"}  # everyone lists all
        for change in (lambda: bob.remove_job(1), lambda: bob.reset_job(1), lambda: bob.leave(1, 0),
                       lambda: bob.join(JobConfig(1, 2, 8, 0, 8), Member(1, ("127.0.0.1", 7002)), place=Placement(8))):
            with pytest.raises(ControlError) as err:
                change()
            line = str(err.value)
            assert "refused by the switch" in line and "job 1 is alice's, and this request is bob's" in line
            assert "only alice's token or the switch operator's changes it" in line
        alice.join(JobConfig(1, 2, 8, 0, 8), Member(1, ("127.0.0.1", 7002)), place=Placement(8))
        alice.reset_job(1)
        operator.remove_job(2)  # the operator's token changes every job
        with pytest.raises(ControlError, match="only the switch operator's token may configure"):
            alice.request("configure", topology={})
        with pytest.raises(ControlError, match="only the switch operator's token may shut the switch down"):
            bob.shutdown()
        with pytest.raises(ControlError, match="no tenant 'carol'"):
            ControlClient(sw.control_address, token=BOB, owner="carol").remove_job(1)
        with pytest.raises(ControlError, match="no valid token"):
            ControlClient(sw.control_address, token=ALICE, owner="bob").remove_job(1)  # bob's name, alice's key
        assert [j["job_id"] for j in operator.jobs()] == [1]
    finally:
        for c in (alice, bob, operator):
            c.close()
