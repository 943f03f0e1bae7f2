"""The sender's timers fit the path they find, and a chunk the switch holds waits on its peers, not on a timer.

Sans-I/O, on a virtual clock: frames out, answers in, `poll` at chosen instants.  The rules are in
host/sendplane.py and docs/design.md ("Loss recovery and congestion").
"""

import math

import numpy as np
import pytest

from hina.codec.ops import Op
from hina.host import sendplane
from hina.host.congestion import CongestionWindow
from hina.host.congestion_settings import CongestionSettings
from hina.host.window import AggregationTimeout, PhaseTransfer, RttEstimator, SlotPool
from hina.wire.headers import HEADER_BYTES, VERSION_BIT, Flags, HinaHeader, MsgType, pack_header

K = 3
ME = 1  # the transfer's worker_id


def transfer(chunks, *, slots=8, rtt=None, deadline=10.0, window=None):
    return PhaseTransfer(job_id=4, worker_id=ME, words=K, pool=SlotPool(0, slots), rtt=rtt or RttEstimator(),
                         tag=9, op=Op.ADD, payload=np.arange(K * chunks, dtype=np.int32), name="values", now=0.0,
                         deadline=deadline, window=window or CongestionWindow(slots, CongestionSettings(
                             initial=slots, minimum=slots)))


def answer(update: bytes, *, flags=0, words=None) -> bytes:
    """The switch's RESULT for `update` (its own words, unless `words`), with `flags`."""
    h = HinaHeader.unpack(update)
    body = update[HEADER_BYTES:] if words is None else np.array(list(words) + [0] * (K - len(words)), ">i4").tobytes()
    return pack_header(MsgType.RESULT, h.op, 4, h.worker_id, flags, h.pool_index, h.offset, h.count, h.phase) + body


def pending(update: bytes, counted: int) -> bytes:
    """The switch's PENDING answer to a repeat of `update`: who its copy had counted, in word 0."""
    return answer(update, flags=Flags.PENDING, words=[counted])


def offsets(frames):
    return [HinaHeader.unpack(f).offset for f in frames]


# -- timers from the path -------------------------------------------------------------------------------------
def test_the_join_exchange_sets_the_first_timeout_not_a_constant():
    """A datacenter path of 10 us: the first timeout is a few of its round trips, not the 100 ms a WAN clock
    would wait (a worker whose first frames waited at the switch for a later peer timed out after 0.1 s)."""
    rtt = RttEstimator(path=10e-6)
    assert rtt.min_rtt == 10e-6 and rtt.rto == pytest.approx(10e-6 + 4 * 5e-6)
    assert RttEstimator().rto == 0.1  # with nothing measured, as RFC 6298's (shorter) initial timeout


def test_no_timer_is_shorter_than_the_hosts_tick_and_none_has_a_constant_floor():
    rtt = RttEstimator(tick=50e-6)
    for _ in range(20):
        rtt.sample(10e-6)
    assert rtt.rto == 50e-6 and rtt.probe_after == 50e-6 and rtt.reordering == 50e-6
    quick = RttEstimator()
    for _ in range(20):
        quick.sample(10e-6)
    assert quick.rto < 1e-4 and quick.probe_after == pytest.approx(2 * quick.srtt)  # no 20 ms, no 2 ms


def test_the_backoff_cap_follows_the_path():
    """Backed off, a timeout waits at most 8 least round trips (or twice the recent ones), not 50 ms: on a 10 us
    path a lost tail costs microseconds."""
    rtt = RttEstimator(path=10e-6)
    for _ in range(10):
        rtt.backoff()
    assert rtt.rto == pytest.approx(8 * 10e-6)


