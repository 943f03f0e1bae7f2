"""The worker's slot window (sans-I/O): chunking, slot and copy choice, retransmission, deadline."""

import math

import numpy as np
import pytest

from hina.codec.ops import Op
from hina.host import sendplane as sp
from hina.host.congestion import CongestionWindow
from hina.host.congestion_settings import CongestionSettings
from hina.host.window import AggregationTimeout, PhaseTransfer, Ring, RttEstimator, SlotPool
from hina.wire.headers import HEADER_BYTES, VERSION_BIT, Flags, HinaHeader, MsgType, pack_header


def transfer(payload, *, words=3, slots=2, pool=None, tag=9, rtt=None, deadline=1.0):
    return PhaseTransfer(job_id=4, worker_id=1, words=words, pool=pool or SlotPool(10, slots),
                         rtt=rtt or RttEstimator(initial=0.1, minimum=0.05), tag=tag, op=Op.OR,
                         payload=np.asarray(payload, dtype=np.int32), name="index", now=0.0, deadline=deadline)


def result_for(update: bytes, words, *, tag=None, job=4) -> bytes:
    h = HinaHeader.unpack(update)
    hdr = pack_header(MsgType.RESULT, h.op, job, h.worker_id, 0, h.pool_index, h.offset, h.count,
                      h.phase if tag is None else tag)
    return hdr + np.array(list(words) + [0] * (3 - len(words)), dtype=">i4").tobytes()


def test_chunks_go_to_slots_in_order_with_alternating_copies():
    x = transfer(range(1, 11))  # 10 words, K = 3 -> 4 chunks over 2 slots
    first = [HinaHeader.unpack(f) for f in x.start(0.0)]
    assert [(h.msg_type, h.op, h.job_id, h.worker_id, h.slot, h.version, h.offset, h.count, h.phase)
            for h in first] == [(0, Op.OR, 4, 1, 10, 0, 0, 3, 9), (0, Op.OR, 4, 1, 11, 0, 3, 3, 9)]
    f0 = pack_header(0, Op.OR, 4, 1, 0, 10, 0, 3, 9) + np.array([1, 2, 3], dtype=">i4").tobytes()
    nxt = x.receive(result_for(f0, [1, 2, 3]), 0.01)
    h = HinaHeader.unpack(nxt[0])
    assert (h.slot, h.version, h.offset, h.count) == (10, 1, 6, 3)  # chunk 2 = chunk 0 + W, other copy
    assert np.frombuffer(nxt[0], ">i4", offset=HEADER_BYTES).tolist() == [7, 8, 9]


def test_result_assembly_and_pool_persistence():
    pool = SlotPool(10, 2)
    x = transfer(range(1, 11), pool=pool)
    pending = x.start(0.0)
    while pending:
        f = pending.pop(0)
        h = HinaHeader.unpack(f)
        pending += x.receive(result_for(f, np.frombuffer(f, ">i4", h.count, HEADER_BYTES) * 10), 0.01)
    assert x.done and x.result.tolist() == [10 * i for i in range(1, 11)]
    assert pool.version.tolist() == [0, 0]  # each slot used twice: back to copy 0
    y = transfer([5], pool=pool)
    (fy,) = y.start(0.0)
    assert HinaHeader.unpack(fy).version == 0
    y.receive(result_for(fy, [5]), 0.01)
    assert y.done and pool.version.tolist() == [1, 0]


@pytest.mark.parametrize("change", ["tag", "job", "offset", "version", "count", "type", "short"])
def test_mismatched_results_are_ignored(change):
    x = transfer([1, 2, 3])
    (f,) = x.start(0.0)
    good = result_for(f, [1, 2, 3])
    h = HinaHeader.unpack(good)
    fields = dict(msg_type=h.msg_type, op=h.op, job_id=h.job_id, worker_id=h.worker_id, flags=0,
                  pool_index=h.pool_index, offset=h.offset, count=h.count, phase=h.phase)
    if change == "tag":
        fields["phase"] = 8
    elif change == "job":
        fields["job_id"] = 5
    elif change == "offset":
        fields["offset"] = 3
    elif change == "version":
        fields["pool_index"] ^= VERSION_BIT
    elif change == "count":
        fields["count"] = 2
    elif change == "type":
        fields["msg_type"] = MsgType.UPDATE
    bad = pack_header(*fields.values()) + good[HEADER_BYTES:]
    if change == "short":
        bad = good[:HEADER_BYTES + 4]
    assert x.receive(bad, 0.01) == [] and not x.done and x.stats["ignored"] == 1
    x.receive(good, 0.02)
    assert x.done


