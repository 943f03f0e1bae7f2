"""Ok-Topk (Li and Hoefler, PPoPP'22): sparse allreduce over balanced regions, reduced at their owners.

Its communication scheme, over gloo point-to-point sends:

1. selection: every non-zero (lossless), or the local top-k by magnitude
   (`k`, lossy; Ok-Topk selects by an estimated threshold, here exactly);
2. region boundaries balanced by the selected entries: each rank takes the
   indices at the 1/N, 2/N, ... quantiles of its own selection, and the
   boundaries are their average over ranks (one all-reduce of N - 1
   integers).  Ok-Topk re-estimates them every 64 iterations; here every
   call, and the all-reduce is counted;
3. split and reduce: rank p sends region q's entries to q, destinations
   rotated ((p + s) mod N at step s) so no rank is everyone's first target;
   q adds what it receives;
4. lossy only: each owner keeps the reduced entries at or above a global
   threshold that selects at most k in all (Ok-Topk estimates it from the
   reduced values; here from an all-reduced histogram of their log
   magnitudes, 512 bins of 1/16 octave, counted);
5. allgatherv: every owner sends its reduced region (index and value
   pairs, always sparse, as Ok-Topk does) to every rank.
"""

from __future__ import annotations

import numpy as np

from .comm import Comm, Piece

HIST_BINS = 512
HIST_OCTAVES = 32  # the histogram spans the 32 octaves below the largest reduced magnitude: 1/16 octave per bin


def region_bounds(comm: Comm, index: np.ndarray, n: int) -> np.ndarray:
    """N + 1 boundaries balancing the selected entries: the ranks' quantile indices, averaged."""
    world = comm.world
    if index.size:
        mine = index[(np.arange(1, world) * index.size) // world].astype(np.int64)
    else:
        mine = (np.arange(1, world) * n) // world
    inner = comm.allreduce_meta(mine, "sum") // world
    inner = np.clip(np.maximum.accumulate(inner), 0, n)
    return np.concatenate([[0], inner, [n]]).astype(np.int64)


def global_threshold(comm: Comm, magnitudes: np.ndarray, k: int) -> float:
    """The smallest histogram edge with at most k reduced values at or above it, over all owners.

    Two small all-reduces: the largest log2 magnitude, then a 512-bin int32
    histogram over the 32 octaves below it (values smaller still are never kept).
    """
    logs = np.log2(magnitudes[magnitudes > 0].astype(np.float64))
    top = comm.allreduce_meta(np.array([logs.max() if logs.size else -1e9]), "max")[0]
    hist, edges = np.histogram(logs, bins=HIST_BINS, range=(top + 1e-9 - HIST_OCTAVES, top + 1e-9))
    total = comm.allreduce_meta(hist.astype(np.int32), "sum")
    above = np.cumsum(total[::-1])[::-1]  # above[b]: values in bins b and up
    fits = np.flatnonzero(above <= k)
    b = int(fits[0]) if fits.size else HIST_BINS  # not even the top bin fits: keep nothing
    return float(2.0 ** edges[b]) if b < HIST_BINS else np.inf


def select(grad: np.ndarray, k: int | None = None) -> np.ndarray:
    """The indices a rank sends (sorted): every non-zero (k None), or the k largest in magnitude among them."""
    nz = np.flatnonzero(grad)
    if k is not None and nz.size > k:
        keep = np.argpartition(np.abs(grad[nz]), nz.size - k)[nz.size - k :]
        nz = np.sort(nz[keep])
    return nz


def allreduce(comm: Comm, grad: np.ndarray, k: int | None = None) -> np.ndarray:
    """Lossless on every non-zero (k None), or Ok-Topk's top-k at k entries (lossy)."""
    n, rank, world = grad.size, comm.rank, comm.world
    index = select(grad, k)
    values = grad[index]
    comm.notes["selected"] = int(index.size)
    if world == 1:
        out = np.zeros(n, dtype=np.float32)
        out[index] = values
        return out
    bounds = region_bounds(comm, index, n)
    at = np.searchsorted(index, bounds)
    dests = [(rank + s) % world for s in range(1, world)]
    srcs = [(rank - s) % world for s in range(1, world)]
    outgoing = {d: Piece(index[at[d] : at[d + 1]], values[at[d] : at[d + 1]]) for d in dests}
    got = comm.exchange(outgoing, srcs, tag=300)
    lo, hi = int(bounds[rank]), int(bounds[rank + 1])
    acc = np.zeros(hi - lo, dtype=np.float32)
    acc[index[at[rank] : at[rank + 1]] - lo] = values[at[rank] : at[rank + 1]]
    for s in srcs:
        got[s].add_into(acc, lo)
    present = np.zeros(hi - lo, dtype=np.bool_)
    present[index[at[rank] : at[rank + 1]] - lo] = True
    for s in srcs:
        present[got[s].index - lo] = True
    mine_idx = np.flatnonzero(present)
    if k is not None:
        threshold = global_threshold(comm, np.abs(acc[mine_idx]), k)
        mine_idx = mine_idx[np.abs(acc[mine_idx]) >= threshold]
        comm.notes["threshold"] = threshold
    mine = Piece(mine_idx + lo, acc[mine_idx])
    parts = comm.exchange(dict.fromkeys(dests, mine), srcs, tag=310)
    result = np.zeros(n, dtype=np.float32)
    result[mine.index] = mine.values
    for p in parts.values():
        result[p.index] = p.values
    comm.notes["regions"] = [int(b) for b in bounds]
    return result
