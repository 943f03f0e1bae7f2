"""hina.baselines.lossy_hooks: top-k and int8 with error feedback, and gloo timed, as DDP hooks over real gloo groups.

Three ranks on loopback (subprocesses, torch.distributed with gloo) pass the
hooks three steps of sparse gradients, the last one zero, through a stand-in
for DDP's GradBucket.  Checked: every rank gets the same bits; error
feedback loses nothing (the sums delivered over the steps plus the ranks'
residuals equal the sum of every gradient, to float32 rounding); a step
with a zero gradient still delivers what earlier steps held back; the bytes
counted are the ones the hook's messages carry.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import torch_missing

from hina.wire.sockio import free_tcp_ports

pytestmark = pytest.mark.torch

TORCH_MISSING = torch_missing()
needs_torch = pytest.mark.skipif(TORCH_MISSING is not None, reason=f"lossy hooks: {TORCH_MISSING}")

N, STEPS, WORLD = 1000, 3, 3

RANK = r"""
import json, sys
import numpy as np, torch, torch.distributed as dist
from hina.baselines import lossy_hooks

rank, world, port, kind, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
n, steps = int(sys.argv[6]), int(sys.argv[7])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)


class Bucket:  # what the hooks read of DDP's GradBucket
    def __init__(self, tensor, params):
        self.tensor, self.params = tensor, params

    def buffer(self):
        return self.tensor

    def index(self):
        return 0

    def is_last(self):
        return True

    def parameters(self):
        return self.params


params = [torch.nn.Parameter(torch.zeros(n - 400)), torch.nn.Parameter(torch.zeros(400))]
hook = {"topk": lambda: lossy_hooks.TopkAllreduce(rank, world, density=0.02),
        "int8": lambda: lossy_hooks.Int8Allreduce(rank, world),
        "gloo": lambda: lossy_hooks.GlooAllreduce(rank, world)}[kind]()
rng = np.random.default_rng([7, rank])
grads, results, residuals, sent, reports = [], [], [], [], []
for step in range(steps):
    g = np.zeros(n, np.float32)
    if step < steps - 1:  # the last step's gradient is zero: only residuals go
        idx = rng.choice(n, 100, replace=False)
        g[idx] = (rng.standard_normal(100) * 10.0 ** rng.integers(-3, 1, 100)).astype(np.float32)
    grads.append(g)
    out_t = lossy_hooks.lossy_allreduce_hook(hook, Bucket(torch.from_numpy(g.copy()), params)).wait()
    results.append(out_t.numpy().copy())
    rep = hook.pop_step()
    sent.append(rep["bytes"])
    b = rep["buckets"][0]
    reports.append({k: v for k, v in b.items() if k not in ("submitted", "started", "done")})
    assert b["submitted"] <= b["started"] <= b["done"], b
    residuals.append(hook.residuals.of(params, n).numpy().copy() if kind != "gloo" else np.zeros(n, np.float32))
