"""The sketch and the peeling decoder: a hand-worked example, the residual phase, both key layouts."""

import numpy as np
import pytest

import codec
from codec import index, sketch
from codec.peel import Decoder
from helpers import assert_exact, sparse_gradients


def test_hand_worked_example():
    """L = 2 lanes, d = 6 (blocks 0, 1, 2), N = 2 int32 workers.

    Union: lane 0 holds x0 (pos 0, block 0), x1 (pos 2, block 1), x2 (pos 4,
    block 2); lane 1 holds y1 (pos 3, block 1).  n_max = 3, so
    R = ceil(1.3 * 3 / 3) = 2.  murmur3(b, seed j) gives, for blocks 0, 1, 2:
      seed 0: 0x2362f9de 0xfbf1402a 0x40b23b7f -> rows 0 0 1, signs + - +
      seed 1: 0x78ed212d 0x5e11e574 0xdb9a7e8c -> rows 1 0 0, signs + + -
      seed 2: 0x06dfadfc 0x13d35112 0x2cdefd20 -> rows 0 0 0, signs + + +
    Sums: x0 = 5 + 1 = 6, x1 = 7 - 3 = 4, x2 = 2, y1 = 4.  Cells (table, row, lane):
      (0,0,0) = x0 - x1 = 2      (0,0,1) = -y1 = -4
      (0,1,0) = x2 = 2           (0,1,1) = 0
      (1,0,0) = x1 - x2 = 2      (1,0,1) = y1 = 4
      (1,1,0) = x0 = 6           (1,1,1) = 0
      (2,0,0) = x0+x1+x2 = 12    (2,0,1) = y1 = 4
      (2,1,*) = 0
    Round 1, sub-table 0: pure cells (0,0,1) -> y1 = -1 * -4 = 4 and
    (0,1,0) -> x2 = 2.  Peeling x2 leaves (1,0,0) = x1 alone.
    Round 1, sub-table 1: pure cells (1,0,0) -> x1 = 4 and (1,1,0) -> x0 = 6
    ((1,0,1) emptied when y1 was peeled).  Round 2 finds nothing.
    """
    g0 = np.array([5, 0, 7, 0, 0, 0], dtype=np.int32)
    g1 = np.array([1, 0, -3, 4, 2, 0], dtype=np.int32)
    params = codec.CodecParams(length=6, workers=2, dtype="int32", lanes=2)
    union = index.union_indices(index.support_words(np.flatnonzero(g0 | g1), 6), 6)
    assert union.tolist() == [0, 2, 3, 4]
    layout = sketch.SketchLayout.for_union(params, union)
    assert (layout.max_lane_count, layout.rows) == (3, 2)
    assert layout.row_of.tolist() == [[0, 0, 1], [1, 0, 0], [0, 0, 0]]
    assert layout.sign_of.tolist() == [[1, -1, 1], [1, 1, -1], [1, 1, 1]]

    s0 = sketch.encode(layout, np.flatnonzero(g0), g0[g0 != 0])
    s1 = sketch.encode(layout, np.flatnonzero(g1), g1[g1 != 0])
    assert s0.tolist() == [5 - 7, 0, 0, 0, 7, 0, 5, 0, 12, 0, 0, 0]
    total = codec.reduce_words(codec.Op.ADD, [s0, s1])
    assert total.tolist() == [2, -4, 2, 0, 2, 4, 6, 0, 12, 4, 0, 0]

    for packed in (True, False):
        peeled = Decoder(layout, union, packed=packed).peel(total)
        assert peeled.indices.tolist() == [3, 4, 2, 0]  # y1, x2 | x1, x0
        assert peeled.values.tolist() == [4, 2, 4, 6]
        assert peeled.rounds == 1 and peeled.residual.size == 0

    result = codec.simulate_allreduce([g0, g1], lanes=2)
    assert result.fixed.tolist() == [6, 0, 4, 4, 2, 0]


@pytest.mark.parametrize("cells_per_element", [0.6, 0.9])
def test_residual_phase_when_peeling_stalls(cells_per_element):
    grads = sparse_gradients(np.random.default_rng(12), 6, 150_001, 0.05)
    result = codec.simulate_allreduce(grads, cells_per_element=cells_per_element)
    assert result.residual > 0
    assert result.bytes_per_worker["residual"] == 4 * result.residual
    assert_exact(result, grads)


def test_residual_is_rare_at_the_default_cell_factor():
    grads = sparse_gradients(np.random.default_rng(13), 8, 2**20, 0.01)
    result = codec.simulate_allreduce(grads)
    assert_exact(result, grads)
    assert result.residual < 0.001 * result.union


def test_tiny_sketch_still_exact():
    """One row per sub-table: almost nothing peels, the residual carries the rest."""
    grads = sparse_gradients(np.random.default_rng(14), 3, 4000, 0.5)
    result = codec.simulate_allreduce(grads, lanes=4096)
    assert_exact(result, grads)


@pytest.mark.parametrize("lanes", [1, 3, 64, 1000])
def test_other_lane_counts(lanes):
    grads = sparse_gradients(np.random.default_rng(lanes), 4, 20_011, 0.05)
    assert_exact(codec.simulate_allreduce(grads, lanes=lanes), grads)


def test_packed_and_split_keys_agree():
    rng = np.random.default_rng(15)
    params = codec.CodecParams(length=300_000, workers=8, dtype="int32")
    idxs = [np.sort(rng.choice(300_000, 20_000, replace=False)) for _ in range(8)]
    vals = [rng.integers(-(2**31), 2**31, i.size).astype(np.int32) for i in idxs]
    union = np.unique(np.concatenate(idxs))
    layout = sketch.SketchLayout.for_union(params, union)
    total = codec.reduce_words(codec.Op.ADD, [sketch.encode(layout, i, v) for i, v in zip(idxs, vals)])
    packed = Decoder(layout, union, packed=True)
    split = Decoder(layout, union, packed=False)
    assert packed.packed and not split.packed
    a, b = packed.peel(total), split.peel(total)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.values, b.values)
    expected = np.zeros(300_000, dtype=np.int64)
    for i, v in zip(idxs, vals):
        expected[i] += v
    out = np.zeros(300_000, dtype=np.int32)
    out[a.indices] = a.values
    out[a.residual] = expected[a.residual].astype(np.int32)
    assert np.array_equal(out, expected.astype(np.int32))


def test_decoder_rejects_a_sketch_of_the_wrong_size():
    union = np.array([1, 5, 9])
    params = codec.CodecParams(length=10, workers=1, dtype="int32", lanes=4)
    layout = sketch.SketchLayout.for_union(params, union)
    assert layout.words == 3 * 2 * 4  # lane 1 holds all three: R = ceil(1.3 * 3 / 3) = 2
    with pytest.raises(ValueError, match="expected 24 words, got 25"):
        Decoder(layout, union).peel(np.zeros(25, dtype=np.int32))
