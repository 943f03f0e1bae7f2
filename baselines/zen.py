"""Zen (Wang et al., OSDI'23): hash-partitioned push of non-zeros, reduce at the owner, pull back by hash bitmap.

Its synchronization scheme, every rank both worker and server, over gloo
point-to-point sends:

1. push: every index i belongs to server h(i) mod N for one hash function
   all ranks share (a 64-bit mix of i, seeded), so whatever the skew of
   the non-zeros (popular embedding rows, contiguous layers) every server
   gets about 1/N of them; each rank sends each server its (index, value)
   pairs for that server, destinations rotated.  Zen's "hierarchical
   hashing" is how a GPU builds these partitions without collisions; on the
   CPU each server's index list (from the cached hash) picks its entries;
2. each server adds what it received for its indices;
3. pull: each server sends its reduced entries to every rank, the indices
   as Zen's hash bitmap (one bit per index the server owns, known to every
   rank from the hash) or as 32-bit indices, whichever is smaller.

The owner map (each index's server and its slot there) is computed once
per (length, ranks, seed) and cached, as a deployed Zen keeps its hash
tables; each server sums into a table with one slot per index it owns.
"""

from __future__ import annotations

import functools

import numpy as np

from .comm import Comm, Piece

SEED = 0x9E3779B97F4A7C15


def owner_of(index: np.ndarray, world: int, seed: int = SEED) -> np.ndarray:
    """h(i) mod N: splitmix64's finalizer of i ^ seed, reduced to [0, world)."""
    z = index.astype(np.uint64) ^ np.uint64(seed)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(world)).astype(np.int32)


@functools.lru_cache(maxsize=4)
def owner_map(length: int, world: int, seed: int = SEED) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
    """Every index's server; each server's indices in order (its hash bitmap's positions); each index's slot there."""
    owner = owner_of(np.arange(length, dtype=np.int64), world, seed)
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=world)
    owned = tuple(np.split(order.astype(np.int64), np.cumsum(counts)[:-1]))
    slot = np.empty(length, dtype=np.int64)
    for o in owned:
        slot[o] = np.arange(o.size)
    return owner, owned, slot


def prepare(length: int, world: int, seed: int = SEED) -> None:
    """Build the owner map before the first step (the cache key is (length, world, seed), positionally)."""
    owner_map(length, world, seed)


def encode_pull(owned: np.ndarray, present: np.ndarray, values: np.ndarray) -> Piece:
    """A server's reduced entries: hash bitmap over its owned indices, or an index list, the smaller."""
    nnz = int(present.sum())
    if -(-present.size // 32) < nnz:  # bitmap words against index words
        return Piece(None, values, bitmap=np.packbits(present, bitorder="little"))
    return Piece(owned[present], values)


def decode_pull(piece: Piece, owned: np.ndarray) -> np.ndarray:
    if piece.bitmap is None:
        return piece.index
    bits = np.unpackbits(piece.bitmap, bitorder="little")[: owned.size].astype(np.bool_)
    return owned[bits]


def allreduce(comm: Comm, grad: np.ndarray, seed: int = SEED) -> np.ndarray:
    n, rank, world = grad.size, comm.rank, comm.world
    _, owned, slot = owner_map(n, world, seed)
    dests = [(rank + s) % world for s in range(1, world)]
    srcs = [(rank - s) % world for s in range(1, world)]
    pushes = {}
    for d in (*dests, rank):  # each server's non-zeros, in index order: a pass over its owned indices
        vals = grad[owned[d]]
        keep = vals != 0
        pushes[d] = Piece(owned[d][keep], vals[keep])
    got = comm.exchange({d: pushes[d] for d in dests}, srcs, tag=400)
    my_owned = owned[rank]
    acc = np.zeros(my_owned.size, dtype=np.float32)  # the server's table: one slot per index it owns
    present = np.zeros(my_owned.size, dtype=np.bool_)
    for piece in (pushes[rank], *(got[s] for s in srcs)):
        at = slot[piece.index]
        acc[at] += piece.values
        present[at] = True
    pull = encode_pull(my_owned, present, acc[present])
    parts = comm.exchange(dict.fromkeys(dests, pull), srcs, tag=410)
    result = np.zeros(n, dtype=np.float32)
    result[my_owned[present]] = pull.values
    for s, p in parts.items():
        result[decode_pull(p, owned[s])] = p.values
    comm.notes["pull_bitmaps"] = int(pull.bitmap is not None) + sum(p.bitmap is not None for p in parts.values())
    return result
