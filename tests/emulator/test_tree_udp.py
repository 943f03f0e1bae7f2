"""Aggregation trees on real emulators: UDP switches on loopback cabled as a `Fabric` (leaves, spines),
real workers joining their leaf, every codec mode, exact and bit-identical to the star, under loss on
every hop; and the fabric's shares themselves."""

import json

import numpy as np
import pytest
from helpers import dense_fixed_sum, run_threads, sparse_gradients

from hina import codec
from hina.control import JobConfig, Member
from hina.control.controller import p4_entries
from hina.control.fabric import Fabric, TreeJob
from hina.control.topology import FLOOD_GROUP, Topology
from hina.host import JobSpec, UdpTransport, Worker
from hina.wire import Drop

pytestmark = pytest.mark.slow


def test_leaf_spine_shares():
    fab = Fabric.leaf_spine(8, rack=2, spines=2)
    job = TreeJob(7, 32, 0, 8, tuple(f"h{i + 1}" for i in range(8)))
    shares = fab.shares(job)
    assert set(shares) == {"l1", "l2", "l3", "l4", "s1", "s2"}
    l2 = shares["l2"]  # hosts h3, h4 (ranks 2, 3) on ports 1, 2; spines on ports 3 and 4; member id 1
    assert (l2.workers, l2.mask, l2.members) == (8, 0b1100, (Member(2, 1), Member(3, 2)))
    assert l2.parents == (Member(1, 3), Member(1, 4)) and l2.parent_of(5) == Member(1, 4)
    s2 = shares["s2"]  # leaves l1..l4 (member ids 0..3) on its ports 1..4, the root of odd slots
    assert (s2.mask, s2.parents, s2.members) == (0b1111, (), tuple(Member(i, i + 1) for i in range(4)))
    topos = fab.topologies([job])
    assert [h.port for h in topos["l2"].hosts] == [1, 2, 3, 4]
    assert topos["l2"].host_on(3).mac == fab.switch("s1").mac  # partials up are addressed to the spine
    assert topos["l2"].groups()[FLOOD_GROUP] == (1, 2)  # broadcasts stay below: switches would loop them
    assert topos["s1"].groups()[FLOOD_GROUP] == ()
    assert Topology.from_config(json.loads(json.dumps(topos["l2"].to_config()))) == topos["l2"]
    entries, groups = p4_entries(topos["l2"])  # BMv2 takes the same share
    assert sum(e.table == "parents" for e in entries) == 8
    assert Fabric.from_config(json.loads(json.dumps(fab.to_config()))) == fab


def test_a_star_fabric_is_one_root_and_a_job_on_one_leaf_is_rooted_there():
    star = Fabric.star(3).shares(TreeJob(1, 32, 0, 4, ("h1", "h2", "h3")))
    assert list(star) == ["l1"] and star["l1"].parents == () and star["l1"].mask == 0b111
    local = Fabric.leaf_spine(4, rack=2, spines=1).shares(TreeJob(1, 32, 0, 4, ("h3", "h4")))
    assert list(local) == ["l2"] and local["l2"].parents == ()  # never crosses an uplink


def test_bad_fabrics_and_jobs_are_refused():
    fab = Fabric.leaf_spine(4, rack=2, spines=1)
    with pytest.raises(ValueError, match="no host 'h9'"):
        fab.shares(TreeJob(1, 32, 0, 4, ("h1", "h9")))
    with pytest.raises(ValueError, match="ports used twice"):
        Fabric(fab.switches, fab.hosts, fab.links + fab.links[:1])
    with pytest.raises(ValueError, match="spines >= 1"):
        Fabric.leaf_spine(4, rack=2, spines=0)
    with pytest.raises(ValueError, match="no switch 's9'"):
        fab.shares(TreeJob(1, 32, 0, 4, ("h1", "h3"), roots=("s9",)))
    with pytest.raises(ValueError, match="unknown fabric fields"):
        Fabric.from_config({**fab.to_config(), "extra": 1})


def udp_tree(make_switch, fab, job, **impair):
    """One UDP emulator per switch of `fab`, each given its share of `job` with ports turned into the
    neighbours' data addresses; returns (switches by name, the leaf each worker rank joins)."""
    switches = {s.name: make_switch(**impair) for s in fab.switches}
    shares = fab.shares(job)
    link_to = {}  # (switch, port) -> the switch on the other end
    for ln in fab.links:
        link_to[ln.a, ln.a_port], link_to[ln.b, ln.b_port] = ln.b, ln.a
    for name, cfg in shares.items():
        members = tuple(Member(m.worker_id, switches[link_to[name, m.source]].data_address)
                        for m in cfg.members if (name, m.source) in link_to)  # hosts join by themselves
        parents = tuple(Member(m.worker_id, switches[link_to[name, m.source]].data_address) for m in cfg.parents)
        switches[name].pipeline.add_job(JobConfig(cfg.job_id, cfg.workers, cfg.words, cfg.slot_base, cfg.slots,
                                                  members, mask=cfg.mask, parents=parents))
    return switches, [fab.host(w).switch for w in job.workers]