def test_one_short_round_trip_does_not_pull_the_timeout_under_a_slow_switchs_queue():
    """A slow switch's queue fills and drains: round trips of 10 ms, and one of 130 us when it ran empty.  The
    timeout stays over the queue's round trips (the least of the last 4, which the cap once followed, put it
    at 1 ms: a resend every millisecond into the queue the chunk waited in), backed off or not."""
    rtt = RttEstimator.fair(path=100e-6)
    for sample in [10e-3] * 8 + [130e-6, 10e-3]:
        rtt.sample(sample)
    assert rtt.backoff_cap >= 2 * 10e-3 and rtt.rto > 10e-3
    rtt.backoff()
    assert rtt.rto > 10e-3


def test_a_chunks_timer_counts_from_when_the_switch_could_have_completed_it():
    """A window sent at once, answered one chunk per 25 us (the peers send them later, or the link is slow): no
    chunk times out while the chunks before it are answered in turn, though most have waited longer than the
    timeout since they went."""
    rtt = RttEstimator(path=20e-6)
    x = transfer(8, rtt=rtt)
    first = x.start(0.0)
    rto = rtt.rto
    assert rto < 100e-6 < 25e-6 * len(first)
    for i, f in enumerate(first):
        now = 25e-6 * (i + 1)
        assert x.poll(now) == []  # nothing due: the chunk before this one was answered 40 us ago
        x.receive(answer(f), now)
    assert x.done and x.stats["timeouts"] == 0 and x.stats["retransmissions"] == 0


def test_an_answer_flagged_resend_is_no_round_trip():
    """A switch answered a repeat from the copy it holds (a leaf from its stored total): the answer came sooner
    than the whole path's round trip because it answers the resend; taken for the first transmission's it
    would give a round trip as long as the chunk's wait."""
    rtt = RttEstimator(path=100e-6)
    x = transfer(2, rtt=rtt)
    f0, f1 = x.start(0.0)
    x.receive(answer(f1), 100e-6)
    (again,) = x.poll(1e-3)  # chunk 0 overtaken
    assert offsets([again]) == offsets([f0])
    srtt = rtt.srtt
    x.receive(answer(f0, flags=Flags.RESEND), 1e-3 + 10e-6)  # 10 us after the resend: the leaf's answer
    assert rtt.srtt == srtt and x.stats["spurious_resends"] == 0 and rtt.reorder_scale == 1.0


@pytest.mark.parametrize("from_copy", [True, False], ids=["answered-from-a-complete-copy", "answered-fresh"])
def test_after_a_probe_answered_from_a_complete_copy_the_rest_of_the_silence_goes_at_once(from_copy):
    """A leaf restarted after it had sent its partials up: the spine's RESULTs reach it and it drops them as stale,
    so no chunk of the window is answered.  The tail probe (the oldest chunk) is answered a round trip later from
    the spine's complete copy (RESEND): the path is clear and that chunk's RESULT had been lost, so at the next
    silence everything that went before the probe goes again at once; one probe a silence completed one chunk a
    silence (8 chunks: 1.1 ms where the bound was 0.49).  Answered fresh instead, the probe may have met a late
    peer's UPDATE: the next silence probes one chunk again."""
    rtt = RttEstimator(path=100e-6)
    x = transfer(8, rtt=rtt)
    frames = x.start(0.0)
    x.receive(answer(frames[0]), 100e-6)
    (probe,) = x.poll(310e-6)  # two round trips of silence: the oldest chunk alone
    assert offsets([probe]) == offsets(frames[1:2]) and x.stats["probes"] == 1
    x.receive(answer(probe, flags=Flags.RESEND if from_copy else 0), 390e-6)
    again = x.poll(600e-6)  # silent again for two round trips, before any chunk's timeout
    assert x.stats["probes"] == 2 and x.stats["timeouts"] == 0
    assert offsets(again) == offsets(frames[2:] if from_copy else frames[2:3])


# -- PENDING: the switch holds the chunk and waits for a peer -----------------------------------------------------
def held_chunk():
    """Chunk 0 of a phase of one chunk goes, is resent (the tail probe: a peer is late), and its repeat is
    answered PENDING with this worker counted."""
    rtt = RttEstimator(path=100e-6)
    x = transfer(1, rtt=rtt, deadline=1.0)
    (f,) = x.start(0.0)
    (again,) = x.poll(1e-3)
    assert x.stats["retransmissions"] == 1
    assert x.receive(pending(again, counted=0b101 | 1 << ME), 1.1e-3) == []
    return x, f, rtt