def test_stalled_transfer_probes_with_one_chunk_and_backs_off_then_deadline_names_job_phase_offset():
    x = transfer(range(9), slots=3, deadline=1.0)
    x.start(0.0)
    assert x.poll(0.05) == []
    probes = x.poll(0.1)  # nothing ever came back: resend only the oldest chunk
    assert [HinaHeader.unpack(f).offset for f in probes] == [0]
    assert x.poll(0.25) == []  # every chunk backed off to 0.2 s
    assert [HinaHeader.unpack(f).offset for f in x.poll(0.31)] == [0]
    assert x.stats["retransmissions"] == 2
    with pytest.raises(AggregationTimeout, match=r"job 4, worker 1: phase 'index' .* offset 0 .* within 1 s; 0/3"):
        x.poll(1.0)


def answer(x, frame, now):
    h = HinaHeader.unpack(frame)
    return x.receive(result_for(frame, np.frombuffer(frame, ">i4", h.count, HEADER_BYTES)), now)


def offsets(frames):
    return [HinaHeader.unpack(f).offset for f in frames]


def test_after_an_answered_probe_the_rest_of_a_lost_tail_goes_again_after_one_timeout():
    """A tail of lost chunks: the timeout probes the oldest; once its answer shows the path works, the
    others wait one more (backed-off) timeout and then all go again, not one timeout each."""
    x = transfer(range(9), slots=3, rtt=RttEstimator(initial=0.1, minimum=0.1))
    x.start(0.0)
    probe = x.poll(0.1)
    assert offsets(probe) == [0]
    assert answer(x, probe[0], 0.15) == []  # an answer to a resent chunk may answer the original: no RACK
    assert x.poll(0.34) == []  # chunks 1 and 2 restarted a full (backed-off, 0.2 s) timeout at 0.15
    assert offsets(x.poll(0.35)) == [3, 6]
    assert x.stats["timeouts"] == 2 and x.stats["retransmissions"] == 3


def test_a_chunk_overtaken_by_a_later_answer_goes_again_after_the_reordering_allowance():
    rtt = RttEstimator(initial=1.0, minimum=1.0)
    x = transfer(range(30), slots=4, rtt=rtt)  # 10 chunks
    first = x.start(0.0)
    assert answer(x, first[0], 0.010) and x.stats["retransmissions"] == 0  # chunk 0: rtt 10 ms, fill chunk 4
    out = answer(x, first[2], 0.0105)  # chunk 2 answered, chunk 1 (sent just before it) not yet
    assert out == []  # chunk 5 waits for slot 1 (chunk 1): in order; and 1 may still be on its way
    assert x.next_timer() == pytest.approx(0.0105 + 0.010 / 4, abs=2e-4)  # its RTT plus srtt / 4
    assert offsets(x.poll(0.0105 + 0.02)) == [3]  # past the allowance: chunk 1 is lost, sent again
    assert x.stats["fast_retransmissions"] == 1 and x.stats["timeouts"] == 0


def test_with_pipes_a_chunk_is_overtaken_only_by_chunks_of_its_own_pipe():
    """Pipe s mod P answers slot s, in order within the pipe only: chunk 0 (slot 10, pipe 0 of 2) is not
    lost because pipe 1 answered chunk 1; it is once pipe 0 answers chunk 2, sent after it."""
    rtt = RttEstimator(initial=1.0, minimum=1.0, probe_floor=math.inf)  # RACK alone: no tail probe
    x = PhaseTransfer(job_id=4, worker_id=1, words=3, pool=SlotPool(10, 4), rtt=rtt, tag=9, op=Op.OR,
                      payload=np.arange(30, dtype=np.int32), name="index", now=0.0, deadline=1.0, pipes=2)
    first = x.start(0.0)
    answer(x, first[1], 0.010)  # pipe 1
    answer(x, first[3], 0.011)  # pipe 1
    assert x.poll(0.1) == [] and x.next_timer() > 0.5  # pipe 0's chunks 0 and 2 merely wait: no RACK timer
    answer(x, first[2], 0.101)  # pipe 0 answers chunk 2, sent after chunk 0
    assert offsets(x.poll(0.2)) == [0] and x.stats["fast_retransmissions"] == 1


