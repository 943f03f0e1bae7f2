"""Lossy gradient compression as PyTorch DDP communication hooks over gloo, with error feedback; and gloo timed.

Three hooks with the reports of `hina.host.ddp.SwitchAllreduce` (`pop_step()`:
bytes each rank sent, the buckets' submitted/started/done times), so a
training benchmark compares them with hina's hook step by step:

    TopkAllreduce   Ok-Topk's top-k (`oktopk.allreduce` with k = density x bucket
                    elements: local top-k, balanced regions reduced at their
                    owners, a global threshold keeping at most k, sparse allgather)
    Int8Allreduce   8-bit quantization with one shared scale per bucket (THC-style:
                    the scale is the all-reduced max |x| / 127, so the workers'
                    integers add up homomorphically): int8 chunks to their owners
                    (a reduce-scatter), the exact int16 sums back to every rank
                    (an allgather), decoded as sum x scale / N
    GlooAllreduce   DDP's own allreduce (float32 ring), timed the same way: the
                    exact float baseline

Error feedback (the two lossy hooks), as Ok-Topk and THC train: each rank
keeps a residual e per parameter; a step sends from a = g + e (its local
gradient plus what earlier steps did not deliver), and keeps
e = a - (what of a the sum received): for top-k, a except at the indices
this rank selected that the global threshold kept (those went in whole);
for int8, a - q x scale (the rounding error).  Residuals live per parameter,
so they survive DDP's bucket rebuild after the first step.

    hook = TopkAllreduce(rank, world, density=0.01)      # torch.distributed (gloo) set up first
    ddp.register_comm_hook(hook, lossy_allreduce_hook)
    loss.backward(); report = hook.pop_step()            # bytes, span, buckets [...]
    hook.close()

Bytes are what each rank hands gloo as payload (`comm.Comm`'s counting: size
headers and metadata all-reduces included, TCP/IP headers not): top-k's
index and value pairs and thresholds; int8's bytes, int16 sums and the
scale's all-reduce; gloo's float32 ring (2 (N - 1) / N of the bucket).  Only
float32 buckets (CPU) are taken.  This module imports torch; `import
hina.baselines` does not.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from . import oktopk
from .comm import Comm, ring_allreduce_bytes

__all__ = ["GlooAllreduce", "Int8Allreduce", "Residuals", "TopkAllreduce", "lossy_allreduce_hook", "step_report"]

INT8_MAX = 127
_TAG_INT8 = 700  # p2p tags of the int8 hook's reduce-scatter and allgather (Ok-Topk's are 300-311)


class Residuals:
    """Error feedback's memory: per parameter, what this rank has not delivered yet (float32, starts at zero).

    `of(params, n)` is the flat residual of a bucket holding `params` back to back (n elements: DDP's
    layout), the same tensor step after step while the bucket keeps its parameters; when DDP rebuilds its
    buckets, a new flat residual takes over each parameter's part from the old one.
    """

    def __init__(self) -> None:
        self._flat: dict[tuple[int, ...], torch.Tensor] = {}
        self._where: dict[int, tuple[tuple[int, ...], int, int]] = {}  # param id -> (bucket key, offset, numel)

    def of(self, params: list[torch.Tensor], n: int) -> torch.Tensor:
        key = tuple(id(p) for p in params)
        flat = self._flat.get(key)
        if flat is not None:
            return flat
        if sum(p.numel() for p in params) != n:
            raise ValueError(f"a bucket of {n} elements holding parameters of {sum(p.numel() for p in params)}")
        flat = torch.zeros(n, dtype=torch.float32)
        at = 0
        for p in params:
            old = self._where.get(id(p))
            if old is not None:  # carried over from the bucket that held it before the rebuild
                okey, ooff, numel = old
                flat[at : at + numel] = self._flat[okey][ooff : ooff + numel]
            at += p.numel()
        at = 0
        for p in params:
            self._where[id(p)] = (key, at, p.numel())
            at += p.numel()
        self._flat[key] = flat
        live = {k for k, _, _ in self._where.values()}
        for k in [k for k in self._flat if k not in live]:
            del self._flat[k]
        return flat

    def norm(self) -> float:
        """L2 norm of every residual: what the lossy hook owes the model."""
        return float(np.sqrt(sum(float(torch.sum(f.double() ** 2)) for f in self._flat.values())))


class _Hook:
    """What every hook here shares: the buckets' reports, collected into one report per step."""

    def __init__(self, rank: int, world: int):
        if not 1 <= world:
            raise ValueError(f"world must be at least 1, got {world}")
        self.rank, self.world = rank, world
        self._lock = threading.Lock()
        self._buckets: list[dict[str, Any]] = []
        self._failed: str | None = None

    def _record(self, report: dict[str, Any]) -> None:
        with self._lock:
            self._buckets.append(report)

    def pop_step(self) -> dict[str, Any]:
        """Every bucket reported since the last call (after `backward()`, a whole step): `step_report`'s keys."""
        with self._lock:
            buckets, self._buckets = self._buckets, []
        return step_report(buckets)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def step_report(buckets: list[dict[str, Any]]) -> dict[str, Any]:
    """bytes (this rank's payload), span (first bucket submitted to last done), errors, buckets (by index)."""
    ok = [b for b in buckets if "error" not in b]
    span = max(b["done"] for b in ok) - min(b["submitted"] for b in ok) if ok else 0.0
    return {"bytes": int(sum(b["bytes"] for b in ok)), "span": span,
            "errors": [b["error"] for b in buckets if "error" in b],
            "buckets": sorted(buckets, key=lambda b: b["index"])}


