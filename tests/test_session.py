"""WorkerSession: the phase sequence the hosts drive, and its refusals."""

import numpy as np
import pytest

import codec
from codec import Op


def params(**kw):
    return codec.CodecParams(**{"length": 5000, "workers": 2, **kw})


def drive(sessions):
    while not sessions[0].done:
        phases = [s.next_phase() for s in sessions]
        agg = codec.reduce_words(phases[0].op, [p.words for p in phases])
        for s in sessions:
            s.receive(agg)
    return [s.result() for s in sessions]


def test_phase_sequence_and_ops():
    g = np.zeros(5000, dtype=np.float32)
    g[::7] = 1.5
    s = codec.WorkerSession(params(workers=1), g)
    seen = []
    while not s.done:
        p = s.next_phase()
        seen.append((p.name, p.op, p.words.dtype))
        s.receive(p.words)
    expected = [("check", Op.OR), ("scale", Op.MAX), ("index", Op.OR), ("sketch", Op.ADD)]
    assert [x[:2] for x in seen] in (expected, expected + [("residual", Op.ADD)])
    assert all(x[2] == np.int32 for x in seen)
    assert s.next_phase() is None
    assert np.array_equal(s.result().sum, g.astype(np.float64))


def test_refuses_gradient_that_does_not_fit_the_job():
    with pytest.raises(ValueError, match="has 4999 elements but the job's length is 5000"):
        codec.WorkerSession(params(), np.zeros(4999, dtype=np.float32))
    with pytest.raises(ValueError, match="is float64 but the job's dtype is float32"):
        codec.WorkerSession(params(), np.zeros(5000, dtype=np.float64))
    with pytest.raises(ValueError, match="non-finite"):
        codec.WorkerSession(params(), np.full(5000, np.nan, dtype=np.float32))


def test_refuses_aggregate_of_the_wrong_length():
    s = codec.WorkerSession(params(), np.ones(5000, dtype=np.float32))
    s.receive(s.next_phase().words)  # check
    with pytest.raises(ValueError, match="scale phase: expected 2 aggregated words, got 3"):
        s.receive(np.zeros(3, dtype=np.int32))


@pytest.mark.parametrize("other", [dict(lanes=512), dict(length=5001), dict(dtype="float16"), dict(mode="dense"),
                                   dict(max_union=0.5)])
def test_workers_with_mismatched_parameters_all_refuse_before_sending_data(other):
    a = codec.WorkerSession(params(), np.ones(5000, dtype=np.float32))
    b_params = params(**other)
    b = codec.WorkerSession(b_params, np.ones(b_params.length, dtype=b_params.dtype))
    pa, pb = a.next_phase(), b.next_phase()
    assert pa.name == pb.name == "check" and pa.words.size == pb.words.size == 2
    agg = codec.reduce_words(Op.OR, [pa.words, pb.words])
    for s in (a, b):
        with pytest.raises(ValueError, match="mismatched job parameters"):
            s.receive(agg)


def test_refuses_a_union_that_misses_its_own_support():
    g = np.zeros(5000, dtype=np.float32)
    g[10] = 1.0
    s = codec.WorkerSession(params(), g)
    s.receive(s.next_phase().words)  # check
    s.receive(s.next_phase().words)  # scale
    with pytest.raises(ValueError, match="lacks some of this worker's non-zeros"):
        s.receive(np.zeros_like(s.next_phase().words))


def test_refuses_a_scale_below_its_own():
    s = codec.WorkerSession(params(), np.ones(5000, dtype=np.float32))
    s.receive(s.next_phase().words)  # check
    with pytest.raises(ValueError, match="below this worker's own"):
        s.receive(np.array([-5, 5000], dtype=np.int32))


def test_result_before_done_and_receive_after_done():
    s = codec.WorkerSession(params(workers=1), np.zeros(5000, dtype=np.float32))
    with pytest.raises(RuntimeError, match="phases left"):
        s.result()
    drive([s])
    with pytest.raises(RuntimeError, match="done"):
        s.receive(np.zeros(1, dtype=np.int32))


def test_sessions_driven_by_hand_match_simulate():
    rng = np.random.default_rng(1)
    grads = [np.where(rng.random(5000) < 0.1, rng.standard_normal(5000), 0).astype(np.float32) for _ in range(2)]
    results = drive([codec.WorkerSession(params(), g) for g in grads])
    reference = codec.simulate_allreduce(grads)
    assert np.array_equal(results[0].fixed, reference.fixed)
    assert results[0].bytes_sent == {k: v for k, v in reference.bytes_per_worker.items() if k != "total"}


def test_replay_reproduces_a_worker_from_recorded_aggregates():
    rng = np.random.default_rng(2)
    grads = [np.where(rng.random(100_000) < 0.02, rng.standard_normal(100_000), 0).astype(np.float32)
             for _ in range(2)]
    reference = codec.simulate_allreduce(grads)
    assert "sketch" in reference.bytes_per_worker
    assert [a.dtype for a in reference.aggregates] == [np.int32] * len(reference.aggregates)
    again = codec.replay(reference.params, grads[1], reference.aggregates)
    assert np.array_equal(again.fixed, reference.workers[1].fixed)
    assert set(again.seconds) == {"encode", "decode_union", "decode_sketch"}
    assert all(v > 0 for v in again.seconds.values())