def test_a_held_chunk_is_not_resent_at_each_timeout_but_asks_again_ever_later():
    """The counted stop resending: the held chunk asks again only after its hold, which doubles each time, so a
    peer late by a second costs a handful of frames, not one per timeout."""
    x, f, rtt = held_chunk()
    asks, now = [], 1.1e-3
    for _ in range(1000):  # (bounded: a broken timer would spin here)
        if x.done or now >= 0.5:
            break
        now = x.next_timer()
        out = x.poll(now)
        if out:
            asks.append(now)
    gaps = np.diff(asks)
    cap = 1.0 / sendplane.HOLD_ASKS  # the transfer's deadline over the asks it owes
    assert 3 <= len(asks) <= 20 and all(b >= min(1.9 * a, 0.99 * cap) for a, b in zip(gaps, gaps[1:]))
    assert max(gaps) <= cap * 1.01
    assert x.stats["pending"] == 1 and x.stats["asked"] == len(asks)
    x.receive(answer(f), now + 1e-3)  # the late peer's UPDATE came: the RESULT
    assert x.done


def next_ask(x, held_offset, now):
    """Poll at each timer until the held chunk (at `held_offset`) goes again; when it went."""
    for _ in range(100):
        now = x.next_timer()
        if held_offset in offsets(x.poll(now)):
            return now
    raise AssertionError("the held chunk never asked again")


def test_while_other_chunks_are_answered_a_held_chunks_hold_grows_no_longer_than_a_timeout():
    """Amid progress a peer's lost UPDATE is the peer's to find (its later chunks overtake it), so a chunk still
    held has likelier lost its RESULT: its hold grows no longer than a backed-off timeout (doubled to seconds,
    one lost RESULT on a lossy path cost seconds, and other workers' holds lengthened them in turn).  Once
    nothing is answered it doubles past that, towards the estimator's maximum."""
    rtt = RttEstimator(path=100e-6)
    x = transfer(8, rtt=rtt, deadline=5.0)
    frames = x.start(0.0)
    held = offsets(frames[:1])[0]
    assert x.receive(pending(frames[0], counted=0b101 | 1 << ME), 200e-6) == []
    asks = [200e-6]
    for f in frames[1:]:  # after each ask another chunk is answered
        asks.append(next_ask(x, held, asks[-1]))
        x.receive(answer(f), asks[-1] + 10e-6)
    for _ in range(3):  # then nothing is
        asks.append(next_ask(x, held, asks[-1]))
    gaps = np.diff(asks)
    assert np.allclose(gaps[5:8], gaps[5]) and gaps[5] <= rtt.backoff_cap, gaps  # grown no longer
    assert gaps[-1] == pytest.approx(2 * gaps[-2], rel=0.01) and gaps[-2] > gaps[7], gaps  # then doubling


def test_a_held_chunk_a_later_chunk_overtook_asks_at_once_and_once_per_overtaking():
    """Held, and then a chunk sent after it is answered: each peer had sent the held chunk before that one, and a
    peer whose UPDATE was lost was told so by the first PENDING, so the RESULT to this worker is the likelier loss.
    It asks when the overtaking answer's round trip and the reordering allowance have passed, not after its hold
    (a lost RESULT on a lossy path once waited out holds of milliseconds, and every peer's window behind it); and
    asks once per overtaking: an answer to a chunk sent before the ask is no new evidence."""
    rtt = RttEstimator(path=100e-6)
    x = transfer(8, rtt=rtt, deadline=5.0)
    frames = x.start(0.0)
    held = offsets(frames[:1])[0]
    assert x.receive(pending(frames[0], counted=0b101 | 1 << ME), 150e-6) == []
    x.receive(answer(frames[1]), 200e-6)  # a chunk sent after the held one, answered
    ask = x.next_timer()
    assert ask <= 200e-6 + rtt.reordering + 1e-9
    assert offsets(x.poll(ask)) == [held] and x.stats["asked"] == 1
    for f in frames[2:]:  # sent before the ask: answered, they are no reason to ask again
        assert held not in offsets(x.receive(answer(f), ask + 10e-6))
    now = x.next_timer()
    assert x.poll(now) == [] and x.stats["asked"] == 1
    again = next_ask(x, held, now)
    assert again >= ask + 2 * 100e-6  # then its hold again
    x.receive(answer(frames[0], flags=Flags.RESEND), again + 100e-6)  # the copy's total, to the ask
    assert x.done and x.stats["asked"] == 2
    assert x.stats["timeouts"] == 0 and x.stats["fast_retransmissions"] == 0 and rtt.reorder_scale == 1.0


