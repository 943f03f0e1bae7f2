"""The switch pipeline, frame by frame: every slot-protocol rule and every drop reason."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hina.codec.ops import Op
from hina.control import JobConfig, Member
from hina.emulator import Pipeline
from hina.host.congestion import CongestionWindow
from hina.host.congestion_settings import CongestionSettings
from hina.sim.netsim import expected, run_transfers
from hina.wire import Drop, Flags, MsgType
from hina.wire.headers import HEADER_BYTES, HinaHeader, pack_header

K = 4


def src(w, job=1):
    return (f"10.0.0.{job * 10 + w}", 5000)


def make_pipeline(workers=3, job_id=1, slot_base=0, slots=4, words=K):
    p = Pipeline()
    p.add_job(JobConfig(job_id, workers, words, slot_base, slots,
                        tuple(Member(w, src(w, job_id)) for w in range(workers))))
    return p


def update(worker, words, *, job=1, op=Op.ADD, slot=0, version=0, offset=0, count=None, phase=7,
           msg_type=MsgType.UPDATE, k=K):
    words = list(words) + [0] * (k - len(words))
    hdr = pack_header(msg_type, op, job, worker, 0, (version << 15) | slot, offset,
                      len(words) if count is None else count, phase)
    return hdr + np.array(words, dtype=">i4").tobytes()


def payload(frame):
    return np.frombuffer(frame, dtype=">i4", offset=HEADER_BYTES).tolist()


def test_first_arrival_then_combine_then_multicast():
    p = make_pipeline()
    assert p.update(update(0, [1, 2, 3, 4]), src(0)) is None
    assert p.update(update(1, [10, 20, 30, 40]), src(1)) is None
    emit = p.update(update(2, [100, 200, 300, 400]), src(2))
    assert emit.dests == (src(0), src(1), src(2))
    hdr = HinaHeader.unpack(emit.frame)
    assert (hdr.msg_type, hdr.op, hdr.job_id, hdr.flags, hdr.slot, hdr.version, hdr.offset, hdr.count, hdr.phase) == \
        (MsgType.RESULT, Op.ADD, 1, 0, 0, 0, 0, K, 7)
    assert payload(emit.frame) == [111, 222, 333, 444]
    assert p.counters()["jobs"][1] == {"updates": 3, "results": 1, "resends": 0, "pending": 0, "drops": {}}


@pytest.mark.parametrize("op,a,b,want", [
    (Op.ADD, [2**31 - 1, -(2**31), 5, -5], [1, -1, -7, 5], [-(2**31), 2**31 - 1, -2, 0]),  # wraps
    (Op.OR, [0b0101, -(2**31), 0, 7], [0b0011, 1, 0, 8], [0b0111, -(2**31) + 1, 0, 15]),
    (Op.MAX, [-5, 3, -(2**31), 0], [-7, -3, 2**31 - 1, 0], [-5, 3, 2**31 - 1, 0]),  # signed
])
def test_operators(op, a, b, want):
    p = make_pipeline(workers=2)
    p.update(update(0, a, op=op), src(0))
    assert payload(p.update(update(1, b, op=op), src(1)).frame) == want


def test_duplicate_before_completion_is_dropped_and_every_member_hears_who_is_counted():
    p = make_pipeline()
    p.update(update(0, [1]), src(0))
    p.update(update(2, [3]), src(2))
    emit = p.update(update(0, [1]), src(0))  # worker 0 asks again while worker 1's UPDATE is missing
    assert p.drops[Drop.DUPLICATE] == 1 and p.counters()["jobs"][1]["pending"] == 1
    assert emit.dests == (src(0), src(1), src(2))  # the counted stop resending; the missing learn it
    h = HinaHeader.unpack(emit.frame)
    assert (h.msg_type, h.flags, h.slot, h.offset) == (MsgType.RESULT, Flags.PENDING, 0, 0)
    assert payload(emit.frame)[0] == 0b101 and set(payload(emit.frame)[1:]) == {0}  # workers 0 and 2 counted
    assert payload(p.update(update(1, [2]), src(1)).frame)[0] == 6  # the duplicate counted once


def test_duplicate_after_completion_gets_a_unicast_resend():
    p = make_pipeline()
    for w in range(3):
        p.update(update(w, [w + 1]), src(w))
    emit = p.update(update(1, [2]), src(1))
    assert emit.dests == (src(1),)
    assert HinaHeader.unpack(emit.frame).flags == Flags.RESEND
    assert payload(emit.frame)[0] == 6
    assert p.counters()["jobs"][1]["resends"] == 1


def test_resend_still_works_after_the_others_moved_to_the_other_copy():
    """Worker 2 lost its RESULT; 0 and 1 already sent their next chunk on copy 1 (clearing copy 0 bits)."""
    p = make_pipeline()
    for w in range(3):
        p.update(update(w, [w + 1]), src(w))
    p.update(update(0, [9], version=1, offset=16), src(0))
    p.update(update(1, [9], version=1, offset=16), src(1))
    emit = p.update(update(2, [3]), src(2))
    assert emit is not None and emit.dests == (src(2),) and payload(emit.frame)[0] == 6


def test_late_duplicate_from_a_worker_that_left_a_complete_copy_is_answered_from_the_copy():
    """Answered as a duplicate of a complete copy is: the sender ignores it (its slot waits on the other copy);
    a restarted run's hello that meets an earlier run's complete hello copy learns from it that it met another
    run.  The copy is untouched."""
    p = make_pipeline()
    for w in range(3):
        p.update(update(w, [w + 1]), src(w))
    p.update(update(0, [9], version=1, offset=16), src(0))  # worker 0 moved on: its bit in copy 0 is cleared
    emit = p.update(update(0, [1]), src(0))  # its old retransmission arrives late
    assert emit.dests == (src(0),) and HinaHeader.unpack(emit.frame).flags == Flags.RESEND
    assert payload(emit.frame)[0] == 6 and not p.drops.get(Drop.STALE)
    assert payload(p.update(update(2, [3]), src(2)).frame)[0] == 6  # copy 0 untouched


def refused(emit, sent, workers=3):
    """The switch refused `sent` to every member, as a RESULT flagged STALE_RUN with its own words."""
    assert emit is not None and emit.dests == tuple(src(w) for w in range(workers))
    h = HinaHeader.unpack(emit.frame)
    assert h.msg_type == MsgType.RESULT and h.flags == Flags.STALE_RUN
    assert emit.frame[16:] == sent[16:] and emit.frame[2:5] == sent[2:5] and emit.frame[6:] == sent[6:]


def test_offset_disagreeing_with_a_non_empty_copy_is_another_runs_state():
    p = make_pipeline()
    p.update(update(0, [1], offset=0), src(0))
    late = update(1, [1], offset=K)
    refused(p.update(late, src(1)), late)
    assert p.drops[Drop.STALE_RUN] == 1 and p.drops[Drop.STALE] == 0


@pytest.mark.parametrize("complete", [True, False])
def test_a_restarted_worker_is_refused_not_answered_with_an_old_result(complete):
    """A fresh worker starts at copy 0 with phase tag 0; the copy holds the earlier run's chunk (tag 7)."""
    p = make_pipeline()
    senders = (0, 1, 2) if complete else (0, 1)
    for w in senders:
        p.update(update(w, [w + 1]), src(w))
    before = dict(p.jobs[1].dropped)
    fresh = update(0, [100], phase=0)
    refused(p.update(fresh, src(0)), fresh)  # its bit is set: a resend would hand it the old sum
    fresh2 = update(2, [100], phase=0)
    if not complete:  # its bit is not set: adding would mix its words into the old ones
        refused(p.update(fresh2, src(2)), fresh2)
    assert p.jobs[1].resends == 0 and p.jobs[1].counter[0] == len(senders)
    assert p.jobs[1].dropped[Drop.STALE_RUN] - before.get(Drop.STALE_RUN, 0) == (1 if complete else 2)
    p.reset_job(1)
    assert p.update(fresh, src(0)) is None and p.jobs[1].counter[0] == 1  # after a reset: a first arrival