def chunk_1_overtaken_and_resent():
    """Chunks 0 and 2 answered after 10 ms, chunk 1 not: resent as overtaken at 50 ms."""
    rtt = RttEstimator(initial=1.0, minimum=1.0)
    x = transfer(range(30), slots=4, rtt=rtt)
    first = x.start(0.0)
    answer(x, first[0], 0.010)
    answer(x, first[2], 0.0105)
    (resent,) = x.poll(0.05)
    assert offsets([resent]) == [3] and rtt.reorder_scale == 1.0
    return x, rtt, first, resent


def test_a_first_answer_sooner_after_the_resend_than_any_round_trip_widens_the_reordering_allowance():
    """Pipes answer their slots in their own time: chunk 1 overtaken, resent, then its first answer comes
    1 ms after the resend, sooner than any round trip (10 ms): it was never lost, so allow more."""
    x, rtt, first, resent = chunk_1_overtaken_and_resent()
    srtt = rtt.srtt
    answer(x, first[1], 0.051)  # the first transmission's answer, late
    assert x.stats["spurious_resends"] == 1 and rtt.reorder_scale == 2.0
    # sent twice and answered too soon for the resend: the first transmission's 51 ms is a sample
    assert rtt.srtt == pytest.approx(0.875 * srtt + 0.125 * 0.051)
    assert rtt.reordering == pytest.approx(2 * rtt.srtt / 4)
    h = HinaHeader.unpack(resent)
    again = pack_header(MsgType.RESULT, h.op, 4, 1, Flags.RESEND, h.pool_index, h.offset, h.count, h.phase)
    sampled = rtt.srtt
    assert x.receive(again + bytes(12), 0.052) == [] and rtt.reorder_scale == 2.0  # the resend's answer: ignored
    assert rtt.srtt == sampled and x.stats["spurious_resends"] == 1  # and no second sample of the same chunk


def test_an_answer_a_round_trip_after_the_resend_is_no_evidence_of_reordering():
    """On a lossy path another worker's resend often completes the chunk just after ours went: its answer
    comes about a round trip after our resend, and says nothing about reordering."""
    x, rtt, _, resent = chunk_1_overtaken_and_resent()
    answer(x, resent, 0.058)
    assert x.stats["spurious_resends"] == 0 and rtt.reorder_scale == 1.0


def test_resent_chunks_overtaken_by_a_later_resend_go_again_without_a_timeout():
    """During a stall nothing new is sent, so only resent chunks can say that a resend was lost: the
    answer to chunk 1's resend, a round trip after it, shows that chunk 0's earlier resend was lost."""
    rtt = RttEstimator(initial=1.0, minimum=1.0)
    x = transfer(range(30), slots=4, rtt=rtt)  # 10 chunks, 4 slots
    first = x.start(0.0)
    answer(x, first[2], 0.010)  # chunks 0 and 1 overtaken
    answer(x, first[3], 0.0101)
    resent = x.poll(0.02)
    assert offsets(resent) == [0, 3]  # both resent at 20 ms; chunks 4 and 5 wait for their slots
    assert answer(x, resent[1], 0.031) == []  # chunk 1's resend answered 11 ms later
    assert x.next_timer() == pytest.approx(0.02 + 0.011 + rtt.reordering)
    assert offsets(x.poll(0.034)) == [0]  # chunk 0's resend was lost too: again, at once
    assert x.stats["fast_retransmissions"] == 3 and x.stats["timeouts"] == 0


