"""The torch backend of the codec (`codec.torch_kernels`) against the numba codec, word for word.

For the same gradients and parameters, workers whose gradients are torch
tensors must send the numba workers' words in every round, bit for bit
(so a job may mix them), and decode the same sum.  Run on CPU tensors
everywhere; on CUDA tensors where a GPU is present (skipped otherwise).
"""

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    EACH_MODE,
    GROUP_SIZES,
    LANES,
    MODE_GROUPS,
    SUPPORTS,
    codec_jobs,
    dense_fixed_sum,
    drive,
    random_bitmap,
    sparse_gradients,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from hina import codec
from hina.codec import bitmap

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch", reason="the torch backend needs the torch extra: pip install -e '.[torch]'")
tk = importlib.import_module("hina.codec.torch_kernels")  # after the skip: it imports torch

# small tensors: one intra-op thread spares OpenMP's barriers on a shared machine (results do not change)
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[2]
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device: torch.cuda.is_available() is False")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]


def tensors(grads, device="cpu"):
    return [torch.from_numpy(np.ascontiguousarray(g)).to(device) for g in grads]


def run_both(grads, device="cpu", torch_workers=None, **params):
    """Numba sessions and torch sessions in lockstep, each set aggregated on its own: every worker's words
    must match its twin's in every round.  torch_workers: which workers of the torch set use tensors
    (default: all; the others keep numpy, a mixed job).  Returns (numba results, torch results)."""
    p = codec.CodecParams(length=grads[0].size, workers=len(grads), dtype=grads[0].dtype.name, **params)
    chosen = range(len(grads)) if torch_workers is None else torch_workers
    inputs = [t if w in chosen else g for w, (g, t) in enumerate(zip(grads, tensors(grads, device)))]
    ref = [codec.WorkerSession(p, g) for g in grads]
    dut = [codec.WorkerSession(p, x) for x in inputs]
    rounds = 0
    while not ref[0].done:
        assert not dut[0].done, f"round {rounds}: the torch workers finished early"
        a, b = [s.next_phase() for s in ref], [s.next_phase() for s in dut]
        for w, (x, y) in enumerate(zip(a, b)):
            assert [(s.name, s.op) for s in x.segments] == [(s.name, s.op) for s in y.segments], (rounds, w)
            assert isinstance(y.words, np.ndarray) and y.words.dtype == np.int32
            diff = np.flatnonzero(x.words != y.words)
            assert diff.size == 0, f"round {rounds} ({x.name}), worker {w}: {diff.size} words differ, first {diff[:5]}"
        aggregate = codec.aggregate_round(a)
        for s in ref + dut:
            s.receive(aggregate.copy())
        rounds += 1
    assert all(s.done for s in dut)
    ra, rb = [s.result() for s in ref], [s.result() for s in dut]
    for w, (x, y) in enumerate(zip(ra, rb)):
        fixed = y.fixed.cpu().numpy() if isinstance(y.fixed, torch.Tensor) else y.fixed
        assert fixed.shape == x.fixed.shape and np.array_equal(fixed, x.fixed), w
        assert (x.encoding, x.group, x.union, x.rows, x.residual, x.rounds, x.bytes_sent, x.shift) == \
               (y.encoding, y.group, y.union, y.rows, y.residual, y.rounds, y.bytes_sent, y.shift)
        if w in chosen:
            assert isinstance(y.fixed, torch.Tensor) and y.fixed.device.type == device
            total = y.sum.cpu().numpy()
            assert total.dtype == x.sum.dtype and np.array_equal(total, x.sum)
    return ra, rb


def exact(ra, grads):
    """The numba side's sum is the dense reference (so the torch side's, equal to it, is too)."""
    assert np.array_equal(ra[0].fixed, dense_fixed_sum(grads, ra[0].shift))