def test_copy_flip_and_slot_reuse():
    p = make_pipeline(workers=2)
    offsets = [0, 4 * K, 8 * K, 12 * K]  # chunks 0, W, 2W, 3W of slot 0 with W = 4
    for use, offset in enumerate(offsets):
        version = use % 2
        p.update(update(0, [use + 1, 1], version=version, offset=offset), src(0))
        emit = p.update(update(1, [10 * (use + 1), 2], version=version, offset=offset), src(1))
        assert HinaHeader.unpack(emit.frame).offset == offset
        assert payload(emit.frame)[:2] == [11 * (use + 1), 3]  # nothing left over from the earlier use
    assert p.counters()["jobs"][1]["results"] == 4


def test_two_jobs_cannot_touch_each_others_slots():
    p = make_pipeline(job_id=1, slot_base=0, slots=4)
    p.add_job(JobConfig(2, 2, K, 4, 4, (Member(0, src(0, 2)), Member(1, src(1, 2)))))
    with pytest.raises(ValueError, match="overlap"):
        p.add_job(JobConfig(3, 2, K, 6, 4))
    assert p.update(update(0, [1], job=2, slot=0), src(0, 2)) is None  # job 1's slot
    assert p.drops[Drop.BAD_SLOT] == 1
    assert p.update(update(0, [1], job=1, slot=0), src(0, 2)) is None  # job 2's worker speaking for job 1
    assert p.drops[Drop.UNAUTHORIZED] == 1
    p.update(update(0, [5], job=2, slot=4), src(0, 2))
    for w in range(3):
        p.update(update(w, [1], job=1, slot=0), src(w))
    emit = p.update(update(1, [6], job=2, slot=4), src(1, 2))
    assert payload(emit.frame)[0] == 11 and emit.dests == (src(0, 2), src(1, 2))
    assert p.counters()["jobs"][1]["results"] == 1 and p.counters()["jobs"][2]["results"] == 1


