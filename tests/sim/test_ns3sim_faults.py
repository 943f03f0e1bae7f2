"""What hina.sim.ns3sim does to a run when asked (`Faults`, several `SimJob`s): links that lose, duplicate and hold
back frames, each the same from run to run; a flow never overtaking itself; a worker killed, a switch restarted
bare or with its jobs again, a straggler late or on a slower link; jobs at once on their own slots; and every
worker's end, its sum checked.  Skipped where ns-3's Python bindings are not installed, which a path with "test"
in it makes so, and says."""

from __future__ import annotations

import collections
import importlib.machinery
import importlib.util
import re
import signal

import pytest

from hina.control import Fabric
from hina.host.congestion_settings import CongestionSettings
from hina.sim import ns3sim
from hina.sim.ns3sim import Faults, Impairment, Kill, Restart, SimJob
from hina.wire.headers import AT_FLAGS, AT_JOB_ID, AT_MSG_TYPE, AT_OFFSET, AT_POOL_INDEX, VERSION_BIT, MsgType

missing = ns3sim.available()
needs_ns3 = pytest.mark.skipif(missing is not None, reason=str(missing))
GBIT = 1000
K = 500  # words per frame: small frames, many of them


def job(workers: int, chunks: int, rounds: int = 1, preset: str = "deeplight", seed: int = 0) -> SimJob:
    return SimJob([(chunks * K,)] * rounds, ns3sim.RealWords.of_preset(preset, workers, seed=seed, words=1 << 13))


def run(fabric: Fabric, jobs: list[SimJob], **kw) -> ns3sim.Ns3Run:
    kw.setdefault("deadline", 0.05)
    return ns3sim.simulate_jobs(fabric, jobs, words=K, slots=16, congestion=CongestionSettings(), check_each=True,
                                **kw)


def ends(result: ns3sim.Ns3Run) -> collections.Counter:
    return collections.Counter(w.outcome for w in result.workers)


@needs_ns3
def test_a_lossy_link_loses_duplicates_and_holds_back_the_same_frames_on_every_run():
    fabric = Fabric.leaf_spine(8, rack=4, spines=2, rate=10 * GBIT)
    bad = Impairment(drop=0.05, dup=0.05, reorder=0.2, hold=20e-6)
    faults = Faults(links={("h1", "l1"): bad, ("l2", "s1"): bad, ("s2", "l1"): bad})  # either end first
    first, again = (run(fabric, [job(8, 120, 2)], faults=faults, seed=3) for _ in range(2))
    assert first.exact and ends(first) == {"sum": 8}
    assert first.lost > 0 and first.duplicated > 0 and first.held > 0 and first.retransmissions > 0
    assert first.switch_drops.get("duplicate", 0) > 0  # a duplicated UPDATE, counted and dropped by the switch
    assert [(w.at, w.retransmissions) for w in again.workers] == [(w.at, w.retransmissions) for w in first.workers]
    assert (again.lost, again.duplicated, again.held) == (first.lost, first.duplicated, first.held)
    other = run(fabric, [job(8, 120, 2)], faults=faults, seed=4)
    assert (other.lost, other.duplicated, other.held) != (first.lost, first.duplicated, first.held)
    clean = run(fabric, [job(8, 120, 2)], seed=3)
    assert clean.lost == clean.duplicated == clean.held == clean.retransmissions == 0
    with pytest.raises(ValueError, match="no link between h1 and l2"):
        run(fabric, [job(8, 1)], faults=Faults(links={("h1", "l2"): bad}))
    with pytest.raises(ValueError, match="drop probability must be within"):
        Impairment(drop=1.0)