def simulate_torch(grads, device="cpu", **params):
    """Every worker on torch tensors, numpy standing in for the switch."""
    p = codec.CodecParams(length=grads[0].size, workers=len(grads), dtype=grads[0].dtype.name, **params)
    return drive([codec.WorkerSession(p, t) for t in tensors(grads, device)])[0]


@settings(max_examples=60, deadline=None)
@given(codec_jobs())
def test_torch_words_equal_numba_for_random_jobs(job):
    workers, length, density, support, dtype, cancel, seed, mode, group, lanes = job
    grads = sparse_gradients(np.random.default_rng(seed), workers, length, density, support=support, dtype=dtype,
                             cancel=cancel)
    ra, _ = run_both(grads, mode=mode, group=group, lanes=lanes)
    exact(ra, grads)


@EACH_MODE
@pytest.mark.parametrize("support", SUPPORTS)
def test_each_mode_and_support(mode, group, support):
    grads = sparse_gradients(np.random.default_rng(7), 8, 50_001, 0.01, support=support)
    ra, _ = run_both(grads, mode=mode, group=group)
    exact(ra, grads)


@EACH_MODE
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
def test_each_mode_and_dtype(mode, group, dtype):
    grads = sparse_gradients(np.random.default_rng(8), 6, 30_011, 0.02, support="overlapping", dtype=dtype)
    ra, _ = run_both(grads, mode=mode, group=group)
    exact(ra, grads)


@EACH_MODE
def test_values_that_cancel(mode, group):
    grads = sparse_gradients(np.random.default_rng(3), 4, 20_001, 0.1, cancel=True)
    ra, rb = run_both(grads, mode=mode, group=group)
    assert not rb[0].fixed.any() and rb[0].union in (None, ra[0].union)


@EACH_MODE
@pytest.mark.parametrize("dtype,magnitudes", [(np.float32, (1e-30, 1e30)), (np.float64, (1e-30, 1e30)),
                                              (np.float64, (1e-312, 1e-306)), (np.float32, (1e-45, 1e-40))])
def test_extreme_magnitudes_and_the_two_factor_shift(mode, group, dtype, magnitudes):
    """1e-30 beside 1e30; and tensors so tiny that the shift passes float64's exponent range (f1 * f2)."""
    grads = sparse_gradients(np.random.default_rng(4), 5, 30_003, 0.05, dtype=dtype, magnitudes=magnitudes)
    ra, rb = run_both(grads, mode=mode, group=group)
    exact(ra, grads)
    if magnitudes[1] < 1e-280:
        assert ra[0].shift > 1000  # the two-factor path of values.factors ran
    assert rb[0].fixed.any()


@EACH_MODE
def test_union_is_the_support_before_quantization(mode, group):
    grads = [np.zeros(1000, dtype=np.float32) for _ in range(2)]
    grads[0][10] = 1.0
    grads[1][500] = 1e-20  # quantizes to 0, still in the union
    grads[1][900] = -0.0  # not in the union
    ra, rb = run_both(grads, mode=mode, group=group)
    assert torch.nonzero(rb[0].fixed).view(-1).tolist() == [10]
    if ra[0].encoding in ("aligned", "sketch"):
        assert rb[0].union == 2


@EACH_MODE
@pytest.mark.parametrize("workers", [2, 7, 32])
def test_int32_at_the_overflow_bound(mode, group, workers):
    bound = (2**31 - 1) // workers
    grads = [np.zeros(4099, dtype=np.int32) for _ in range(workers)]
    for g in grads:
        g[::3] = bound
        g[1::3] = -bound
    ra, rb = run_both(grads, mode=mode, group=group)
    assert int(rb[0].fixed[0]) == workers * bound
    grads[-1][5] = -bound - 1
    with pytest.raises(ValueError, match="could overflow") as numba_err:
        codec.simulate_allreduce(grads, mode=mode, group=group)
    with pytest.raises(ValueError, match="could overflow") as torch_err:
        simulate_torch(grads, mode=mode, group=group)
    assert str(torch_err.value) == str(numba_err.value)