@pytest.mark.parametrize("frame_fn,reason", [
    (lambda: update(0, [1])[:HEADER_BYTES - 1], Drop.TRUNCATED),
    (lambda: update(0, [1])[:-1], Drop.TRUNCATED),
    (lambda: update(0, [1]) + b"\0", Drop.BAD_LENGTH),
    (lambda: update(0, [1], msg_type=MsgType.RESULT), Drop.BAD_MSG_TYPE),
    (lambda: update(0, [1], msg_type=9), Drop.BAD_MSG_TYPE),
    (lambda: update(0, [1], op=3), Drop.BAD_OP),
    (lambda: update(0, [1], job=99), Drop.UNKNOWN_JOB),
    (lambda: update(3, [1]), Drop.BAD_WORKER),
    (lambda: update(1, [1]), Drop.UNAUTHORIZED),  # sent from worker 0's address
    (lambda: update(0, [1], count=K + 1), Drop.BAD_COUNT),
    (lambda: update(0, [1], slot=4), Drop.BAD_SLOT),
])
def test_each_drop_reason_is_counted(frame_fn, reason):
    p = make_pipeline()
    assert p.update(frame_fn(), src(0)) is None
    assert p.drops == {reason: 1}
    assert p.counters()["drops"] == {reason.name.lower(): 1}
    assert p.counters()["jobs"][1]["updates"] == 0


def test_reset_job_empties_every_copy():
    p = make_pipeline(workers=2)
    p.update(update(0, [1]), src(0))
    p.reset_job(1)
    p.update(update(1, [5], offset=K), src(1))  # would be stale without the reset
    emit = p.update(update(0, [6], offset=K), src(0))
    assert payload(emit.frame)[0] == 11