@needs_ns3
def test_a_held_frame_never_passes_its_own_flow_but_results_pass_each_other(monkeypatch):
    """Every host link holds back a third of its frames: each worker's UPDATEs still reach the switch in the order
    it sent them (a path keeps a flow in order, the slot protocol's assumption), while RESULTs, whose worker id
    is the UPDATE's that completed them, reach a worker in another order than the switch sent them."""
    sent, arrived, emitted, taken = (collections.defaultdict(list) for _ in range(4))

    def key(frame) -> tuple:  # type, flags, copy and slot, offset
        return frame[AT_MSG_TYPE], frame[AT_FLAGS], bytes(frame[AT_POOL_INDEX:AT_OFFSET + 4])

    class Recording(ns3sim.Pipeline):
        def update(self, data, source, length=None):
            arrived[source].append(key(data))
            emit = super().update(data, source, length)
            for port in emit.dests if emit is not None else ():
                emitted[port].append(key(emit.frame))
            return emit

    out, at_worker = ns3sim._Simulation._out, ns3sim._Simulation._worker_frame

    def record_out(self, wk, frames, now):
        sent[wk.rank + 1].extend(key(f) for f in frames)  # host h(rank + 1) hangs on port rank + 1
        return out(self, wk, frames, now)

    def record_worker(self, wk, frame, now):
        taken[wk.rank + 1].append(key(frame))
        return at_worker(self, wk, frame, now)

    monkeypatch.setattr(ns3sim, "Pipeline", Recording)
    monkeypatch.setattr(ns3sim._Simulation, "_out", record_out)
    monkeypatch.setattr(ns3sim._Simulation, "_worker_frame", record_worker)
    fabric = Fabric.star(4, rate=10 * GBIT)
    hold = Impairment(reorder=0.35, hold=30e-6)
    result = run(fabric, [job(4, 200)], faults=Faults(links={(h.name, "l1"): hold for h in fabric.hosts}),
                 start_spread=20e-6, seed=5)
    assert result.exact and result.held > 50 and result.lost == 0
    assert sorted(arrived) == [1, 2, 3, 4] and all(arrived[port] == sent[port] for port in arrived)
    assert sorted(taken) == [1, 2, 3, 4] and all(sorted(taken[p]) == sorted(emitted[p]) for p in taken)
    assert sum(taken[port] != emitted[port] for port in taken) > 0


@needs_ns3
def test_a_killed_worker_leaves_the_others_timing_out_within_their_deadline():
    fabric = Fabric.star(8, rate=10 * GBIT)
    result = run(fabric, [job(8, 200)], faults=Faults(kill=Kill(3, 50e-6)), deadline=0.02)
    assert ends(result) == {"timeout": 7, "killed": 1} and result.exact
    victim = next(w for w in result.workers if w.outcome == "killed")
    assert victim.rank == 3 and victim.at == pytest.approx(50e-6, abs=1e-9)
    survivors = [w for w in result.workers if w.outcome == "timeout"]
    assert all(0.02 < w.at < 50e-6 + 0.001 + 0.02 for w in survivors)  # the deadline after their last RESULT
    assert all("got no RESULT" in w.error for w in survivors)
    assert result.events == ["0.050 ms: worker 3 of job 0 killed in round 1"]


@needs_ns3
def test_a_restarted_switch_drops_the_jobs_until_they_are_installed_again():
    fabric = Fabric.leaf_spine(8, rack=4, spines=2, rate=10 * GBIT)
    bare = run(fabric, [job(8, 200)], faults=Faults(restart=Restart("s1", 40e-6, 5e-6)))
    assert ends(bare) == {"timeout": 8} and bare.exact
    assert bare.switch_drops["unknown_job"] > 0 and bare.restart_lost > 0
    again = run(fabric, [job(8, 200)], faults=Faults(restart=Restart("l2", 40e-6, 5e-6, reinstall=True)))
    assert ends(again) == {"sum": 8} and again.exact and again.retransmissions > 0
    assert again.events == ["0.040 ms: switch l2 restarted, its state wiped, down for 0.005 ms",
                            "0.045 ms: switch l2's jobs installed again, their slots empty"]
    with pytest.raises(ValueError, match="no switch 'x9'"):
        run(fabric, [job(8, 1)], faults=Faults(restart=Restart("x9", 0.0)))


@needs_ns3
def test_a_timer_due_at_the_deadline_fires_then_and_the_clock_moves_on():
    """The sender's deadline timer is due at the oldest chunk's first transmission + deadline and fires when now
    reaches it, which a rounding can make false at that very instant; ns-3's clock stands still there unless the
    simulation waits a tick (`ns3sim.TICK`): without it this run never ends."""
    def stuck(signum, frame):
        raise TimeoutError("the simulation did not end: a timer due now keeps firing at the same instant")

    before = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(60)
    try:
        fabric = Fabric.leaf_spine(16, rack=4, spines=2, rate=10 * GBIT, queue=32)
        result = ns3sim.simulate_jobs(fabric, [SimJob([(40 * 2239,)], ns3sim.RealWords.of_preset("deeplight", 16))],
                                      faults=Faults(restart=Restart("l2", 50e-6, 10e-6)),
                                      congestion=CongestionSettings(), check_each=True, deadline=0.5)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert ends(result) == {"timeout": 16}
    assert all(0.5 <= w.at < 0.5 + 1e-3 for w in result.workers)  # the first chunks went at 0