class _Threaded(_Hook):
    """One communication thread: buckets in DDP's launch order (the same on every rank), one at a time,
    while backward computes the next ones; the bucket's average is written into it in place."""

    def __init__(self, rank: int, world: int):
        super().__init__(rank, world)
        self.residuals = Residuals()
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"lossy-hook-{rank}", daemon=True)
        self._thread.start()

    def submit(self, bucket) -> torch.futures.Future:
        fut: torch.futures.Future = torch.futures.Future()
        tensor = bucket.buffer()
        if tensor.dtype != torch.float32 or tensor.is_cuda:
            raise TypeError(f"{type(self).__name__} takes CPU float32 buckets, got {tensor.dtype} on {tensor.device}")
        self._queue.put({"index": bucket.index(), "tensor": tensor, "params": list(bucket.parameters()),
                         "future": fut, "submitted": time.perf_counter()})
        return fut.then(_value)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            started = time.perf_counter()
            try:
                if self._failed is not None:
                    raise RuntimeError(f"not sent, an earlier bucket failed ({self._failed})")
                report = self._reduce(item["tensor"], item["params"])
            except BaseException as exc:  # the training script sees it through the Future
                err = RuntimeError(f"rank {self.rank}: {type(self).__name__} bucket {item['index']}: "
                                   f"{type(exc).__name__}: {exc}")
                self._failed = self._failed or str(err)
                self._record({"index": item["index"], "error": str(err)})
                item["future"].set_exception(err)
            else:
                self._record({"index": item["index"], "elements": item["tensor"].numel(), **report,
                              "submitted": item["submitted"], "started": started, "done": time.perf_counter()})
                item["future"].set_result(item["tensor"])

    def _reduce(self, tensor: torch.Tensor, params: list[torch.Tensor]) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)


class TopkAllreduce(_Threaded):
    """Ok-Topk's top-k allreduce (`oktopk.allreduce`) of g + residual, k = density x elements per bucket."""

    def __init__(self, rank: int, world: int, density: float = 0.01):
        if not 0 < density <= 1:
            raise ValueError(f"density must be within (0, 1], got {density}")
        self.density = density
        self.comm = Comm(rank, world)
        super().__init__(rank, world)

    def _reduce(self, tensor: torch.Tensor, params: list[torch.Tensor]) -> dict[str, Any]:
        flat = tensor.view(-1).numpy()
        residual = self.residuals.of(params, flat.size).numpy()
        acc = flat + residual
        k = max(1, round(self.density * flat.size))
        self.comm.reset()
        total = oktopk.allreduce(self.comm, acc, k)
        mine = oktopk.select(acc, k)
        delivered = mine[total[mine] != 0]  # what this rank selected and the global threshold kept went in whole
        residual[:] = acc
        residual[delivered] = 0.0
        np.divide(total, np.float32(self.world), out=flat)
        return {"bytes": int(sum(self.comm.sent.values())), "by_kind": dict(self.comm.sent), "k": k,
                "selected": int(mine.size),
                "delivered": int(delivered.size), "kept": int(np.count_nonzero(total))}


