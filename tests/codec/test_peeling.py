"""The one-round sketch and its lane-by-lane peeler: a hand-worked example of the lane-major layout,
the compiled peeler against a plain-Python reference, and the residual round when peeling stalls."""

import collections

import numpy as np
import pytest
from helpers import assert_exact, sparse_gradients, union_mask
from hypothesis import given, settings
from hypothesis import strategies as st

from hina import codec
from hina.codec import bitmap, sketch


def encode(params, rows, g):
    """The lane-major sketch of int32 values g, written from the documented layout (a reference for
    the compiled encoder): sign_j(b) * g[i] added, wrapping, to word lane*3R + j*R + row_j(b)."""
    row_of, sign_of = sketch.layout(params, rows)
    words = np.zeros(sketch.TABLES * rows * params.lanes, dtype=np.int64)
    for i in np.flatnonzero(g):
        b, t = divmod(int(i), params.lanes)
        for j in range(sketch.TABLES):
            words[t * sketch.TABLES * rows + j * rows + row_of[j, b]] += int(sign_of[j, b]) * int(g[i])
    return words.astype(np.int32)  # modulo 2**32, as the switch adds


def wrap32(x):
    return (int(x) + 2**31) % 2**32 - 2**31


def reference_peel(params, rows, union_positions, words):
    """Queue peeling of each lane on the documented layout, with Python sets and ints.

    Word lane*3R + j*R + row_j(block) holds sum sign_j(block) * q over the union elements of that lane
    whose block hashes to that row.  A cell with one unpeeled element gives it (cells are taken
    modulo 2**32, as the switch adds); peeled elements leave their three cells.  Returns
    ({position: value}, sorted unpeeled positions).
    """
    row_of, sign_of = sketch.layout(params, rows)
    lanes, cells = params.lanes, sketch.TABLES * rows
    assert words.size == cells * lanes
    decoded, stuck = {}, []
    for t in range(lanes):
        elements = [int(p) for p in union_positions if p % lanes == t]
        if not elements:
            continue
        value = [int(x) for x in words[t * cells : (t + 1) * cells]]
        members = [set() for _ in range(cells)]
        for p in elements:
            for j in range(sketch.TABLES):
                members[j * rows + row_of[j, p // lanes]].add(p)
        queue = collections.deque(c for c in range(cells) if len(members[c]) == 1)
        while queue:
            c = queue.popleft()
            if len(members[c]) != 1:
                continue
            (p,) = members[c]
            b = p // lanes
            v = wrap32(int(sign_of[c // rows, b]) * value[c])
            decoded[p] = v
            for j in range(sketch.TABLES):
                d = j * rows + row_of[j, b]
                members[d].discard(p)
                value[d] -= int(sign_of[j, b]) * v
                if len(members[d]) == 1:
                    queue.append(d)
        stuck += [p for p in elements if p not in decoded]
    return decoded, sorted(stuck)


def peel(params, rows, union_positions, words):
    union = bitmap.from_positions(np.asarray(union_positions, dtype=np.int64), params.length)
    out = np.full(params.length, 12345, dtype=np.int32)  # every element is written: 0 off the union
    residual = sketch.peel(params, rows, union, len(union_positions), words, out)
    return out, residual


def test_hand_worked_example():
    """L = 2 lanes, d = 6 (blocks 0, 1, 2), N = 2 int32 workers, R = 2 rows a sub-table.

    Union: lane 0 holds x0 (pos 0, block 0), x1 (pos 2, block 1), x2 (pos 4,
    block 2); lane 1 holds y1 (pos 3, block 1).  murmur3(b, seed j) for blocks 0, 1, 2:
      seed 0: 0x2362f9de 0xfbf1402a 0x40b23b7f -> rows 0 0 1, signs + - +
      seed 1: 0x78ed212d 0x5e11e574 0xdb9a7e8c -> rows 1 0 0, signs + + -
      seed 2: 0x06dfadfc 0x13d35112 0x2cdefd20 -> rows 0 0 0, signs + + +
    Lane t owns words 6t .. 6t+5, sub-table j rows at 6t + 2j + row.
    Sums: x0 = 5 + 1 = 6, x1 = 7 - 3 = 4, x2 = 2, y1 = 4.  Words:
      lane 0: (0,0) = x0 - x1 = 2, (0,1) = x2 = 2, (1,0) = x1 - x2 = 2, (1,1) = x0 = 6,
              (2,0) = x0 + x1 + x2 = 12, (2,1) = 0
      lane 1: (0,0) = -y1 = -4, (0,1) = 0, (1,0) = y1 = 4, (1,1) = 0, (2,0) = y1 = 4, (2,1) = 0
    Lane 0: word 1 holds x2 alone -> x2 = 2 and word 3 holds x0 alone -> x0 = 6; peeling x2
    leaves word 2 = x1 alone -> x1 = 4.  Lane 1: y1 alone in every cell -> y1 = 4.
    """
    g0 = np.array([5, 0, 7, 0, 0, 0], dtype=np.int32)
    g1 = np.array([1, 0, -3, 4, 2, 0], dtype=np.int32)
    # c = 0.7 sizes R = 2 from the scale round's estimate (|U| ~ 4.67: ceil(0.7 * 7.9 / 3) = 2)
    params = codec.CodecParams(length=6, workers=2, dtype="int32", lanes=2, mode="sketch", group=1,
                               cells_per_element=0.7)
    row_of, sign_of = sketch.layout(params, 2)
    assert row_of.tolist() == [[0, 0, 1], [1, 0, 0], [0, 0, 0]]
    assert sign_of.tolist() == [[1, -1, 1], [1, 1, -1], [1, 1, 1]]

    sessions = [codec.WorkerSession(params, g) for g in (g0, g1)]
    first = [s.next_phase() for s in sessions]
    for s in sessions:
        s.receive(codec.aggregate_round(first))
    second = [s.next_phase() for s in sessions]
    assert [seg.name for seg in second[0].segments] == ["index", "sketch"]
    s0, s1 = (ph.segments[1].words for ph in second)
    assert s0.tolist() == [5 - 7, 0, 7, 5, 12, 0] + [0] * 6
    assert s1.tolist() == [1 + 3, 2, -3 - 2, 1, 1 - 3 + 2, 0] + [-4, 0, 4, 0, 4, 0]
    assert np.array_equal(s0, encode(params, 2, g0)) and np.array_equal(s1, encode(params, 2, g1))
    total = codec.aggregate_round(second)
    assert total[1:].tolist() == [2, 2, 2, 6, 12, 0, -4, 0, 4, 0, 4, 0]  # after the one index word
    for s in sessions:
        s.receive(total)
    r = sessions[0].result()
    assert r.fixed.tolist() == [6, 0, 4, 4, 2, 0]
    assert (r.encoding, r.union, r.rows, r.residual, r.rounds) == ("sketch", 4, 2, 0, 2)

    out, residual = peel(params, 2, [0, 2, 3, 4], total[1:])
    assert out.tolist() == [6, 0, 4, 4, 2, 0] and residual.size == 0
    assert reference_peel(params, 2, [0, 2, 3, 4], total[1:]) == ({0: 6, 2: 4, 3: 4, 4: 2}, [])


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("lanes,group", [(1024, 1), (7, 1), (64, 16)])
def test_encoder_writes_the_documented_layout(dtype, lanes, group):
    """A worker's sketch segment equals the reference encoding of its quantized gradient."""
    g = sparse_gradients(np.random.default_rng(lanes), 3, 3001, 0.2, dtype=dtype)[0]
    params = codec.CodecParams(length=3001, workers=3, dtype=np.dtype(dtype).name, lanes=lanes,
                               mode="sketch", group=group)
    session = codec.WorkerSession(params, g)
    first = session.next_phase()
    session.receive(first.words)  # the worker alone: its own exponent, its own statistics
    while not any(seg.name == "sketch" for seg in session.next_phase().segments):
        session.receive(session.next_phase().words)
    (words,) = [seg.words for seg in session.next_phase().segments if seg.name == "sketch"]
    rows = words.size // (sketch.TABLES * lanes)
    assert words.size == sketch.TABLES * rows * lanes
    shift = None if dtype == np.int32 else codec.shift_for(codec.exponent(g), 3)
    assert np.array_equal(words, encode(params, rows, codec.quantize(g, shift)))


def test_two_elements_in_identical_cells_stay_in_the_residual():
    """Blocks 0 and 1 of one lane share every row when R = 1: neither can be peeled, whatever the
    words say; an element alone in its lane always peels."""
    params = codec.CodecParams(length=6, workers=1, dtype="int32", lanes=3)
    row_of, sign_of = sketch.layout(params, 1)
    assert not row_of.any()
    words = np.arange(1, 10, dtype=np.int32)  # 3 lanes x 3 cells
    words[3:6] = sign_of[:, 1] * 7  # lane 1 holds only position 4 (block 1), whose sum is 7
    out, residual = peel(params, 1, [0, 3, 4], words)
    assert residual.tolist() == [0, 3]
    assert out.tolist() == [0, 0, 0, 0, 7, 0]


@st.composite
def small_sketches(draw):
    lanes = draw(st.integers(1, 9))
    length = draw(st.integers(1, 300))
    rows = draw(st.integers(1, 6))
    workers = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    density = draw(st.sampled_from([0.02, 0.1, 0.3, 0.7, 1.0]))
    return lanes, length, rows, workers, density, seed


@settings(max_examples=150)
@given(small_sketches())
def test_peeler_matches_a_reference_on_encoded_sketches(case):
    """Sums of encoded int32 sketches (wrapping), union a superset of the support (elements that sum
    to 0 included): same decoded values, same unpeeled set, and every decoded value is the true sum."""
    lanes, length, rows, workers, density, seed = case
    rng = np.random.default_rng(seed)
    params = codec.CodecParams(length=length, workers=workers, dtype="int32", lanes=lanes,
                               seeds=tuple(int(s) for s in rng.choice(2**32, 3, replace=False)))
    grads = []
    for _ in range(workers):
        g = rng.integers(-(2**31), 2**31, size=length, dtype=np.int64).astype(np.int32)
        g[rng.random(length) >= density] = 0
        grads.append(g)
    union = np.flatnonzero(union_mask(grads) | (rng.random(length) < 0.05))
    words = codec.reduce_words(codec.Op.ADD, [encode(params, rows, g) for g in grads])
    truth = np.sum([g.astype(np.int64) for g in grads], axis=0).astype(np.int32)  # wraps like the switch

    out, residual = peel(params, rows, union, words)
    decoded, stuck = reference_peel(params, rows, union, words)
    assert residual.tolist() == stuck
    peeled = np.setdiff1d(union, residual)
    assert sorted(decoded) == peeled.tolist()
    assert out[peeled].tolist() == [decoded[p] for p in peeled.tolist()]
    assert np.array_equal(out[peeled], truth[peeled])
    off = np.ones(length, dtype=bool)
    off[peeled] = False
    assert not out[off].any()  # 0 off the union and at the unpeeled positions


@settings(max_examples=100)
@given(small_sketches())
def test_peeler_finds_the_reference_core_on_arbitrary_words(case):
    """Which elements peel depends on the union and the hashes only, never on the words or the
    order of peeling (the 2-core of the hypergraph)."""
    lanes, length, rows, _, density, seed = case
    rng = np.random.default_rng(seed)
    params = codec.CodecParams(length=length, workers=1, dtype="int32", lanes=lanes)
    union = np.flatnonzero(rng.random(length) < density)
    words = rng.integers(-(2**31), 2**31, size=sketch.TABLES * rows * lanes, dtype=np.int64).astype(np.int32)
    _, residual = peel(params, rows, union, words)
    assert residual.tolist() == reference_peel(params, rows, union, words)[1]


def test_peeler_matches_the_reference_on_a_real_aggregation():
    """The words and rows of a simulated aggregation, re-peeled by both."""
    grads = sparse_gradients(np.random.default_rng(31), 4, 20_011, 0.03, dtype=np.int32)
    result = codec.simulate_allreduce(grads, mode="sketch", lanes=100)
    assert_exact(result, grads)
    names = [s for s in result.workers[0].bytes_sent]
    assert "sketch" in names and "index" in names
    words = result.aggregates[1][-sketch.TABLES * result.rows * 100 :]  # the sketch rides after the index
    union = np.flatnonzero(union_mask(grads))
    out, residual = peel(result.params, result.rows, union, words)
    decoded, stuck = reference_peel(result.params, result.rows, union, words)
    assert residual.tolist() == stuck and residual.size == result.residual
    assert out[list(decoded)].tolist() == list(decoded.values())


def test_peel_refuses_a_sketch_of_the_wrong_size():
    params = codec.CodecParams(length=10, workers=1, dtype="int32", lanes=4)
    union = bitmap.from_positions(np.array([1, 5, 9]), 10)
    out = np.zeros(10, dtype=np.int32)
    with pytest.raises(ValueError, match="expected 24 words, got 25"):
        sketch.peel(params, 2, union, 3, np.zeros(25, dtype=np.int32), out)
    with pytest.raises(ValueError, match="expected 24 words, got 12"):
        sketch.peel(params, 2, union, 3, np.zeros(12, dtype=np.int32), out)


@pytest.mark.parametrize("cells_per_element", [0.5, 0.8])
def test_undersized_sketch_leaves_a_residual_and_stays_exact(cells_per_element):
    grads = sparse_gradients(np.random.default_rng(12), 6, 150_001, 0.05)
    result = codec.simulate_allreduce(grads, mode="sketch", cells_per_element=cells_per_element)
    assert result.encoding == "sketch" and result.residual > 0
    assert result.bytes_per_worker["residual"] == 4 * result.residual
    assert result.bytes_per_worker["sketch"] == 4 * sketch.TABLES * result.rows * 1024
    assert result.workers[0].rounds == 3  # scale, index + sketch, residual
    assert_exact(result, grads)


def test_sketch_without_a_residual_takes_two_rounds():
    """A sketch sized far above need peels everything: no residual segment, no third round."""
    grads = sparse_gradients(np.random.default_rng(14), 3, 40_000, 0.002)
    result = codec.simulate_allreduce(grads, mode="sketch", cells_per_element=20)
    assert_exact(result, grads)
    assert result.residual == 0 and "residual" not in result.bytes_per_worker
    assert result.workers[0].rounds == 2


def test_one_row_sketch_still_exact():
    """Far more union elements than cells (about 300 a lane, 3 cells): almost nothing peels, the
    residual carries the rest."""
    grads = sparse_gradients(np.random.default_rng(14), 3, 4000, 0.5)
    result = codec.simulate_allreduce(grads, mode="sketch", lanes=8, cells_per_element=0.01)
    assert result.rows <= 2 and result.residual > 0.9 * result.union
    assert_exact(result, grads)


@pytest.mark.parametrize("lanes", [1, 3, 7, 64, 1000, 5000])
@pytest.mark.parametrize("group", [1, 8])
def test_lane_counts_that_are_not_powers_of_two(lanes, group):
    grads = sparse_gradients(np.random.default_rng(lanes), 4, 20_011, 0.05)
    result = codec.simulate_allreduce(grads, mode="sketch", lanes=lanes, group=group)
    assert_exact(result, grads)
    assert result.union == union_mask(grads).sum()
    assert result.bytes_per_worker["sketch"] == 4 * sketch.TABLES * result.rows * lanes