@needs_ns3
def test_jobs_at_once_each_sum_their_own_words_on_their_own_slots(monkeypatch):
    seen = collections.defaultdict(set)
    at_switch = ns3sim._Simulation._switch_frame

    def record(self, sw, port, frame, now):
        if frame[AT_MSG_TYPE] == MsgType.UPDATE:
            job_id = int.from_bytes(frame[AT_JOB_ID:AT_JOB_ID + 2], "big")
            seen[job_id].add(int.from_bytes(frame[AT_POOL_INDEX:AT_POOL_INDEX + 2], "big") % VERSION_BIT)
        return at_switch(self, sw, port, frame, now)

    monkeypatch.setattr(ns3sim._Simulation, "_switch_frame", record)
    fabric = Fabric.leaf_spine(8, rack=4, spines=2, rate=10 * GBIT, queue=16)
    jobs = [job(8, 90, 2, "deeplight", 0), job(8, 40, 1, "lstm", 1), job(8, 70, 3, "ncf", 2)]
    result = run(fabric, jobs)
    assert ends(result) == {"sum": 24} and result.exact
    assert sorted(seen) == [1, 2, 3] and all(slots == set(range(16 * j, 16 * j + 16))
                                             for j, slots in zip(range(3), (seen[1], seen[2], seen[3])))
    assert result.checked >= 8 * (2 * 90 + 40 + 3 * 70)  # every RESULT of every worker of every job (and resends)
    assert len({j.data.total.tobytes() for j in jobs}) == 3  # each job sums other words: a mix-up would show
    assert [len(w.round_ends) for w in result.workers] == [2] * 8 + [1] * 8 + [3] * 8


@needs_ns3
def test_a_late_or_slower_worker_sets_everyone_s_pace():
    fabric = Fabric.star(8, rate=10 * GBIT)
    base = run(fabric, [job(8, 100)])
    late = run(fabric, [job(8, 100)], faults=Faults(late={5: 1e-3}))
    assert all(w.at > 1e-3 + 0.9 * max(b.at for b in base.workers) for w in late.workers) and late.exact
    slow = run(fabric, [job(8, 100)], faults=Faults(rates={2: 1 * GBIT}))
    frame_time = (ns3sim.Ring.frame_size(K) + ns3sim.PAD + ns3sim.PPP_HEADER) * 8 / (1 * GBIT * 1e6)
    assert min(w.at for w in slow.workers) > 100 * frame_time and slow.exact
    assert max(b.at for b in base.workers) < 100 * frame_time / 5


@needs_ns3
def test_a_slower_worker_s_timer_fits_its_own_link():
    """A worker on a link 8x slower measures its own link in its join exchange: its full frames take 8x as long
    there, and a timer fit to its peers' path would fire on every chunk the link still carries (each resend one more
    frame up the slow link and one more answer down it)."""
    fabric = Fabric.star(8, rate=10 * GBIT, queue=64)
    slow = run(fabric, [job(8, 11, 3)], faults=Faults(rates={2: 10 * GBIT / 8}))
    assert slow.exact and all(w.outcome == "sum" for w in slow.workers)
    straggler = slow.workers[2]
    assert (straggler.retransmissions, straggler.timeouts) == (0, 0)


