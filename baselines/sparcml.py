"""SparCML (Renggli et al., SC'19): sparse allreduce by recursive doubling or split-allgather, dense when it pays.

Two schemes, as the paper describes them, over gloo point-to-point sends:

- SSAR recursive doubling (`ssar_recursive_double`): at each of log2 N
  steps a rank swaps its whole current sparse vector with the rank whose
  number differs in one bit, and merges the two (index union, values
  added).  After the last step every rank holds the sum.  For N not a
  power of two the first 2r ranks (r = N - 2^floor(log2 N)) fold in pairs
  first and get the result back at the end (the usual MPI scheme).  The
  vector switches to a dense float32 array as soon as 8 bytes per non-zero
  (32-bit index, 32-bit value) exceed 4 bytes per element.
- DSAR split-allgather (`dsar_split_allgather`): the index space is cut
  into N equal partitions; each rank sends every other rank its non-zeros
  in that rank's partition (destinations rotated), the owner adds them,
  then every owner sends its reduced partition to all: sparse while that is
  smaller, dense once the partition's result is dense enough.

`allreduce` picks between them as the paper does, from an alpha-beta cost
of each at the largest per-rank non-zero count K (one tiny all-reduce):
recursive doubling pays log2 N latencies but sends up to min(2^s K, d)
entries at step s; split-allgather pays 2 (N - 1) latencies and sends
about K/N + the reduced partition's size per message.  Small or very sparse
data goes recursive doubling, large data split-allgather.
"""

from __future__ import annotations

import numpy as np

from .comm import Comm, Piece, densify, merge, sparse_is_smaller, sparse_of

ALPHA_S = 50e-6  # per-message latency of the cost model (gloo over TCP on one host is about this)


def _compact(piece: Piece, length: int) -> Piece:
    """The smaller representation of a whole-vector piece (DSAR's switch)."""
    if not piece.dense and not sparse_is_smaller(piece.index.size, length):
        return densify(piece, length)
    return piece


def ssar_recursive_double(comm: Comm, grad: np.ndarray, tag: int = 100) -> np.ndarray:
    n, rank, world = grad.size, comm.rank, comm.world
    cur = _compact(sparse_of(grad), n)
    p2 = 1 << (world.bit_length() - 1)
    rem = world - p2
    whole = lambda p: {p: (0, n)}  # noqa: E731  (every piece here spans the whole vector)
    if rank < 2 * rem:
        if rank % 2 == 0:  # folded: hand the vector to rank + 1, get the sum back at the end
            comm.exchange({rank + 1: cur}, [], tag)
            back = comm.exchange({}, [rank + 1], tag + 2, whole(rank + 1))[rank + 1]
            comm.notes["final_dense"] = back.dense
            return densify(back, n).values
        cur = _compact(merge(cur, comm.exchange({}, [rank - 1], tag, whole(rank - 1))[rank - 1], n), n)
        virtual = rank // 2
    else:
        virtual = rank - rem
    mask, step = 1, 0
    while mask < p2:
        v = virtual ^ mask
        peer = 2 * v + 1 if v < rem else v + rem
        got = comm.exchange({peer: cur}, [peer], tag + 4 + 2 * step, whole(peer))[peer]
        cur = _compact(merge(cur, got, n), n)
        mask, step = mask << 1, step + 1
    if rank < 2 * rem:
        comm.exchange({rank - 1: cur}, [], tag + 2)
    comm.notes["final_dense"] = cur.dense
    return densify(cur, n).values


def _piece(index: np.ndarray, values: np.ndarray, lo: int, hi: int, dense_values) -> Piece:
    """A partition's entries, sent dense when that is smaller (dense_values: the partition as an array)."""
    if sparse_is_smaller(index.size, hi - lo):
        return Piece(index, values)
    return Piece(None, dense_values(), lo)


def dsar_split_allgather(comm: Comm, grad: np.ndarray, tag: int = 200) -> np.ndarray:
    n, rank, world = grad.size, comm.rank, comm.world
    bounds = np.linspace(0, n, world + 1).astype(np.int64)
    spans = {p: (int(bounds[p]), int(bounds[p + 1] - bounds[p])) for p in range(world)}
    nz = np.flatnonzero(grad)
    at = np.searchsorted(nz, bounds)
    dests = [(rank + s) % world for s in range(1, world)]  # rotated: no rank is everyone's first target
    srcs = [(rank - s) % world for s in range(1, world)]
    outgoing = {}
    for d in dests:
        idx = nz[at[d] : at[d + 1]]
        lo, hi = int(bounds[d]), int(bounds[d + 1])
        outgoing[d] = _piece(idx, grad[idx], lo, hi, lambda lo=lo, hi=hi: grad[lo:hi])
    lo, hi = int(bounds[rank]), int(bounds[rank + 1])
    got = comm.exchange(outgoing, srcs, tag, dict.fromkeys(srcs, (lo, hi - lo)))  # all cover this rank's part
    acc = grad[lo:hi].copy()
    for s in srcs:  # a fixed order: the owner's sum is the one every rank receives
        got[s].add_into(acc, lo)
    mine = sparse_of(acc, lo)
    mine = mine if sparse_is_smaller(mine.index.size, hi - lo) else Piece(None, acc, lo)
    result = np.zeros(n, dtype=np.float32)
    result[lo:hi] = acc
    parts = comm.exchange(dict.fromkeys(dests, mine), srcs, tag + 2, spans)
    for p in parts.values():
        p.add_into(result)
    comm.notes["dense_partitions"] = int(mine.dense) + sum(p.dense for p in parts.values())
    return result


def predicted_seconds(k: int, n: int, world: int, link_gbps: float, alpha: float = ALPHA_S) -> dict[str, float]:
    """Alpha-beta cost of both schemes at K non-zeros per rank (worst case: disjoint supports)."""
    beta = 8 / (link_gbps * 1e9)  # seconds per byte
    p2 = 1 << (world.bit_length() - 1)
    steps = p2.bit_length() - 1
    rd = sum(alpha + beta * min(8 * min(k << s, n), 4 * n) for s in range(steps))
    if world != p2:  # fold in and hand back
        rd += 2 * (alpha + beta * min(8 * k, 4 * n)) + 2 * alpha
    part = n / world
    sa = (world - 1) * (2 * alpha + beta * (min(8 * k / world, 4 * part) + min(8 * min(world * k, n) / world,
                                                                                4 * part)))
    return {"recursive_double": rd, "split_allgather": sa}


def allreduce(comm: Comm, grad: np.ndarray, link_gbps: float = 10.0, alpha: float = ALPHA_S,
              algorithm: str | None = None) -> np.ndarray:
    """The sum on every rank; `algorithm` forces one scheme (tests), None picks by the cost model."""
    if algorithm not in (None, "recursive_double", "split_allgather"):
        raise ValueError(f"unknown SparCML algorithm {algorithm!r}: recursive_double or split_allgather")
    if comm.world == 1:
        return grad.copy()
    if algorithm is None:
        k = int(comm.allreduce_meta(np.array([np.count_nonzero(grad)], dtype=np.int64), "max")[0])
        cost = predicted_seconds(k, grad.size, comm.world, link_gbps, alpha)
        algorithm = min(cost, key=cost.get)
    choice = algorithm
    comm.notes["algorithm"] = choice
    if choice == "recursive_double":
        return ssar_recursive_double(comm, grad)
    return dsar_split_allgather(comm, grad)