def test_remove_job_and_unknown_job_errors():
    p = make_pipeline()
    p.remove_job(1)
    assert p.update(update(0, [1]), src(0)) is None and p.drops[Drop.UNKNOWN_JOB] == 1
    with pytest.raises(KeyError, match="no job 1"):
        p.reset_job(1)


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), workers=st.integers(1, 6), length=st.integers(1, 200),
       words=st.integers(1, 9), slots=st.integers(1, 5), op=st.sampled_from(list(Op)),
       drop=st.sampled_from([0.0, 0.05, 0.2]), dup=st.sampled_from([0.0, 0.05, 0.2]), adaptive=st.booleans())
def test_slot_protocol_is_exact_under_loss_duplication_and_reordering(seed, workers, length, words, slots, op,
                                                                      drop, dup, adaptive):
    """Workers' windows against the pipeline on a virtual network: every round's result is exact."""
    rng = np.random.default_rng(seed)
    p = Pipeline()
    p.add_job(JobConfig(5, workers, words, 3, slots, tuple(Member(w, ("w", w)) for w in range(workers))))
    rounds = 3
    payloads = [rng.integers(-(2**31), 2**31, size=length).astype(np.int32) for _ in range(workers)]
    results, net, _ = run_transfers(p, payloads, op, job_id=5, words=words, slot_base=3, slots=slots, rng=rng,
                                    drop=drop, dup=dup, rounds=rounds,
                                    windows=[CongestionWindow(slots, CongestionSettings(fair=False, initial=1))
                                             for _ in range(workers)] if adaptive else None)
    want = expected(op, payloads)
    for w in range(workers):
        for r in range(rounds):
            assert np.array_equal(results[w][r], want), f"worker {w} round {r}"
    assert p.drops.keys() <= {Drop.DUPLICATE, Drop.STALE}


def test_a_refusal_reaches_a_worker_whose_window_never_got_there():
    """An earlier run left a partial in slot 1, which one worker's window never reaches: worker 0 (a full window)
    sends its chunk there and is refused; worker 1 (a window of one) only has slot 0 in flight.  The
    refusal goes to every member, and worker 1 stops at once with the same StaleSwitchState, instead of
    waiting for a slot 0 that worker 0 will never complete."""
    from hina.host.window import PhaseTransfer, RttEstimator, SlotPool, StaleSwitchState

    p = make_pipeline(workers=2, slots=2)
    p.update(update(0, [5], slot=1, offset=999, phase=3), src(0))  # the dead run's worker 0, slot 1
    payload = np.arange(4 * K, dtype=np.int32)

    def transfer(w, window):  # a window of one: the least CongestionWindow keeps is 2, so its limit
        return PhaseTransfer(job_id=1, worker_id=w, words=K, pool=SlotPool(0, 2), rtt=RttEstimator(), tag=9,
                             op=Op.ADD, payload=payload, name="values", now=0.0, deadline=5.0,
                             window=CongestionWindow(window, CongestionSettings(fair=False, initial=window, minimum=1)))

    ahead, behind = transfer(0, 2), transfer(1, 1)
    sent_behind = behind.start(0.0)
    assert [HinaHeader.unpack(f).slot for f in sent_behind] == [0]
    for f in sent_behind:
        assert p.update(f, src(1)) is None
    emits = [p.update(f, src(0)) for f in ahead.start(0.0)]
    refusal = next(e for e in emits if e is not None and HinaHeader.unpack(e.frame).flags == Flags.STALE_RUN)
    assert refusal.dests == (src(0), src(1)) and HinaHeader.unpack(refusal.frame).slot == 1
    for x in (ahead, behind):
        with pytest.raises(StaleSwitchState, match="earlier run of this job, so it refused phase 'values'"):
            x.receive(refusal.frame, 0.001)