def run_on(switches, leaf_of, spec, params, grads, deadline=20.0):
    transports = [UdpTransport(switches[leaf_of[r]].data_address) for r in range(len(grads))]
    for r, t in enumerate(transports):
        switches[leaf_of[r]].pipeline.join(spec.switch_config(len(grads)), Member(r, t.address))
    workers = [Worker(t, spec, r, deadline=deadline) for r, t in enumerate(transports)]
    try:
        return run_threads(workers, params, grads), workers
    finally:
        for t in transports:
            t.close()


@pytest.mark.parametrize("mode", codec.MODES)
@pytest.mark.parametrize("shape,loss", [((2, 1, 2), 0.0), ((2, 1, 2), 0.01), ((4, 2, 2), 0.01)],
                         ids=["2leaf-1spine", "2leaf-1spine-loss", "4leaf-2spine-loss"])
def test_every_mode_through_a_tree_is_the_stars_words(make_switch, mode, shape, loss):
    leaves, spines, per_leaf = shape
    n = leaves * per_leaf
    spec = JobSpec(job_id=3, words=64, slots=8)
    grads = sparse_gradients(np.random.default_rng(n + leaves), n, 20_011, 0.05)
    params = codec.CodecParams(length=20_011, workers=n, mode=mode)
    fab = Fabric.leaf_spine(leaves * per_leaf, rack=per_leaf, spines=spines)
    job = TreeJob(3, 64, 0, 8, tuple(h.name for h in fab.hosts))
    impair = dict(drop=loss, seed=n) if loss else {}
    switches, leaf_of = udp_tree(make_switch, fab, job, **impair)
    tree, workers = run_on(switches, leaf_of, spec, params, grads)
    star_sw = make_switch()
    star, _ = run_on({"l1": star_sw}, ["l1"] * n, spec, params, grads)
    for w in range(n):
        assert isinstance(tree[w], codec.WorkerResult), tree[w]
        assert tree[w].fixed.tobytes() == star[w].fixed.tobytes(), f"worker {w}"
        assert np.array_equal(tree[w].fixed, dense_fixed_sum(grads, tree[w].shift))
    jobs = {name: sw.pipeline.jobs[3] for name, sw in switches.items()}
    leaf_names = [f"l{i + 1}" for i in range(leaves)]
    assert all(jobs[lf].sent_up > 0 and jobs[lf].results == jobs[lf].sent_up for lf in leaf_names)
    assert all(jobs[f"s{k + 1}"].results > 0 for k in range(spines))  # every spine rooted its slots
    if loss:
        assert sum(jobs[lf].resent_up for lf in leaf_names) + sum(w.stats["retransmissions"] for w in workers) > 0


@pytest.mark.parametrize("crash_after", [0, 1, 2])
def test_a_restarted_job_through_joins_is_exact_or_refused_on_every_worker(make_switch, crash_after):
    """A run dies after `crash_after` phases, leaving partials on leaves and spine; a new run whose workers
    join their leaves (which empties what the leaves held) either sums exactly or is refused by the
    spine, the refusal passed down to every worker under it (StaleSwitchState) within the deadline: never
    a wrong sum, never a hang.  After the controller resets every switch it is exact."""
    from hina.host import StaleSwitchState

    spec = JobSpec(job_id=3, words=64, slots=4)
    fab = Fabric.leaf_spine(4, rack=2, spines=1)
    job = TreeJob(3, 64, 0, 4, tuple(h.name for h in fab.hosts))
    switches, leaf_of = udp_tree(make_switch, fab, job)
    params = codec.CodecParams(length=10_000, workers=4, mode="dense")
    old = sparse_gradients(np.random.default_rng(60 + crash_after), 4, 10_000, 0.05)
    transports = [UdpTransport(switches[leaf_of[r]].data_address) for r in range(4)]
    for r, t in enumerate(transports):
        switches[leaf_of[r]].pipeline.join(spec.switch_config(4), Member(r, t.address))
    crashed = [Worker(t, spec, r, deadline=2.0) for r, t in enumerate(transports)]
    sessions = [codec.WorkerSession(params, g) for g in old]
    for _ in range(crash_after):
        phases = [s.next_phase() for s in sessions]
        aggs = run_threads_calls([lambda w=w, p=p: crashed[w].transfer(p.name, p.ops, p.words)
                                  for w, p in enumerate(phases)])
        for s, a in zip(sessions, aggs):
            s.receive(a)
    # half a chunk of the dead run on leaf 1 (only worker 0's), and the partials up that completed
    phase = sessions[0].next_phase()
    if phase is not None:
        run_threads_calls([lambda: crashed[0].transfer(phase.name, phase.ops, phase.words)], timeout_ok=True)
    for t in transports:
        t.close()
    new = sparse_gradients(np.random.default_rng(90 + crash_after), 4, 10_000, 0.05, magnitudes=(0.1, 10))
    results, _ = run_on(switches, leaf_of, spec, params, new, deadline=3.0)
    for r in results:
        if isinstance(r, codec.WorkerResult):
            assert np.array_equal(r.fixed, dense_fixed_sum(new, r.shift))  # never a wrong sum
        else:
            assert isinstance(r, StaleSwitchState) and "earlier run" in str(r), r
    if crash_after:  # the spine holds the dead run's copies: its refusal reached every worker, both leaves
        assert all(isinstance(r, StaleSwitchState) for r in results), results
        assert switches["s1"].pipeline.drops[Drop.STALE_RUN] > 0
        assert all(switches[lf].pipeline.drops[Drop.STALE_RUN] > 0 for lf in ("l1", "l2"))
    # the refused run's last frames between the switches (a partial sent up again, a refusal on its
    # way down) must be through before the reset, or one lands in a fresh copy and refuses again
    quiesce(switches)
    for sw in switches.values():
        sw.pipeline.reset_job(3)
    after, _ = run_on(switches, leaf_of, spec, params, new)
    for r in after:
        assert np.array_equal(r.fixed, dense_fixed_sum(new, r.shift))