def test_a_lost_resend_the_window_drained_behind_goes_again_after_two_round_trips_not_the_timeout():
    """Chunk 0's RESULT is lost; chunks 1-3 are answered, chunk 0 goes again as overtaken, and that resend
    is lost too.  Chunk 4 waits for chunk 0's slot, so nothing is sent after the resend that could say
    it was lost: after two smoothed round trips of silence chunk 0 goes once more (a tail probe), long
    before its 1 s timeout, without backing the timeout off or cutting the window."""
    rtt = RttEstimator(initial=1.0, minimum=1.0)
    window = CongestionWindow(4, CongestionSettings(fair=False, initial=4))
    x = PhaseTransfer(job_id=4, worker_id=1, words=3, pool=SlotPool(10, 4), rtt=rtt, tag=9, op=Op.OR,
                      payload=np.arange(30, dtype=np.int32), name="index", now=0.0, deadline=5.0, window=window)
    first = x.start(0.0)
    out = [f for i, f in enumerate(first[1:], start=1) for f in answer(x, first[i], 0.010 + i * 1e-4)]
    assert offsets(out) == []  # chunks 5-7 wait in order behind chunk 4, which waits for chunk 0's slot
    (resend,) = x.poll(0.0103 + rtt.reordering)  # overtaken: chunk 0 goes again, and is lost again
    assert offsets([resend]) == [0] and x.stats["fast_retransmissions"] == 1
    sent = 0.0103 + rtt.reordering
    assert rtt.srtt == pytest.approx(0.010, abs=1e-3) and rtt.probe_after == pytest.approx(2 * rtt.srtt)
    assert x.next_timer() == pytest.approx(sent + rtt.probe_after)
    assert x.poll(sent + rtt.probe_after - 1e-4) == []
    (probe,) = x.poll(sent + rtt.probe_after)
    assert offsets([probe]) == [0] and x.stats["probes"] == 1 and x.stats["timeouts"] == 0
    assert rtt.rto == 1.0 and window.cwnd == 4  # neither backed off nor cut
    assert x.poll(sent + 3 * rtt.probe_after) == []  # once per silence
    assert offsets(answer(x, probe, sent + 3 * rtt.probe_after)) == [12, 15, 18, 21]  # answered: chunks 4-7 go
    assert x.stats["retransmissions"] == 2


def test_without_a_round_trip_or_with_an_infinite_floor_nothing_probes_before_the_timeout():
    for rtt, first_answer in ((RttEstimator(initial=0.5, minimum=0.5), False),
                              (RttEstimator(initial=0.5, minimum=0.5, probe_floor=math.inf), True)):
        x = transfer(range(30), slots=4, rtt=rtt)
        first = x.start(0.0)
        if first_answer:
            answer(x, first[0], 0.01)
        assert x.poll(0.4) == [] and x.stats["probes"] == 0


def test_answers_late_alike_cost_one_probe_per_timeout_not_the_window():
    """A late peer delays every RESULT by the same amount: no chunk is overtaken, nothing is resent but the
    oldest chunk, once per (backed-off) timeout."""
    rtt = RttEstimator(initial=0.05, minimum=0.05)
    x = transfer(range(30), slots=8, rtt=rtt)
    first = x.start(0.0)
    resent = x.poll(0.05) + x.poll(0.10) + x.poll(0.149)
    assert offsets(resent) == [0]  # timeout at 50 ms, then 100 ms backed off: one probe
    for i, f in enumerate(first):  # everything arrives at 140-150 ms, in order
        answer(x, f, 0.14 + i * 0.001)
    assert x.stats["retransmissions"] == 1 and x.stats["fast_retransmissions"] == 0


def test_a_second_answer_to_a_chunk_sent_twice_shows_the_resend_was_spurious_and_times_the_first():
    """A queue that outgrew the timer: chunk 1 went again (a tail probe, two 10 ms round trips after
    the last answer); its first transmission's answer came 130 ms after that (so it could have answered
    either: no sample, Karn), then the resend's.  Two answers: both went through, the first answered
    the first transmission, and its 160 ms is a sample, so the timers learn the longer round trips."""
    rtt = RttEstimator(initial=0.1, minimum=0.02)
    x = transfer(range(18), slots=3, rtt=rtt)  # 6 chunks over 3 slots
    first = x.start(0.0)
    answer(x, first[0], 0.01)
    assert rtt.srtt == 0.01
    (resent,) = x.poll(0.03)
    assert offsets([resent]) == [3] and x.stats["probes"] == 1
    sent = answer(x, first[1], 0.16)
    assert rtt.srtt == 0.01 and x.stats["spurious_resends"] == 0  # ambiguous: no sample
    assert offsets(sent) == [12]  # chunk 4 went into slot 1, the other copy
    assert answer(x, resent, 0.17) == [] and x.stats["ignored"] == 1  # the resend's answer
    assert x.stats["spurious_resends"] == 1 and rtt.srtt == pytest.approx(0.875 * 0.01 + 0.125 * 0.16)
    answer(x, resent, 0.18)  # a third copy (a duplicated frame): no second sample
    assert x.stats["spurious_resends"] == 1 and rtt.srtt == pytest.approx(0.875 * 0.01 + 0.125 * 0.16)