@EACH_MODE
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32])
def test_all_zero_input(mode, group, dtype):
    grads = [np.zeros(5000, dtype=dtype) for _ in range(3)]
    ra, rb = run_both(grads, mode=mode, group=group)
    assert not rb[0].fixed.any()


@EACH_MODE
def test_float16_with_subnormals(mode, group):
    grads = sparse_gradients(np.random.default_rng(16), 6, 12_345, 0.05, dtype=np.float16, magnitudes=(1e-7, 6e4))
    grads[0][7] = np.float16(6.1e-5)
    ra, _ = run_both(grads, mode=mode, group=group)
    exact(ra, grads)


@EACH_MODE
@pytest.mark.parametrize("workers", [1, 32])
def test_one_and_thirty_two_workers(mode, group, workers):
    grads = sparse_gradients(np.random.default_rng(workers), workers, 9_999, 0.02)
    run_both(grads, mode=mode, group=group)


@EACH_MODE
@pytest.mark.parametrize("length", [1, 2, 31, 33, 255, 257, 1023, 1025, 10_007, 65_537])
def test_lengths_that_are_multiples_of_nothing(mode, group, length):
    grads = sparse_gradients(np.random.default_rng(length), 3, length, 0.3)
    grads[0][-1] = 2.5
    run_both(grads, mode=mode, group=group)


@EACH_MODE
def test_shapes_are_kept(mode, group):
    grads = [g.reshape(100, 70) for g in sparse_gradients(np.random.default_rng(7), 2, 7000, 0.1)]
    _, rb = run_both(grads, mode=mode, group=group)
    assert tuple(rb[0].fixed.shape) == (100, 70) and tuple(rb[0].sum.shape) == (100, 70)


@pytest.mark.parametrize("group", GROUP_SIZES[1:])
@pytest.mark.parametrize("length,density", [(10_007, 0.003), (3 * 1024 + 5, 0.05)])
def test_two_level_index_at_every_group_size(group, length, density):
    grads = sparse_gradients(np.random.default_rng(group), 4, length, density)
    grads[1][-1] = -3.0
    for mode in ("aligned", "sketch"):
        run_both(grads, mode=mode, group=group)


@pytest.mark.parametrize("group", [2, 32, 1024])
def test_two_level_index_with_an_empty_union(group):
    grads = [np.zeros(3001, dtype=np.float32) for _ in range(2)]
    for mode in ("aligned", "sketch"):
        ra, _ = run_both(grads, mode=mode, group=group)
        assert ra[0].rounds == 2


def test_sketch_cells_wrap_and_the_residual_round():
    rng = np.random.default_rng(8)
    grads = [np.zeros(LANES * 64, dtype=np.int32) for _ in range(2)]
    for g in grads:
        g[::LANES] = rng.integers(2**29, 2**30 - 1, size=64)
    ra, rb = run_both(grads, mode="sketch", group=1, cells_per_element=0.5)
    assert rb[0].residual > 0 and rb[0].residual == ra[0].residual


@pytest.mark.parametrize("lanes", [LANES, 64, 7])
def test_sketch_peels_alike_with_odd_lanes(lanes):
    grads = sparse_gradients(np.random.default_rng(lanes), 8, 40_009, 0.02)
    ra, _ = run_both(grads, mode="sketch", group=0, lanes=lanes, cells_per_element=0.9)
    exact(ra, grads)


# -- mixed jobs, buffers, refusals ----------------------------------------------------------------


