"""The control port of a switch that runs for weeks: the jobs listing, leases, the token, the refusals.

In-process switches (`make_switch`, served in a thread); the command lines
and standalone processes are in test_control_port_cli.py.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from helpers import aggregate_over_udp, dense_fixed_sum, sparse_gradients

from hina import codec
from hina.control import ControlClient, ControlError, JobConfig, Member
from hina.control.auth import REFUSED
from hina.emulator import Pipeline
from hina.host import UdpTransport, Worker
from hina.host.job import JobSpec
from hina.host.window import AggregationTimeout
from hina.wire import Drop


def test_a_job_is_idle_then_active_then_refusing_as_its_counters_move():
    p = Pipeline()
    p.add_job(JobConfig(1, 2, 8, 0, 4, (Member(0, ("127.0.0.1", 7000)),)))
    t0 = p.jobs[1].installed
    (job,) = p.listing(now=t0 + 1)
    assert (job["state"], job["idle_s"], job["frame_s"], job["refused_s"]) == ("idle", 1.0, None, None)
    assert job["members"] == [{"worker_id": 0, "address": ["127.0.0.1", 7000]}] and job["origin"] == "add_job"
    assert (job["slot_base"], job["slots"], job["workers"], job["words"]) == (0, 4, 2, 8) and not job["pinned"]
    p.jobs[1].register["updates"] += 5  # what the compiled rules do per UPDATE taken
    p.note_activity(t0 + 10)
    (job,) = p.listing(now=t0 + 12)
    assert (job["state"], job["idle_s"], job["frame_s"]) == ("active", 2.0, 2.0)
    assert job["counters"]["updates"] == 5
    (job,) = p.listing(now=t0 + 20)
    assert job["state"] == "idle" and job["idle_s"] == 10.0
    p.jobs[1].register["drops"][Drop.STALE_RUN] += 1  # a run refused: another run's state in the slots
    (job,) = p.listing(now=t0 + 21)
    assert job["state"] == "refusing" and job["refused_s"] == 0.0 and job["idle_s"] == 0.0
    p.jobs[1].register["drops"][Drop.UNAUTHORIZED] += 1  # not a member: the job was not heard
    (job,) = p.listing(now=t0 + 40)
    assert job["idle_s"] == 19.0 and job["state"] == "idle"


def test_jobs_over_the_control_port_name_members_counters_and_origin(make_switch):
    sw = make_switch()
    spec = JobSpec(job_id=1, words=64, slots=8)
    grads = sparse_gradients(np.random.default_rng(3), 2, 5_000, 0.05)
    aggregate_over_udp(sw, spec, codec.CodecParams(length=5_000, workers=2), grads)
    with ControlClient(sw.control_address) as ctl:
        ctl.join(JobConfig(2, 3, 16, 8, 4), Member(1, ("127.0.0.1", 7001)))
        jobs = {j["job_id"]: j for j in ctl.jobs()}
        status = ctl.status()
    assert jobs[1]["state"] == "active" and jobs[1]["counters"]["updates"] > 0 and jobs[1]["frame_s"] < 5
    assert jobs[1]["counters"]["results"] > 0 and len(jobs[1]["members"]) == 2 and jobs[1]["origin"] == "add_job"
    assert jobs[2] == {**jobs[2], "workers": 3, "words": 16, "slot_base": 8, "slots": 4, "origin": "join",
                       "state": "idle", "frame_s": None, "lease_left_s": None,
                       "members": [{"worker_id": 1, "address": ["127.0.0.1", 7001]}]}
    assert status["jobs"] == 2 and status["lease_s"] == 0 and status["token"] is False
    assert status["leases"] == {1: None, 2: None} and status["uptime_s"] > 0 and status["pipes"] == 1


def test_a_join_of_another_shape_names_the_command_that_removes_the_job(make_switch):
    sw = make_switch()
    host, port = sw.control_address
    with ControlClient(sw.control_address) as ctl:
        ctl.join(JobConfig(1, 2, 32, 0, 8), Member(0, ("127.0.0.1", 7000)))
        with pytest.raises(ControlError) as refused:
            ctl.join(JobConfig(1, 3, 32, 0, 8), Member(0, ("127.0.0.1", 7000)))
        ctl.remove_job(1)  # the command's effect: the job with the new shape joins
        ctl.join(JobConfig(1, 3, 32, 0, 8), Member(0, ("127.0.0.1", 7000)))
    assert str(refused.value) == (
        "join refused by the switch: join: job 1 differs from the one on the switch: workers 2 on the switch, "
        f"3 asked (remove it: hina switch remove 1 --control {host}:{port})")


def test_a_closed_control_port_is_refused_at_once():
    with ControlClient(("127.0.0.1", 9), timeout=2.0) as ctl:
        start = time.monotonic()
        with pytest.raises(ControlError, match=r"^ping refused: nothing listens on the control port 127.0.0.1:9$"):
            ctl.ping()
    assert time.monotonic() - start < 1.0  # not 3 retries x 2 s


def test_a_token_guards_changes_and_leaves_reads_open(make_switch):
    sw = make_switch()
    sw.set_token(b"s3cret")
    job = JobConfig(1, 2, 32, 0, 8)
    with ControlClient(sw.control_address, token=b"") as anonymous:  # no token: reads only
        assert anonymous.jobs() == [] and anonymous.counters()["jobs"] == {}
        anonymous.ping()
        assert anonymous.status()["token"] is True
        for call in (lambda: anonymous.add_job(job), lambda: anonymous.remove_job(1), lambda: anonymous.reset_job(1),
                     lambda: anonymous.join(job, Member(0, ("127.0.0.1", 7000))), anonymous.shutdown):
            with pytest.raises(ControlError, match=f"refused by the switch: {re.escape(REFUSED)}$"):
                call()
    with ControlClient(sw.control_address, token="wrong") as wrong:
        with pytest.raises(ControlError, match=re.escape(REFUSED)):
            wrong.add_job(job)
    with ControlClient(sw.control_address, token=b"s3cret") as ctl:
        ctl.add_job(job)
        ctl.join(job, Member(1, ("127.0.0.1", 7001)))
        ctl.reset_job(1)
        assert [j["job_id"] for j in ctl.jobs()] == [1]
        ctl.remove_job(1)
        assert ctl.jobs() == []


def test_a_signed_request_sent_twice_is_applied_once(make_switch):
    """The client's retry after a lost reply: the same bytes get the first reply, not a second removal."""
    import json
    import socket

    from hina.control.auth import sign

    sw = make_switch()
    sw.set_token(b"s3cret")
    with ControlClient(sw.control_address, token=b"s3cret") as ctl:
        ctl.add_job(JobConfig(1, 2, 32, 0, 8))
    data = json.dumps(sign({"op": "remove_job", "seq": 1, "job_id": 1}, b"s3cret")).encode()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
        sock.settimeout(2)
        other.settimeout(2)
        sock.sendto(data, sw.control_address)
        first = json.loads(sock.recv(4096))
        sock.sendto(data, sw.control_address)
        second = json.loads(sock.recv(4096))
        other.sendto(data, sw.control_address)  # a replay from another address
        replayed = json.loads(other.recv(4096))
    assert first == second == {"ok": True, "seq": 1}  # not "no job 1": it ran once
    assert replayed == {"ok": False, "seq": 1,
                        "error": "control request refused: replayed (this signed request was already applied)"}