def test_rtt_estimator_follows_samples_within_bounds():
    r = RttEstimator(initial=1.0, minimum=0.01, maximum=0.5, backoff_limit=0.05)
    r.sample(0.002)
    assert r.rto == 0.01
    for _ in range(50):
        r.sample(0.03)
    assert 0.03 <= r.rto <= 0.05
    for _ in range(50):  # answers 150x the least round trip: a queue another flow keeps standing
        r.sample(0.3)
    assert 0.3 <= r.rto <= 0.31  # a timeout short of the round trips would send every chunk twice
    for _ in range(4):
        r.backoff()
    assert r.rto == 0.5  # backed off to the maximum, no further


def test_the_fair_share_estimator_keeps_half_a_round_trip_of_margin_past_a_steady_queue():
    """A queue that stands steady leaves rttvar near 0: RFC 6298's timeout sits just past srtt, and
    a round trip a little longer times out; the fair-share estimator waits srtt / 2 more."""
    plain = RttEstimator(initial=1.0, minimum=0.01, maximum=8.0, backoff_limit=0.05)
    fair = RttEstimator.fair(initial=1.0, minimum=0.01, backoff_limit=0.05)
    assert fair.maximum == 8.0
    for _ in range(50):
        plain.sample(0.3)
        fair.sample(0.3)
    assert plain.rto == pytest.approx(0.3, rel=0.01)
    assert fair.rto == pytest.approx(0.45, rel=0.01)


def test_chunks_held_up_by_a_late_peer_do_not_raise_the_timeout_a_standing_queue_does():
    """A chunk answered late because another worker's UPDATE was lost is one long sample among short
    ones: the cap stays at 50 ms, or every later loss would stall longer, and each longer stall would
    be a longer sample (srtt, which the cap once followed, ratcheted to seconds on BMv2 trees).  A
    queue that stands makes every sample long, and the cap follows it."""
    r = RttEstimator(initial=0.1, minimum=0.02, maximum=2.0, backoff_limit=0.05)
    for _ in range(20):
        for rtt in (0.004, 0.004, 0.004, 0.4):  # every fourth chunk waited for a peer's timeout
            r.sample(rtt)
    assert r.srtt > 0.05 and r.backoff_cap == 0.05 and r.rto == 0.05
    for _ in range(4):
        r.sample(0.3)  # a queue stands: every round trip long
    assert r.backoff_cap == pytest.approx(0.6)


def test_backoff_doubles_up_to_its_limit_or_eight_least_round_trips():
    r = RttEstimator(initial=0.1, minimum=0.005, maximum=2.0, backoff_limit=0.05)
    r.sample(0.001)
    r.sample(0.001)
    assert r.rto == 0.005
    timeouts = []
    for _ in range(6):
        r.backoff()
        timeouts.append(r.rto)
    assert timeouts == [0.01, 0.02, 0.04, 0.05, 0.05, 0.05]  # a lossy link: stalls stay short
    slow = RttEstimator(initial=0.1, minimum=0.005, maximum=2.0, backoff_limit=0.05)
    slow.sample(0.04)  # a path with 40 ms round trips
    for _ in range(8):
        slow.backoff()
    assert slow.rto == 8 * 0.04
    r.sample(0.001)
    assert r.rto == 0.005  # a fresh sample ends the backoff


def test_reordering_allowance_widens_on_evidence_and_narrows_without_it():
    r = RttEstimator()
    r.sample(0.004)
    assert r.reordering == pytest.approx(0.001)
    r.reordered()
    r.reordered()
    assert r.reorder_scale == 4.0 and r.reordering == pytest.approx(0.004)
    for _ in range(RttEstimator.REORDER_DECAY - 1):
        r.recovered()
    assert r.reorder_scale == 4.0
    r.recovered()
    assert r.reorder_scale == 2.0
    for _ in range(3 * RttEstimator.REORDER_DECAY):
        r.recovered()
    assert r.reorder_scale == 1.0