@pytest.mark.parametrize("mode,group", MODE_GROUPS, ids=[f"{m}-{g}" for m, g in MODE_GROUPS])
@pytest.mark.parametrize("device", DEVICES)
def test_mixed_job_is_exact(mode, group, device):
    """Workers 0, 2, 4 on torch, 1, 3 on numba, one switch: every worker decodes the exact sum."""
    grads = sparse_gradients(np.random.default_rng(41), 5, 65_537, 0.01, support="overlapping")
    ra, rb = run_both(grads, device, torch_workers=[0, 2, 4], mode=mode, group=group)
    exact(ra, grads)
    assert [isinstance(r.fixed, torch.Tensor) for r in rb] == [True, False, True, False, True]


def test_out_buffer_is_filled_in_place():
    grads = sparse_gradients(np.random.default_rng(9), 3, 10_000, 0.05)
    for mode in ("dense", "aligned", "blocks", "sketch"):
        p = codec.CodecParams(length=10_000, workers=3, mode=mode)
        outs = [torch.full((10_000,), 7, dtype=torch.int32) for _ in grads]
        sessions = [codec.WorkerSession(p, t, out=o) for t, o in zip(tensors(grads), outs)]
        results, _, _ = drive(sessions)
        expected = codec.simulate_allreduce(grads, mode=mode).fixed
        for r, o in zip(results, outs):
            assert r.fixed.data_ptr() == o.data_ptr() and np.array_equal(o.numpy(), expected)
    with pytest.raises(ValueError, match="out must be an int32 tensor of 10000 elements"):
        codec.WorkerSession(p, tensors(grads)[0], out=np.zeros(10_000, dtype=np.int32))


@pytest.mark.parametrize("mode,group", [("dense", 0), ("blocks", 0), ("aligned", 1), ("aligned", 16), ("sketch", 4)])
def test_only_the_words_leave_the_device(mode, group, monkeypatch):
    """Every tensor the torch backend copies to host memory is a segment's words (or the 11 group counts):
    never the gradient, the bitmap it keeps, nor the sum."""
    copied = []

    def recording(method):
        original = getattr(torch.Tensor, method)

        def record(self, *args, **kwargs):
            copied.append(self.numel())
            return original(self, *args, **kwargs)
        return record

    for method in ("cpu", "numpy", "tolist"):  # the ways a tensor reaches host memory in bulk
        monkeypatch.setattr(torch.Tensor, method, recording(method))
    d = 200_003
    grads = sparse_gradients(np.random.default_rng(17), 4, d, 0.005)
    p = codec.CodecParams(length=d, workers=4, mode=mode, group=group)
    sessions = [codec.WorkerSession(p, t) for t in tensors(grads)]
    words = []
    while not sessions[0].done:
        phases = [s.next_phase() for s in sessions]
        words += [seg.words.size for seg in phases[0].segments]
        aggregate = codec.aggregate_round(phases)
        for s in sessions:
            s.receive(aggregate.copy())
    assert copied and set(copied) <= set(words) | {len(bitmap.GROUP_SIZES)}, (sorted(set(copied)), words)
    if mode != "dense":  # (dense's one segment is d words)
        assert d not in copied
    assert sessions[0].result().fixed.numel() == d