def quiesce(switches, still=0.3, timeout=15.0):
    """Wait until no switch has taken a frame for `still` seconds."""
    import time

    last, since, end = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < end:
        frames = sum(sw.pipeline.frames for sw in switches.values())
        if frames != last:
            last, since = frames, time.monotonic()
        elif time.monotonic() - since >= still:
            return
        time.sleep(0.05)
    raise AssertionError(f"the switches never went quiet: {last} frames and counting")


def run_threads_calls(calls, timeout_ok=False):
    """Run each call in a thread; their results (a timeout, where allowed, is a result too)."""
    import threading

    out = [None] * len(calls)

    def one(i):
        try:
            out[i] = calls[i]()
        except Exception as exc:  # noqa: BLE001
            if not timeout_ok:
                raise
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_a_worker_that_dies_mid_run_fails_every_other_worker_on_both_leaves_within_the_deadline(make_switch):
    """Worker 3 (leaf 2) stops after the first phase: leaf 2's copies never complete, so the spine never
    gets its partial, so no total comes down to either leaf.  Every other worker, on both leaves, raises
    AggregationTimeout naming job, phase and offset within its deadline: no wrong sum, no hang.  After
    the controller installs the job anew for the survivors, they are exact."""
    import time

    from hina.host import AggregationTimeout

    spec = JobSpec(job_id=3, words=64, slots=4)
    fab = Fabric.leaf_spine(4, rack=2, spines=1)
    job = TreeJob(3, 64, 0, 4, tuple(h.name for h in fab.hosts))
    switches, leaf_of = udp_tree(make_switch, fab, job)
    params = codec.CodecParams(length=10_000, workers=4, mode="dense")
    grads = sparse_gradients(np.random.default_rng(7), 4, 10_000, 0.05)
    transports = [UdpTransport(switches[leaf_of[r]].data_address) for r in range(4)]
    for r, t in enumerate(transports):
        switches[leaf_of[r]].pipeline.join(spec.switch_config(4), Member(r, t.address))
    deadline = 1.5
    workers = [Worker(t, spec, r, deadline=deadline) for r, t in enumerate(transports)]
    sessions = [codec.WorkerSession(params, g) for g in grads]

    def run(r):
        t0 = time.monotonic()
        try:
            while (phase := sessions[r].next_phase()) is not None:
                sessions[r].receive(workers[r].transfer(phase.name, phase.ops, phase.words))
                if r == 3:
                    return "died", time.monotonic() - t0  # its process is gone: nothing more from it
            return sessions[r].result(), time.monotonic() - t0
        except AggregationTimeout as exc:
            return exc, time.monotonic() - t0

    try:
        out = run_threads_calls([lambda r=r: run(r) for r in range(4)])
    finally:
        for t in transports:
            t.close()
    assert out[3][0] == "died"
    for r in range(3):
        result, seconds = out[r]
        assert isinstance(result, AggregationTimeout), (r, result)
        assert "job 3" in str(result) and "offset" in str(result), str(result)
        assert seconds < deadline + 3.0, (r, seconds)  # failed at its deadline, did not hang
    assert switches["l2"].pipeline.jobs[3].sent_up < switches["l1"].pipeline.jobs[3].sent_up
    # the controller installs the job anew for the three survivors
    survivors = TreeJob(3, 64, 0, 4, tuple(h.name for h in fab.hosts[:3]))
    switches3, leaf_of3 = udp_tree(make_switch, fab, survivors)
    results, _ = run_on(switches3, leaf_of3, spec, codec.CodecParams(length=10_000, workers=3, mode="dense"),
                        grads[:3])
    for r in results:
        assert np.array_equal(r.fixed, dense_fixed_sum(grads[:3], r.shift))