class Int8Allreduce(_Threaded):
    """8-bit quantization of g + residual with the bucket's shared scale; exact integer sums of the int8s."""

    def _reduce(self, tensor: torch.Tensor, params: list[torch.Tensor]) -> dict[str, Any]:
        flat = tensor.view(-1).numpy()
        n, world, rank = flat.size, self.world, self.rank
        residual = self.residuals.of(params, n).numpy()
        acc = flat + residual
        peak = torch.tensor([float(np.max(np.abs(acc))) if n else 0.0], dtype=torch.float32)
        sent = 0
        if world > 1:
            dist.all_reduce(peak, op=dist.ReduceOp.MAX)
            sent += ring_allreduce_bytes(4, world)
        scale = float(peak[0]) / INT8_MAX
        if scale == 0.0:  # every rank's bucket is zero
            residual[:] = acc
            flat[:] = 0.0
            return {"bytes": sent, "scale": 0.0}
        q = np.clip(np.rint(acc / np.float32(scale)), -INT8_MAX, INT8_MAX).astype(np.int8)
        residual[:] = acc - q.astype(np.float32) * np.float32(scale)
        bounds = [(r * n) // world for r in range(world + 1)]
        lo, hi = bounds[rank], bounds[rank + 1]
        total = q[lo:hi].astype(np.int16)
        if world > 1:
            peers = [(rank + s) % world for s in range(1, world)]  # rotated: no rank is everyone's first target
            # reduce-scatter: peer p owns chunk p; it receives every rank's int8 chunk and adds them exactly
            got = {p: torch.empty(hi - lo, dtype=torch.uint8) for p in peers}
            reqs = [dist.irecv(got[p], src=p, tag=_TAG_INT8) for p in peers]
            for p in peers:
                chunk = q[bounds[p] : bounds[p + 1]]
                reqs.append(dist.isend(torch.from_numpy(chunk.view(np.uint8)), dst=p, tag=_TAG_INT8))
                sent += chunk.nbytes
            for r in reqs:
                r.wait()
            for p in peers:
                total += got[p].numpy().view(np.int8)
            # allgather: every owner's int16 sums (|sum| <= 127 N, exact for N <= 258) to every rank
            mine = torch.from_numpy(total.view(np.uint8))
            sums = {p: torch.empty(2 * (bounds[p + 1] - bounds[p]), dtype=torch.uint8) for p in peers}
            reqs = [dist.irecv(sums[p], src=p, tag=_TAG_INT8 + 1) for p in peers]
            reqs += [dist.isend(mine, dst=p, tag=_TAG_INT8 + 1) for p in peers]
            sent += (world - 1) * total.nbytes
            for r in reqs:
                r.wait()
        factor = scale / world  # every rank: the same integers, the same float64 product, rounded once
        flat[lo:hi] = total * factor
        if world > 1:
            for p in peers:
                flat[bounds[p] : bounds[p + 1]] = sums[p].numpy().view(np.int16) * factor
        return {"bytes": sent, "scale": scale}


class GlooAllreduce(_Hook):
    """DDP's default hook (divide by N, gloo's float32 all_reduce), with the buckets' times and ring bytes."""

    def submit(self, bucket) -> torch.futures.Future:
        submitted = time.perf_counter()
        tensor = bucket.buffer()
        index, n = bucket.index(), tensor.numel()
        tensor.div_(self.world)
        if self.world == 1:
            fut: torch.futures.Future = torch.futures.Future()
            fut.set_result([tensor])
        else:
            fut = dist.all_reduce(tensor, async_op=True).get_future()
        nbytes = ring_allreduce_bytes(tensor.numel() * tensor.element_size(), self.world)

        def done(f):
            now = time.perf_counter()
            self._record({"index": index, "elements": n, "bytes": nbytes, "submitted": submitted,
                          "started": submitted, "done": now})
            return f.value()[0]

        return fut.then(done)


def _value(fut: torch.futures.Future):
    return fut.value()  # raises the bucket's error, if it has one


def lossy_allreduce_hook(state, bucket):  # no annotations: DDP checks them against its own, unpostponed
    """The DDP communication hook for every hook object here: `ddp.register_comm_hook(state, lossy_allreduce_hook)`."""
    return state.submit(bucket)