def late_peer_completes(x, frames, *, at, pace):
    """Every chunk of `frames` held for a late peer from 150 us (each ask answered PENDING) until `at`, when the
    peer comes and the switch completes all but the last, one every `pace`; the last one's RESULT is lost.
    When the last chunk asks again after that."""
    counted = 0b101 | 1 << ME
    for f in frames:
        assert x.receive(pending(f, counted=counted), 150e-6) == []
    now = 150e-6
    while (now := x.next_timer()) < at:
        for f in x.poll(now):
            assert x.receive(pending(f, counted=counted), now + 100e-6) == []
    for i, f in enumerate(frames[:-1]):
        x.receive(answer(f), at + i * pace)
    return next_ask(x, offsets(frames[-1:])[0], at)


def test_a_held_chunk_next_in_its_pipe_asks_a_pace_after_the_chunk_before_it():
    """A late peer comes and the switch completes its chunks in turn, 10 us apart; the last one's RESULT is lost.
    The peer sends in order, so that chunk completed a pace after the one before it: it asks once twice that pace,
    and at least a round trip (the recent ones' median; the path's before any), have passed since, not after its
    hold, grown while the peer was late (a phase's last chunk has nothing after it to overtake it)."""
    rtt = RttEstimator(path=100e-6)
    x = transfer(4, rtt=rtt, deadline=5.0)
    frames = x.start(0.0)
    last = 3.1e-3 + 2 * 10e-6  # the chunk before the last one answered
    ask = late_peer_completes(x, frames, at=3.1e-3, pace=10e-6)
    assert last + 100e-6 - 1e-9 <= ask <= last + 100e-6 + 1e-9, ask
    x.receive(answer(frames[3], flags=Flags.RESEND), ask + 100e-6)  # the copy's total, to the ask
    assert x.done and x.stats["timeouts"] == 0


def test_a_held_chunk_whose_pipe_is_slower_than_a_round_trip_waits_twice_its_pace():
    """The same, but the switch completes a chunk every 300 us (a slow pipe): asked a round trip after the chunk
    before it, the chunk would not be complete yet, so it waits twice the pace (one ask more per chunk into a
    slow switch's queue would slow it further)."""
    x = transfer(4, rtt=RttEstimator(path=100e-6), deadline=5.0)
    frames = x.start(0.0)
    ask = late_peer_completes(x, frames, at=3.1e-3, pace=300e-6)
    assert ask == pytest.approx(3.1e-3 + 2 * 300e-6 + 2 * 300e-6)