def test_a_batch_taken_at_once_sends_what_the_same_frames_received_one_by_one_send():
    """`take` (a recvmmsg batch in, frames into a sendmmsg ring), `step` (the same and the timers, in one
    call) and `receive` (one frame in, bytes out) run the same rules: with RESULTs lost, stray frames among
    them, and a ring that fills after every RESULT (so `take` and `step` stop and resume), all three send the
    same frames and end with the same sum."""
    def make(ring=None):
        return PhaseTransfer(job_id=4, worker_id=1, words=3, pool=SlotPool(10, 4), rtt=RttEstimator(initial=0.05),
                             tag=9, op=Op.ADD, payload=np.arange(100, dtype=np.int32), name="dense", now=0.0,
                             deadline=5.0,
                             window=CongestionWindow(4, CongestionSettings(fair=False, initial=2)), ring=ring)

    one, batch = make(), make(Ring(3, 4, tx=np.zeros(10 * 28, np.uint8), iov=np.zeros(20, np.uint64)))
    stepped = make(Ring(3, 4, tx=np.zeros(10 * 28, np.uint8), iov=np.zeros(20, np.uint64)))
    assert batch.ring.capacity == 10  # 2 W + 1 = 9 must stay free before each frame: one RESULT per call
    pending = one.start(0.0)
    assert batch.ring.frames(batch.start_into(0.0)) == stepped.ring.frames(stepped.start_into(0.0)) == pending
    fills = 0
    now, sent = 0.0, 0
    while not one.done:
        now += 0.01
        answers = []
        for f in pending:
            sent += 1
            if sent % 7:  # every 7th RESULT is lost
                h = HinaHeader.unpack(f)
                answers.append(result_for(f, np.frombuffer(f, ">i4", h.count, HEADER_BYTES) * 3))
        answers.insert(len(answers) // 2, result_for(pending[0], [1, 2, 3], tag=8) if pending else b"x")  # stray
        out_one = [g for a in answers for g in one.receive(a, now)] + one.poll(now)
        rx = np.zeros(64 * len(answers), np.uint8)
        lengths = np.zeros(2 * len(answers), np.uint32)[::2]  # strided, as the mmsghdr lengths are
        for i, a in enumerate(answers):
            rx[64 * i : 64 * i + len(a)] = np.frombuffer(a, np.uint8)
            lengths[i] = len(a)
        out_batch, i = [], 0
        while i < len(answers):
            i, m = batch.take(rx, 64, lengths, i, len(answers), now)
            out_batch += batch.ring.frames(m)
        out_batch += batch.ring.frames(batch.poll_into(now, 0))
        assert out_batch == out_one
        out_stepped = []
        i, m, status, timer = stepped.step(rx, 64, lengths, 0, len(answers), now)
        while status == sp.FULL:  # the ring filled: send it, step on from there
            fills += 1
            out_stepped += stepped.ring.frames(m)
            i, m, status, timer = stepped.step(rx, 64, lengths, i, len(answers), now)
        out_stepped += stepped.ring.frames(m)
        assert out_stepped == out_one and status == (sp.DONE if one.done else sp.OK)
        assert timer == one.next_timer()
        pending = out_one
        assert now < 3
    assert batch.done and batch.result.tolist() == one.result.tolist() == (3 * np.arange(100)).tolist()
    assert stepped.done and stepped.result.tolist() == one.result.tolist()
    assert batch.stats == stepped.stats == one.stats and one.stats["retransmissions"] > 0 and one.stats["ignored"] > 0
    assert batch.pool.version.tolist() == stepped.pool.version.tolist() == one.pool.version.tolist()
    assert fills > 0


def test_sendplane_sits_below_window():
    """The layering the docstrings state: sendplane (rules of `now` and frames) imports nothing from the
    objects above it (window, agent, the congestion room's objects and settings), at module level or inside a
    function, so the two never form a cycle; of the congestion room it takes the compiled rules alone, and
    those import nothing from hina at all."""
    import ast
    from pathlib import Path

    def hina_modules(name):
        tree = ast.parse((Path(__file__).resolve().parents[2] / "host" / f"{name}.py").read_text())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                found.add(f"hina.host.{node.module}" if node.level else node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        return {m for m in found if m.startswith("hina")}

    assert {m for m in hina_modules("sendplane") if m.startswith("hina.host")} == {"hina.host.congestion_rules"}
    assert hina_modules("congestion_rules") == set()
