"""WorkerSession: the rounds the hosts drive (segments and their operators) in every mode, its
refusals, mismatched jobs, replay and the caller's output buffer."""

import numpy as np
import pytest
from helpers import assert_exact, drive, sparse_gradients

from hina import codec
from hina.codec import Op

FIRST = (("check", Op.OR), ("scale", Op.MAX), ("stats", Op.ADD))


def params(**kw):
    return codec.CodecParams(**{"length": 5000, "workers": 2, **kw})


def sparse(seed=0, length=5000, density=0.02, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [np.where(rng.random(length) < density, rng.standard_normal(length), 0).astype(dtype)
            for _ in range(2)]


# mode, group -> the rounds after the first (a residual round may follow the sketch)
SEQUENCES = {
    ("dense", 0): [(("dense", Op.ADD),)],
    ("blocks", 0): [(("block_index", Op.OR),), (("blocks", Op.ADD),)],
    ("aligned", 1): [(("index", Op.OR),), (("values", Op.ADD),)],
    ("aligned", 8): [(("index_coarse", Op.OR),), (("index_fine", Op.OR),), (("values", Op.ADD),)],
    ("sketch", 1): [(("index", Op.OR), ("sketch", Op.ADD))],
    ("sketch", 64): [(("index_coarse", Op.OR),), (("index_fine", Op.OR), ("sketch", Op.ADD))],
}


@pytest.mark.parametrize("mode,group", list(SEQUENCES), ids=[f"{m}-{g}" for m, g in SEQUENCES])
@pytest.mark.parametrize("cells_per_element", [1.3, 0.3])
def test_round_sequence_and_segment_ops(mode, group, cells_per_element):
    grads = sparse()
    p = params(mode=mode, group=group, cells_per_element=cells_per_element)
    sessions = [codec.WorkerSession(p, g) for g in grads]
    first = sessions[0].next_phase()
    assert tuple((s.name, s.op) for s in first.segments) == FIRST
    assert first.name == "check+scale+stats"
    assert [s.words.size for s in first.segments] == [2, 2, 11]
    assert first.ops == ((Op.OR, 0, 2), (Op.MAX, 2, 4), (Op.ADD, 4, 15)) and first.words.size == 15
    with pytest.raises(AttributeError, match="use `ops`"):
        _ = first.op
    results, aggregates, rounds = drive(sessions)
    expected = [FIRST] + SEQUENCES[mode, group]
    if mode == "sketch" and results[0].residual:
        expected.append((("residual", Op.ADD),))
    assert rounds == expected
    assert results[0].rounds == len(rounds) == len(aggregates)
    assert all(a.dtype == np.int32 for a in aggregates)
    assert (results[0].encoding, results[0].group) == (mode, group)
    assert_exact(codec.AllreduceResult(p, tuple(results), tuple(aggregates)), grads)
    if cells_per_element == 0.3 and mode == "sketch":
        assert results[0].residual > 0  # the residual round was seen above


def test_phase_split_and_words():
    g = np.zeros(5000, dtype=np.float32)
    g[::7] = 1.5
    s = codec.WorkerSession(params(workers=1, mode="sketch", group=1), g)
    s.receive(s.next_phase().words)
    phase = s.next_phase()
    index, sk = phase.segments
    assert np.array_equal(phase.words, np.concatenate([index.words, sk.words]))
    parts = phase.split(np.arange(phase.words.size, dtype=np.int32))
    assert [p.size for p in parts] == [index.words.size, sk.words.size]
    assert parts[1][0] == index.words.size
    s.receive(phase.words)
    while not s.done:
        s.receive(s.next_phase().words)
    assert s.next_phase() is None
    assert np.array_equal(s.result().sum, g.astype(np.float64))


def test_first_round_carries_no_gradient_values():
    """Same support, same peak exponent, different values: the first round's words are identical."""
    g = np.zeros(5000, dtype=np.float32)
    g[[3, 100, 4999]] = [1.5, -0.75, 1.25]
    h = np.zeros(5000, dtype=np.float32)
    h[[3, 100, 4999]] = [-1.0, 1.875, 1.0000001]
    a, b = (codec.WorkerSession(params(), x).next_phase() for x in (g, h))
    assert np.array_equal(a.words, b.words) and a.words.size == 15


def test_refuses_gradient_that_does_not_fit_the_job():
    with pytest.raises(ValueError, match="has 4999 elements but the job's length is 5000"):
        codec.WorkerSession(params(), np.zeros(4999, dtype=np.float32))
    with pytest.raises(ValueError, match="is float64 but the job's dtype is float32"):
        codec.WorkerSession(params(), np.zeros(5000, dtype=np.float64))
    with pytest.raises(ValueError, match="unsupported dtype int64"):
        codec.WorkerSession(params(), np.zeros(5000, dtype=np.int64))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("bad,at", [(np.nan, 17), (np.inf, 4999), (-np.inf, 0), (np.nan, 2500)])
def test_refuses_non_finite_values_naming_the_index(dtype, bad, at):
    g = np.zeros(5000, dtype=dtype)
    g[::3] = 1.0
    g[at] = bad
    with pytest.raises(ValueError, match=f"non-finite value .* at flat index {at};"):
        codec.WorkerSession(params(dtype=dtype), g, who="worker 3's gradient")
    with pytest.raises(ValueError, match=f"worker 1's gradient holds a non-finite value .* at flat index {at};"):
        codec.simulate_allreduce([np.zeros(5000, dtype=dtype), g])


def test_non_finite_refusal_names_the_first_bad_index_of_a_shaped_gradient():
    g = np.ones((50, 100), dtype=np.float32)
    g[3, 7] = np.inf
    g[40, 1] = np.nan
    with pytest.raises(ValueError, match="at flat index 307;"):
        codec.WorkerSession(params(), g)


def test_refuses_aggregate_of_the_wrong_length():
    s = codec.WorkerSession(params(), np.ones(5000, dtype=np.float32))
    with pytest.raises(ValueError, match="check\\+scale\\+stats phase: expected 15 aggregated words, got 14"):
        s.receive(np.zeros(14, dtype=np.int32))
    s.receive(s.next_phase().words)
    assert s.next_phase().name == "dense"
    with pytest.raises(ValueError, match="dense phase: expected 5000 aggregated words, got 5001"):
        s.receive(np.zeros(5001, dtype=np.int32))


def first_round_alone(p, g):
    s = codec.WorkerSession(p, g)
    s.receive(s.next_phase().words)  # as if this worker's words were everyone's
    return s


@pytest.mark.parametrize("mode,group,what", [
    ("aligned", 1, "lacks some of this worker's non-zeros"),
    ("sketch", 1, "lacks some of this worker's non-zeros"),
    ("aligned", 16, "lacks some of this worker's groups"),
    ("sketch", 1024, "lacks some of this worker's groups"),
    ("blocks", 0, "lacks some of this worker's blocks"),
])
def test_refuses_a_union_that_misses_its_own_support(mode, group, what):
    g = np.zeros(5000, dtype=np.float32)
    g[[10, 4000]] = 1.0
    s = first_round_alone(params(mode=mode, group=group), g)
    phase = s.next_phase()
    agg = phase.words.copy()
    unit = 256 if mode == "blocks" else group
    agg[0] &= ~np.int32(1 << (10 // unit))  # element 10 (or its group, or its block) missing from the union
    with pytest.raises(ValueError, match=what):
        s.receive(agg)


def test_refuses_a_fine_union_that_misses_its_own_bits():
    g = np.zeros(5000, dtype=np.float32)
    g[[10, 11, 4000]] = 1.0
    s = first_round_alone(params(mode="aligned", group=16), g)
    s.receive(s.next_phase().words)  # the groups
    agg = s.next_phase().words.copy()
    agg[0] &= ~np.int32(1 << 11)  # group 0 is first in the fine stream: drop element 11
    with pytest.raises(ValueError, match="lacks some of this worker's non-zeros"):
        s.receive(agg)


@pytest.mark.parametrize("mode,group", [("aligned", 1), ("aligned", 8), ("blocks", 0)])
def test_refuses_a_union_with_bits_past_the_tensor(mode, group):
    g = np.zeros(5001, dtype=np.float32)
    g[5000] = 1.0
    s = first_round_alone(params(length=5001, mode=mode, group=group), g)
    agg = s.next_phase().words.copy()
    agg[-1] |= np.int32(1 << 30)
    with pytest.raises(ValueError, match="beyond length"):
        s.receive(agg)


def test_refuses_a_scale_below_its_own():
    s = codec.WorkerSession(params(), np.ones(5000, dtype=np.float32))
    agg = s.next_phase().words.copy()
    assert agg[2] == 1  # frexp exponent of 1.0
    agg[2] = -5
    with pytest.raises(ValueError, match="aggregate exponent -5 is below this worker's own"):
        s.receive(agg)


def test_refuses_int32_that_could_overflow_after_the_first_round():
    g = np.full(5000, 7, dtype=np.int32)
    s = codec.WorkerSession(params(dtype="int32", workers=3), g)
    agg = s.next_phase().words.copy()
    assert agg[2] == 7
    agg[2] = 2**30  # another worker's peak
    with pytest.raises(ValueError, match="could overflow"):
        s.receive(agg)


def test_result_before_done_and_receive_after_done():
    s = codec.WorkerSession(params(workers=1), np.zeros(5000, dtype=np.float32))
    with pytest.raises(RuntimeError, match="phases left"):
        s.result()
    drive([s])
    with pytest.raises(RuntimeError, match="done"):
        s.receive(np.zeros(1, dtype=np.int32))


@pytest.mark.parametrize("other", [dict(lanes=512), dict(length=5001), dict(dtype="float16"), dict(workers=4),
                                   dict(mode="dense"), dict(mode="sketch"), dict(group=4), dict(group=1),
                                   dict(link_gbps=100), dict(round_us=10), dict(cells_per_element=1.5),
                                   dict(seeds=(0, 1, 3))],
                         ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_workers_with_mismatched_parameters_all_refuse_before_sending_data(other):
    """Three workers, one of them with other parameters: after the first round (fingerprints, the
    exponent and counts, no gradient value), every worker refuses, the matching ones included."""
    base = params(workers=3)
    odd = codec.CodecParams(**{**base.to_config(), **other})
    assert odd.fingerprint() != base.fingerprint()
    sessions = [codec.WorkerSession(p, np.ones(p.length, dtype=p.dtype)) for p in (base, odd, base)]
    phases = [s.next_phase() for s in sessions]
    for ph in phases:
        assert tuple((seg.name, seg.op) for seg in ph.segments) == FIRST and ph.words.size == 15
    agg = codec.aggregate_round(phases)
    for s in sessions:
        with pytest.raises(ValueError, match="mismatched job parameters"):
            s.receive(agg)


def test_sessions_driven_by_hand_match_simulate():
    grads = sparse(1, density=0.1)
    results, aggregates, _ = drive([codec.WorkerSession(params(), g) for g in grads])
    reference = codec.simulate_allreduce(grads)
    assert np.array_equal(results[0].fixed, reference.fixed)
    assert results[0].bytes_sent == {k: v for k, v in reference.bytes_per_worker.items() if k != "total"}
    assert all(np.array_equal(a, b) for a, b in zip(aggregates, reference.aggregates, strict=True))


@pytest.mark.parametrize("mode,group", [("auto", 0), ("dense", 0), ("blocks", 0), ("aligned", 1), ("aligned", 32),
                                        ("sketch", 1), ("sketch", 2)])
def test_replay_reproduces_a_worker_from_recorded_aggregates(mode, group):
    grads = sparse_gradients(np.random.default_rng(2), 3, 100_000, 0.02)
    reference = codec.simulate_allreduce(grads, mode=mode, group=group, cells_per_element=0.8)
    assert [a.dtype for a in reference.aggregates] == [np.int32] * len(reference.aggregates)
    again = codec.replay(reference.params, grads[1], reference.aggregates)
    w = reference.workers[1]
    assert np.array_equal(again.fixed, w.fixed)
    assert (again.encoding, again.group, again.union, again.rows, again.residual, again.rounds, again.bytes_sent) == \
           (w.encoding, w.group, w.union, w.rows, w.residual, w.rounds, w.bytes_sent)
    assert set(again.seconds) == {"encode", "decode"}
    assert all(v > 0 for v in again.seconds.values())
    out = np.full(100_000, -1, dtype=np.int32)
    into = codec.replay(reference.params, grads[1], reference.aggregates, out=out, workspace=codec.Workspace())
    assert np.shares_memory(into.fixed, out) and np.array_equal(out, w.fixed)


@pytest.mark.parametrize("mode,group", [("dense", 0), ("blocks", 0), ("aligned", 1), ("aligned", 4),
                                        ("sketch", 1), ("sketch", 8)])
@pytest.mark.parametrize("zero", [False, True])
def test_out_buffer_receives_the_sum(mode, group, zero):
    grads = [np.zeros((50, 100), dtype=np.float32) for _ in range(2)] if zero else \
        [g.reshape(50, 100) for g in sparse(3)]
    p = params(mode=mode, group=group)
    outs = [np.full(5000, 12345, dtype=np.int32) for _ in grads]
    workspace = codec.Workspace()
    sessions = [codec.WorkerSession(p, g, out=o, workspace=workspace if w == 0 else None)
                for w, (g, o) in enumerate(zip(grads, outs))]
    results, aggregates, _ = drive(sessions)
    for r, o in zip(results, outs):
        assert np.shares_memory(r.fixed, o) and r.fixed.shape == (50, 100)
    assert_exact(codec.AllreduceResult(p, tuple(results), tuple(aggregates)), grads)
    assert not np.shares_memory(outs[0], outs[1])


def test_a_workspace_reused_across_steps_gives_each_steps_sum():
    """The same workspace and out buffer for step after step (shapes and densities changing)."""
    workspace, out = codec.Workspace(), np.empty(5000, dtype=np.int32)
    for step, (mode, density) in enumerate([("aligned", 0.3), ("sketch", 0.01), ("blocks", 0.001),
                                             ("sketch", 0.2), ("aligned", 0.0), ("dense", 0.5)]):
        grads = sparse(step, density=density)
        others = [codec.WorkerSession(params(mode=mode), g) for g in grads[1:]]
        mine = codec.WorkerSession(params(mode=mode), grads[0], out=out, workspace=workspace)
        results, aggregates, _ = drive([mine, *others])
        assert results[0].fixed is not None and np.shares_memory(results[0].fixed, out)
        assert_exact(codec.AllreduceResult(params(mode=mode), tuple(results), tuple(aggregates)), grads)


@pytest.mark.parametrize("out,match", [
    (np.zeros(5000, dtype=np.int64), "int32 array of 5000 elements"),
    (np.zeros(4999, dtype=np.int32), "int32 array of 5000 elements"),
    (np.zeros(10_000, dtype=np.int32)[::2], "C-contiguous"),
    ([0] * 5000, "int32 array of 5000 elements"),
])
def test_refuses_a_wrong_out_buffer(out, match):
    with pytest.raises(ValueError, match=match):
        codec.WorkerSession(params(), np.zeros(5000, dtype=np.float32), out=out)