def test_a_held_chunk_that_later_chunks_pass_asks_once_not_once_per_answer():
    """Chunk 0 held, and the chunks after it answered one by one, 10 us apart (its missing UPDATE is a peer's loss,
    to be found by that peer): RACK has it ask once; the pipe's pace has it ask only for the chunk next after an
    answered one.  Asking at every answer, each counted member of a slow BMv2's job sent thousands of asks a
    round into its queue (rounds of 40-55 s against 3 s)."""
    x = transfer(8, rtt=RttEstimator(path=100e-6), deadline=5.0)
    frames = x.start(0.0)
    held = offsets(frames[:1])[0]
    for f in frames:
        assert x.receive(pending(f, counted=0b101 | 1 << ME), 150e-6) == []
    asks = 0
    for i, f in enumerate(frames[1:]):
        now = 1e-3 + i * 10e-6
        while x.next_timer() < now:
            asks += offsets(x.poll(x.next_timer())).count(held)
        asks += offsets(x.receive(answer(f), now)).count(held)
    while x.next_timer() < 1.5e-3:
        asks += offsets(x.poll(x.next_timer())).count(held)
    assert asks == 1 + 1, asks  # one ask by its hold before the peers came (at 450 us), one by RACK


def test_a_held_chunk_past_its_deadline_says_the_switch_holds_it_and_whom_it_counted():
    x, _, _ = held_chunk()
    with pytest.raises(AggregationTimeout, match=r"the switch holds this worker's UPDATE and waits for the others "
                                                 r"\(it had counted worker_ids 0, 1, 2"):
        for _ in range(1000):
            x.poll(x.next_timer())


def test_a_held_chunk_asks_again_often_enough_to_meet_its_deadline():
    """However long the round trips, a held chunk asks the switch again at least every deadline / `HOLD_ASKS`:
    the RESULT that ends its wait can be lost, and only an ask recovers it."""
    rtt = RttEstimator(path=0.05)  # two round trips, or the timeout (0.15 s), are more than a deadline's eighth
    x = transfer(1, rtt=rtt, deadline=1.0)
    x.start(0.0)
    (again,) = x.poll(x.next_timer())
    held_at = x.next_timer() - 0.1
    x.receive(pending(again, counted=1 << ME), held_at)
    asks = [held_at]
    with pytest.raises(AggregationTimeout):
        for _ in range(1000):
            now = x.next_timer()
            if x.poll(now):
                asks.append(now)
    assert len(asks) >= 6 and max(np.diff(asks)) <= 1.0 / sendplane.HOLD_ASKS + 1e-9


def test_a_peers_answer_for_the_slots_next_chunk_asks_again_at_once():
    """A PENDING for the chunk after ours in our slot (a peer's, in the slot's other copy) says the peers had our
    chunk answered: the RESULT to us was lost, so ours goes again now, not after its hold or timer."""
    rtt = RttEstimator(path=100e-6)
    x = transfer(9, slots=8, rtt=rtt)
    frames = x.start(0.0)
    h = HinaHeader.unpack(frames[0])
    assert x.receive(pending(frames[0], counted=1 << ME), 30e-6) == []  # held
    nxt = pack_header(MsgType.RESULT, h.op, 4, 0, Flags.PENDING, h.pool_index ^ VERSION_BIT, h.offset + 8 * K,
                      K, h.phase) + np.array([1, 0, 0], ">i4").tobytes()
    assert x.receive(nxt, 60e-6) == []  # sooner after it went than a round trip: maybe on its way
    (again,) = x.receive(nxt, 2e-3)
    assert offsets([again]) == [h.offset] and x.stats["asked"] == 1
    (chunk8,) = x.receive(answer(again, flags=Flags.RESEND), 2.1e-3)  # answered: the slot takes its next chunk
    assert offsets([chunk8]) == [h.offset + 8 * K] and x.stats["ignored"] == 2


def test_a_worker_not_counted_sends_its_chunk_again_at_once():
    """A peer's repeat drew a PENDING that lacks this worker: its UPDATE was lost, so it goes again now, not at
    the timeout; unless it went too recently to be at the switch yet."""
    rtt = RttEstimator(path=100e-6)
    x = transfer(1, rtt=rtt)
    (f,) = x.start(0.0)
    assert x.receive(pending(f, counted=0b101), 50e-6) == []  # sent 50 us ago: still on its way
    (again,) = x.receive(pending(f, counted=0b101), 300e-6)
    assert offsets([again]) == offsets([f]) and x.stats["asked"] == 1 and x.stats["timeouts"] == 0