hook.close()
dist.destroy_process_group()
np.savez(out, grads=np.array(grads), results=np.array(results), residuals=np.array(residuals), sent=np.array(sent))
print(json.dumps(reports))
"""


def _run(kind: str, tmp_path, world: int = WORLD) -> tuple[list[dict], list[list[dict]]]:
    port, = free_tcp_ports()
    procs = [subprocess.Popen([sys.executable, "-c", RANK, str(r), str(world), str(port), kind,
                               str(tmp_path / f"{kind}{r}.npz"), str(N), str(STEPS)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(world)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return [dict(np.load(tmp_path / f"{kind}{r}.npz")) for r in range(world)], outs


def _check_common(ranks: list[dict]) -> None:
    for r in ranks[1:]:  # every rank holds the same bits
        assert r["results"].tobytes() == ranks[0]["results"].tobytes()
    # error feedback loses nothing: sum over steps of the delivered sums + every residual = every gradient
    delivered = ranks[0]["results"].astype(np.float64).sum(0) * len(ranks)
    owed = sum(r["residuals"][-1].astype(np.float64) for r in ranks)
    total = sum(r["grads"].astype(np.float64).sum(0) for r in ranks)
    scale = np.abs(np.array([r["grads"] for r in ranks])).sum((0, 1)).astype(np.float64) + 1e-30
    assert np.all(np.abs(delivered + owed - total) <= 1e-5 * scale + 1e-12)


@needs_torch
@pytest.mark.slow
def test_topk_keeps_what_it_did_not_send_and_sends_it_later(tmp_path):
    ranks, reports = _run("topk", tmp_path)
    _check_common(ranks)
    k = round(0.02 * N)
    for r, rep in zip(ranks, reports):
        assert [x["k"] for x in rep] == [k] * STEPS
        g0, e0, res0 = r["grads"][0], r["residuals"][0], ranks[0]["results"][0]
        # step 0: the residual is the gradient, but for the entries this rank sent and the sum kept (zeroed)
        sent0 = np.flatnonzero((e0 == 0) & (g0 != 0))
        assert 0 < sent0.size <= k and np.all(res0[sent0] != 0)
        assert np.array_equal(e0[e0 != 0], g0[e0 != 0])
        assert np.count_nonzero(e0) >= np.count_nonzero(g0) - k
        # bytes: what the messages carried, by kind; the index + value pairs: at most k to the owners, and
        # the kept entries of this rank's region (at most k) to every other rank
        for b, x in zip(r["sent"], rep):
            assert b == sum(x["by_kind"].values()) and x["by_kind"]["meta"] > 0
            assert 0 < x["by_kind"]["index"] == x["by_kind"]["values"] <= 4 * (k + k * (WORLD - 1))
    # the last step's gradient is zero everywhere, yet the sum is not: it carries the residuals
    assert np.count_nonzero(ranks[0]["results"][-1]) > 0
    assert all(np.count_nonzero(r["grads"][-1]) == 0 for r in ranks)
    # at most k entries kept per step in all
    assert all(np.count_nonzero(ranks[0]["results"][s]) <= k for s in range(STEPS))


@needs_torch
@pytest.mark.slow
def test_int8_rounds_with_one_shared_scale_and_feeds_the_error_back(tmp_path):
    ranks, reports = _run("int8", tmp_path)
    _check_common(ranks)
    bounds = [(r * N) // WORLD for r in range(WORLD + 1)]
    for rank, r in enumerate(ranks):
        mine = bounds[rank + 1] - bounds[rank]
        # int8 chunks to the other owners, int16 sums of this rank's chunk to every other rank, the scale's
        # all-reduce (a float32 ring: 2 (N - 1) / N x 4 bytes)
        want = (N - mine) + 2 * mine * (WORLD - 1) + round(2 * (WORLD - 1) * 4 / WORLD)
        assert list(r["sent"]) == [want] * STEPS
    for s in range(STEPS):
        scale = reports[0][s]["scale"]
        assert all(rep[s]["scale"] == scale for rep in reports)  # one scale, shared
        acc = sum((r["grads"][s] + (r["residuals"][s - 1] if s else 0)).astype(np.float64) for r in ranks)
        peak = max(np.abs(r["grads"][s] + (r["residuals"][s - 1] if s else 0)).max() for r in ranks)
        assert scale == pytest.approx(float(np.float32(peak)) / 127, rel=1e-6)
        # each rank's rounding error is at most half a step: the sum is within N/2 steps of the exact one
        err = np.abs(ranks[0]["results"][s].astype(np.float64) * WORLD - acc)
        assert err.max() <= WORLD * scale / 2 * (1 + 1e-5)
        # and each residual is that rounding error
        for r in ranks:
            assert np.abs(r["residuals"][s]).max() <= scale / 2 * (1 + 1e-5)
    assert np.count_nonzero(ranks[0]["results"][-1]) > 0  # the zero step delivers the held-back remainders


@needs_torch
@pytest.mark.slow
def test_gloo_hook_averages_exactly_as_ddp_does_and_counts_the_ring(tmp_path):
    ranks, _ = _run("gloo", tmp_path)
    for r in ranks[1:]:
        assert r["results"].tobytes() == ranks[0]["results"].tobytes()
    for s in range(STEPS):
        want = sum(r["grads"][s].astype(np.float64) / WORLD for r in ranks)
        assert np.allclose(ranks[0]["results"][s], want, rtol=1e-6, atol=1e-12)
    assert all(list(r["sent"]) == [round(2 * (WORLD - 1) * 4 * N / WORLD)] * STEPS for r in ranks)


@needs_torch
def test_residuals_survive_a_bucket_rebuild():
    import torch

    from hina.baselines.lossy_hooks import Residuals

    a, b, c = (torch.nn.Parameter(torch.zeros(n)) for n in (3, 4, 5))
    res = Residuals()
    first = res.of([a, b], 7)
    first[:] = torch.arange(1, 8, dtype=torch.float32)
    second = res.of([c], 5)
    second[:] = 10.0
    assert res.of([a, b], 7) is first  # the same bucket: the same memory, step after step
    rebuilt = res.of([c, b, a], 12)  # DDP regrouped them in another order: each parameter's part moves along
    assert rebuilt.tolist() == [10.0] * 5 + [4.0, 5.0, 6.0, 7.0] + [1.0, 2.0, 3.0]
    assert res.norm() == pytest.approx(float(torch.linalg.norm(rebuilt)))
    with pytest.raises(ValueError, match="bucket of 6 elements"):
        res.of([a, b], 6)