@needs_ns3
def test_a_traced_worker_writes_every_frame_it_sends_and_receives_and_what_resent_it():
    """`Trace` on one worker behind a lossy link: a line per UPDATE it sent (as many as its frames, each resend
    numbered and named by what sent it), per RESULT each of its chunks got, a PENDING with who was counted; no
    line of another worker; `start`/`end` keep the lines to their span; the run the same as untraced."""
    fabric = Fabric.star(4, rate=10 * GBIT)
    faults = Faults(links={("h2", "l1"): Impairment(drop=0.1)})  # rank 1's link
    lines: list[str] = []
    traced = run(fabric, [job(4, 60, 2)], faults=faults, seed=3, trace=ns3sim.Trace(frozenset({1}), lines.append))
    plain = run(fabric, [job(4, 60, 2)], faults=faults, seed=3)
    assert [(w.at, w.frames) for w in traced.workers] == [(w.at, w.frames) for w in plain.workers] and traced.exact
    me = traced.workers[1]
    assert me.retransmissions > 0 and lines and all(" job 0 rank   1 " in line for line in lines)
    sent = [line for line in lines if "-> UPDATE" in line]
    resent = [line for line in sent if ", time " in line]
    assert len(sent) == me.frames and len(resent) == me.retransmissions
    assert all(re.search(r", time \d+ \((timeout|tail probe|RACK|ask)", line) for line in resent), resent
    answered = {int(m.group(1)) for line in lines for m in [re.search(r"<- (?:RESULT|RESEND) +chunk (\d+)", line)] if m}
    assert answered == set(range(60))
    assert any(re.search(r"<- PENDING +chunk \d+: \d+ counted \(0x[0-9a-f]+\), this worker (among them|not)", line)
               for line in lines)
    assert any("srtt" in line and "window" in line for line in lines)
    span: list[str] = []
    run(fabric, [job(4, 60, 2)], faults=faults, seed=3, trace=ns3sim.Trace(frozenset({1}), span.append, 1e-4, 2e-4))
    assert span and all(1e-1 <= float(line.split()[0]) <= 2e-1 for line in span)
    assert len(span) < len(lines)


@needs_ns3
def test_a_traced_chunk_shows_what_every_switch_made_of_each_of_its_frames():
    """`Trace.chunks`: a line per frame of those chunks a switch took, from which member, and its verdict; each
    round's copy completes once (the RESULT to the 4 members) after at least one UPDATE from every member, and
    a member sending it again past that is answered from the complete copy (RESEND) or told PENDING."""
    fabric = Fabric.star(4, rate=10 * GBIT)
    faults = Faults(links={("h2", "l1"): Impairment(drop=0.2)})
    lines: list[str] = []
    result = run(fabric, [job(4, 60, 2)], faults=faults, seed=3,
                 trace=ns3sim.Trace(frozenset(), lines.append, chunks=frozenset({5, 40})))
    assert result.exact and lines and all(" switch l1 port " in line for line in lines)
    after = 0  # frames of a copy already complete, over every chunk and round traced
    for chunk in (5, 40):
        for rnd in (1, 2):
            mine = [line for line in lines if f" round {rnd} chunk {chunk} from member " in line]
            done = [i for i, line in enumerate(mine) if line.endswith(": RESULT to 4 ports")]
            assert len(done) == 1, mine
            assert {re.search(r"from member (\d+)", line).group(1) for line in mine[:done[0] + 1]} == set("0123")
            assert all(re.search(r": (RESEND to port \d|PENDING \(0x[0-9a-f]+ counted\) to|dropped: )", line)
                       for line in mine[done[0] + 1:]), mine
            after += len(mine) - done[0] - 1
    assert after > 0  # the lossy link made some member send a chunk again past its completion
    assert not any("chunk 6 " in line for line in lines)


@needs_ns3
def test_every_worker_s_result_is_checked_when_asked(monkeypatch):
    """check_each: a result a worker assembled wrong (a word of its answers changed after its RESULTs, which
    were right) is caught at the worker, where the RESULTs alone would not show it."""
    finish = ns3sim._Simulation._finish

    def spoil(self, wk, now):
        if wk.rank == 2:
            wk.xfer.result[7] += 1
        return finish(self, wk, now)

    monkeypatch.setattr(ns3sim._Simulation, "_finish", spoil)
    result = run(Fabric.star(4, rate=10 * GBIT), [job(4, 20)])
    assert [w.exact for w in result.workers] == [True, True, False, True] and result.exact is False
    assert all(w.outcome == "sum" for w in result.workers)


def test_bindings_under_a_path_with_test_in_it_are_missing_and_say_why(monkeypatch):
    """PyPI's ns3 loader drops every library whose path contains "test": there, ns-3 is missing, in one line that
    says why, not an AttributeError from inside its loader."""
    spec = importlib.machinery.ModuleSpec("ns3", None, is_package=True)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec if name == "ns3" else None)
    spec.submodule_search_locations = ["/home/tester/hina/.venv/lib/python3.11/site-packages/ns3"]
    with pytest.raises(ns3sim.Ns3Missing, match=r"^ns-3's bindings cannot load from /home/tester/.*: PyPI's ns3 "
                                                r"loader skips every library whose path contains 'test'"):
        ns3sim._unloadable()
    spec.submodule_search_locations = ["/home/ada/hina/.venv/lib/python3.11/site-packages/ns3"]
    ns3sim._unloadable()  # elsewhere, nothing to say