def test_refusals_read_as_numba_s():
    """Wrong dtype, wrong length, NaN and Inf: the same message from a tensor as from its numpy twin;
    bfloat16 (numpy has none) is refused as an unsupported dtype, and is exact once widened to float32."""
    p = codec.CodecParams(length=100, workers=2)
    g = np.zeros(100, dtype=np.float32)
    cases = [g.astype(np.float64), np.zeros(99, dtype=np.float32)]
    for bad_value in (np.nan, np.inf):
        bad = g.copy()
        bad[37] = bad_value
        cases.append(bad)
    for case in cases:
        with pytest.raises(ValueError) as a:
            codec.WorkerSession(p, case, who="w").next_phase()
            raise AssertionError("numba accepted it")
        with pytest.raises(ValueError) as b:
            codec.WorkerSession(p, torch.from_numpy(case), who="w").next_phase()
            raise AssertionError("torch accepted it")
        assert str(a.value) == str(b.value)
    with pytest.raises(ValueError, match="unsupported dtype bfloat16: hina accepts float16, float32, float64, int32"):
        codec.WorkerSession(p, torch.zeros(100, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="unsupported dtype int64"):
        codec.WorkerSession(p, torch.zeros(100, dtype=torch.int64))
    values = torch.from_numpy(sparse_gradients(np.random.default_rng(5), 1, 100, 0.5)[0]).to(torch.bfloat16)
    widened = values.to(torch.float32)  # exact: every bfloat16 is a float32
    run_both([widened.numpy(), widened.numpy()[::-1].copy()])


def test_import_codec_does_not_import_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import numpy as np, codec\n"
            "r = codec.simulate_allreduce([np.ones(64, np.float32)] * 2, mode='sketch')\n"
            "assert r.fixed[0] == 2 * 2**28, r.fixed[0]\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# -- the kernels one by one --------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5000), st.sampled_from(GROUP_SIZES[1:]), st.sampled_from([0.0, 0.01, 0.1, 0.5, 1.0]),
       st.integers(0, 2**32 - 1))