def test_a_lease_frees_a_crashed_jobs_slots_and_a_new_job_there_is_exact(make_switch, capsys):
    """Job 1's workers stop mid-run (one never came, the other timed out): its slots hold their partials.
    Within the lease the slots are taken; after it the job is gone, said once on stderr, and a job of
    another shape on the same slots sums exactly."""
    sw = make_switch()
    sw.set_lease(1.0)
    spec = JobSpec(job_id=1, words=64, slots=8)
    lone = UdpTransport(sw.data_address)
    with ControlClient(sw.control_address) as ctl:
        ctl.join(spec.switch_config(2), Member(0, lone.address))
        with pytest.raises(AggregationTimeout):
            Worker(lone, spec, 0, deadline=0.3).aggregate(codec.CodecParams(length=3_000, workers=2),
                                                          np.ones(3_000, np.float32))
        lone.close()
        with pytest.raises(ControlError, match="overlap job 1's"):  # still held
            ctl.add_job(JobConfig(2, 3, 64, 0, 8))
        start = time.monotonic()
        while ctl.jobs() and time.monotonic() - start < 5:
            time.sleep(0.1)
        assert ctl.jobs() == [], "the lease did not end"
        assert 0.5 < time.monotonic() - start < 2.5  # the lease (1 s after the last frame) and a tick or two
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "removed" in line]
    assert len(lines) == 1 and lines[0].startswith("hina.emulator: job 1 removed: none of its members heard for")
    assert lines[0].endswith("(lease 1 s); slots [0, 8) are free")
    grads = sparse_gradients(np.random.default_rng(5), 3, 20_000, 0.02)
    results, _ = aggregate_over_udp(sw, JobSpec(job_id=2, words=64, slots=8), codec.CodecParams(length=20_000,
                                                                                                 workers=3), grads)
    for r in results:
        assert np.array_equal(r.fixed, dense_fixed_sum(grads, r.shift))


def test_a_pinned_job_outlives_its_lease(make_switch):
    sw = make_switch()
    sw.pipeline.add_job(JobConfig(1, 2, 32, 0, 8), origin="command line")
    sw.set_lease(0.5)
    with ControlClient(sw.control_address) as ctl:
        ctl.join(JobConfig(2, 2, 32, 8, 8), Member(0, ("127.0.0.1", 7000)))
        time.sleep(1.6)
        jobs = ctl.jobs()
        assert [(j["job_id"], j["pinned"], j["lease_left_s"]) for j in jobs] == [(1, True, None)]
        assert ctl.status()["leases"] == {1: None}


@pytest.mark.slow
def test_with_pipes_the_listing_is_summed_and_the_lease_reaches_every_pipe(make_switch, capsys):
    sw = make_switch(pipes=2)
    sw.set_lease(1.5)
    spec = JobSpec(job_id=4, words=32, slots=8)
    grads = sparse_gradients(np.random.default_rng(8), 2, 4_000, 0.05)
    with ControlClient(sw.control_address) as ctl:
        transports = [UdpTransport(sw.data_address) for _ in grads]
        for w, t in enumerate(transports):
            ctl.join(spec.switch_config(2), Member(w, t.address))
        from helpers import run_threads

        results = run_threads([Worker(t, spec, w, pipes=2) for w, t in enumerate(transports)],
                              codec.CodecParams(length=4_000, workers=2), grads)
        for t in transports:
            t.close()
        assert all(not isinstance(r, BaseException) for r in results), results
        (job,) = ctl.jobs()
        assert job["state"] == "active" and job["origin"] == "join" and len(job["members"]) == 2
        assert job["counters"]["updates"] == ctl.counters()["jobs"][4]["updates"] > 0  # both pipes' counts
        start = time.monotonic()
        while ctl.jobs() and time.monotonic() - start < 6:
            time.sleep(0.2)
        assert ctl.jobs() == [] and ctl.counters()["jobs"] == {}  # gone from every pipe
    assert "hina.emulator: job 4 removed" in capsys.readouterr().err
