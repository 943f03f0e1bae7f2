"""The worker's slot window (sans-I/O): chunking, slot and copy choice, retransmission, deadline."""

import numpy as np
import pytest

from codec.ops import Op
from host.window import AggregationTimeout, PhaseTransfer, RttEstimator, SlotPool
from switch_emulator.headers import HEADER_BYTES, VERSION_BIT, HinaHeader, MsgType, pack_header


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
    assert pool.version == [0, 0]  # each slot used twice: back to copy 0
    y = transfer([5], pool=pool)
    (fy,) = y.start(0.0)
    assert HinaHeader.unpack(fy).version == 0
    y.receive(result_for(fy, [5]), 0.01)
    assert y.done and pool.version == [1, 0]


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


def test_after_progress_every_due_chunk_is_resent():
    x = transfer(range(9), slots=3, rtt=RttEstimator(initial=0.1, minimum=0.1))
    first = x.start(0.0)
    x.poll(0.1)  # stalled: probe chunk 0 only; chunks 1 and 2 wait
    x.receive(result_for(first[0], [0, 1, 2]), 0.15)  # progress: 1 and 2 restart a full timeout
    assert x.poll(0.2) == []
    resent = x.poll(0.26)
    assert sorted(HinaHeader.unpack(f).offset for f in resent) == [3, 6]  # chunks 1 and 2 (of 3)


def test_rtt_estimator_follows_samples_within_bounds():
    r = RttEstimator(initial=1.0, minimum=0.01, maximum=0.5)
    r.sample(0.002)
    assert r.rto == 0.01
    for _ in range(50):
        r.sample(0.3)
    assert 0.3 <= r.rto <= 0.5