def test_bitmap_kernels_match_numba(length, group, density, seed):
    rng = np.random.default_rng(seed)
    mask, own = random_bitmap(rng, length, density)
    t_own = torch.from_numpy(own.view(np.int32).copy())
    assert np.array_equal(tk.words_of(torch.from_numpy(mask)).numpy().view(np.uint32), own)
    assert tk.bits_of(t_own, length).numpy().tolist() == mask.tolist()
    assert tk.TORCH.count(t_own) == bitmap.count(own)
    assert tk.TORCH.group_counts(t_own).tolist() == bitmap.group_counts(own).tolist()
    coarse = bitmap.coarse(own, length, group)
    t_coarse = tk.TORCH.coarse(t_own, length, group)
    assert np.array_equal(t_coarse.numpy().view(np.uint32), coarse)
    ngroups = -(-length // group)
    union_groups = bitmap.from_positions(np.flatnonzero(tk.bits_of(t_coarse, ngroups).numpy()
                                                        | (rng.random(ngroups) < 0.2)), ngroups)
    chosen = bitmap.count(union_groups)
    t_union_groups = torch.from_numpy(union_groups.view(np.int32).copy())
    fine = bitmap.fine(own, union_groups, length, group, chosen)
    t_fine = tk.TORCH.fine(t_own, t_union_groups, length, group, chosen)
    assert np.array_equal(t_fine.numpy().view(np.uint32), fine)
    expanded, size = bitmap.expand(union_groups, fine, length, group)
    t_expanded, t_size = tk.TORCH.expand(t_union_groups, t_fine, length, group)
    assert np.array_equal(t_expanded.numpy().view(np.uint32), expanded) and t_size == size


def test_bitmap_kernels_refuse_bits_past_the_tensor_alike():
    length, group = 100, 8
    own = bitmap.from_positions(np.array([99]), length)
    t_own = torch.from_numpy(own.view(np.int32).copy())
    union_groups = bitmap.coarse(own, length, group)
    bad_groups = torch.from_numpy((union_groups | np.uint32(1 << 13)).view(np.int32))
    with pytest.raises(ValueError, match="groups beyond length"):
        tk.TORCH.fine(t_own, bad_groups, length, group, 2)
    fine = tk.TORCH.fine(t_own, torch.from_numpy(union_groups.view(np.int32).copy()), length, group, 1)
    assert fine.tolist() == [1 << 3]
    with pytest.raises(ValueError, match="beyond length 100"):
        tk.TORCH.expand(torch.from_numpy(union_groups.view(np.int32).copy()), fine | (1 << 5), length, group)
    assert not tk.TORCH.trailing_bits_clear(torch.tensor([0, 1 << 4], dtype=torch.int32), 36)
    assert tk.TORCH.trailing_bits_clear(torch.tensor([0, 0xF], dtype=torch.int32), 36)
    assert not tk.TORCH.trailing_bits_clear(torch.tensor([0, -(2**31)], dtype=torch.int32), 40)


@given(st.integers(0, 2**32 - 1), st.integers(0, 60))
def test_quantizer_matches_numba_for_every_dtype(seed, coarser):
    """Ties, subnormals, both signs, shifts past float64's exponent range: the same int32 as values.quantize_all."""
    from hina.codec import values

    rng = np.random.default_rng(seed)
    for dtype, lo in ((np.float16, -24), (np.float32, -149), (np.float64, -1074)):
        exps = rng.integers(lo, 1, size=2000)
        g = (np.ldexp(rng.uniform(0.5, 1.0, size=2000), exps) * rng.choice([-1.0, 1.0], size=2000)).astype(dtype)
        shift = codec.shift_for(codec.exponent(g), 1) - coarser
        ties = (2 * rng.integers(0, 2**8, size=300) + 1) * 2.0 ** (-shift - 1)
        g[:300] = np.where(ties <= np.abs(g).max(), ties, 0).astype(dtype)  # exact ties where dtype holds them
        wide = g.astype(np.float32) if dtype == np.float16 else g
        expected = values.quantize_all(wide, shift, np.empty(g.size, dtype=np.int32))
        assert np.array_equal(tk.quantize(torch.from_numpy(g), shift).numpy(), expected), dtype
        fixed = expected.copy()
        assert np.array_equal(tk.dequantize(torch.from_numpy(fixed), shift).numpy(), codec.dequantize(fixed, shift))
    tiny = np.array([2.0**-1074, 3 * 2.0**-1074, -(2.0**-1070)])
    shift = codec.shift_for(codec.exponent(tiny), 4)
    assert shift > 1022
    q = values.quantize_all(tiny, shift, np.empty(3, dtype=np.int32))
    assert np.array_equal(tk.quantize(torch.from_numpy(tiny), shift).numpy(), q)
    assert np.array_equal(tk.dequantize(torch.from_numpy(q), shift).numpy(), codec.dequantize(q, shift))


def test_float16_rounding_is_numpy_s():
    """float64 -> float16 rounded once (numpy), not through float32 (torch's cast rounds twice)."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal(200_000) * rng.choice([1e-7, 1e-5, 1.0, 300.0, 6e4, 7e4], size=200_000)
    ties = np.float16(rng.standard_normal(1000)).astype(np.float64)
    ulp = np.spacing(np.float16(ties)).astype(np.float64)
    x = np.concatenate([x, ties + ulp / 2 + ulp * 2.0**-20, ties + ulp / 2, -ties - ulp / 2 - ulp * 2.0**-20])
    ours = tk.to_float16(torch.from_numpy(x)).numpy().view(np.uint16)
    with np.errstate(over="ignore"):  # 7e4 and beyond: inf, in both
        assert np.array_equal(ours, x.astype(np.float16).view(np.uint16))
    assert not np.array_equal(torch.from_numpy(x).to(torch.float16).numpy().view(np.uint16), ours)  # the trap


# -- on the GPU ------------------------------------------------------------------------------------------


@needs_cuda
@EACH_MODE
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
def test_cuda_words_equal_numba(mode, group, dtype):
    grads = sparse_gradients(np.random.default_rng(51), 8, 1 << 20, 0.01, dtype=dtype)
    ra, rb = run_both(grads, "cuda", mode=mode, group=group)
    assert rb[0].fixed.is_cuda
    exact(ra, grads)


@needs_cuda
def test_cuda_float16_rounding_is_numpy_s():
    x = np.random.default_rng(13).standard_normal(100_000) * 300
    assert np.array_equal(tk.to_float16(torch.from_numpy(x).cuda()).cpu().numpy().view(np.uint16),
                          x.astype(np.float16).view(np.uint16))