def test_a_worker_not_counted_resends_though_its_srtt_holds_a_late_peers_wait():
    """srtt holds a late peer's wait (one round trip of a second among ones of a millisecond): an UPDATE sent 5 ms
    ago reached the switch or was lost, so a PENDING that lacks this worker has it sent again, not taken for the
    UPDATE still on its way (the worker would not be told again: later PENDINGs go to the repeater alone)."""
    rtt = RttEstimator(path=1e-3)
    for sample in (1e-3, 1.0, 1e-3, 1e-3):
        rtt.sample(sample)
    assert rtt.srtt > 0.05
    x = transfer(1, rtt=rtt)
    (f,) = x.start(0.0)
    (again,) = x.receive(pending(f, counted=0b101), 5e-3)
    assert offsets([again]) == offsets([f]) and x.stats["asked"] == 1


def test_a_chunk_the_switch_held_for_a_late_peer_is_no_round_trip():
    """A peer's repeat drew a PENDING, sent to every member, that counts this worker: its chunk, sent once, is
    held.  Answered when the late peer's UPDATE came 2 s later, its round trip is the peer's lateness, not the
    path's: no sample (a window of them held behind one late peer pulled srtt, and the timeout, to seconds)."""
    rtt = RttEstimator(path=100e-6)
    x = transfer(1, rtt=rtt)
    (f,) = x.start(0.0)
    assert x.receive(pending(f, counted=0b101 | 1 << ME), 300e-6) == []
    srtt, rto = rtt.srtt, rtt.rto
    x.receive(answer(f), 2.0)
    assert x.done and (rtt.srtt, rtt.rto) == (srtt, rto)


def test_a_pending_answer_is_never_taken_as_the_sum():
    x, f, _ = held_chunk()
    assert not x.done and x.stats["ignored"] == 0
    x.receive(answer(f, words=[7, 8, 9]), 2e-3)
    assert x.done and x.result.tolist() == [7, 8, 9]


def test_the_deadline_is_per_chunk_not_per_transfer():
    """Progress on other slots does not keep a stuck one alive: slot 0's chunk never completes while chunks
    after it keep being answered, and the transfer fails at slot 0's deadline, naming it."""
    rtt = RttEstimator(path=1e-3)
    x = transfer(40, slots=8, rtt=rtt, deadline=0.5)
    frames = x.start(0.0)
    stuck, now = frames[0], 0.0
    queue = frames[1:]
    with pytest.raises(AggregationTimeout, match="offset 0 "):
        while now < 10:
            now += 1e-3
            queue += [g for f in queue[:1] for g in x.receive(answer(f), now)]
            queue = queue[1:] if queue and HinaHeader.unpack(queue[0]).offset != 0 else queue
            x.poll(now)
    assert 0.5 <= now < 0.6 and stuck


def test_a_worker_starts_from_its_join_exchange(tmp_path):
    """The join's round trip (`ControlClient.round_trip`) seeds the worker's estimate: its first timeout fits
    the path to the switch."""
    from hina.control import Member
    from hina.control.client import ControlClient
    from hina.host.agent import Worker
    from hina.host.job import JobSpec
    from hina.host.transport import UdpTransport

    pytest.importorskip("hina.emulator.udp")
    from hina.emulator.udp import UdpSwitch

    sw = UdpSwitch()
    sw.start_thread()
    try:
        with UdpTransport(sw.data_address) as transport, ControlClient(sw.control_address) as ctl:
            job = JobSpec(job_id=3, words=4, slots=2)
            ctl.join(job.switch_config(1), Member(0, transport.address))
            assert 0 < ctl.round_trip < 0.1
            worker = Worker(transport, job, 0, path_rtt=ctl.round_trip)
            assert worker.rtt.min_rtt == ctl.round_trip and worker.rtt.rto < 0.1
            unmeasured = Worker(transport, job, 0, path_rtt=math.inf)  # no first-try answer: nothing measured
            assert unmeasured.rtt.srtt is None
    finally:
        sw.stop()
        sw.close()
