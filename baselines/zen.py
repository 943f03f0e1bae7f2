"""Zen (Wang et al., OSDI'23): hash-partitioned push of non-zeros, reduce at the owner, pull back by hash bitmap.

Its synchronization scheme, every rank both worker and server, over gloo
point-to-point sends:

1. push: every index i belongs to server h(i) mod N for one hash function
   all ranks share (a 64-bit mix of i, seeded), so whatever the skew of
   the non-zeros (popular embedding rows, contiguous layers) every server
   gets about 1/N of them; each rank sends each server its (index, value)
   pairs for that server, destinations rotated.  Zen's "hierarchical
   hashing" is how a GPU builds these partitions without collisions; on the
   CPU a stable sort by owner does the same job;
2. each server adds what it received for its indices;
3. pull: each server sends its reduced entries to every rank, the indices
   as Zen's hash bitmap (one bit per index the server owns, known to every
   rank from the hash) or as 32-bit indices, whichever is smaller.

The owner map (d bytes, one per element) is computed once per (length,
ranks, seed) and cached, as a deployed Zen keeps its hash tables.
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
def owner_map(length: int, world: int, seed: int = SEED) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Every index's server, and each server's indices in order (the positions of its hash bitmap)."""
    owner = owner_of(np.arange(length, dtype=np.int64), world, seed)
    order = np.argsort(owner, kind="stable")
    cuts = np.cumsum(np.bincount(owner, minlength=world))[:-1]
    return owner, tuple(np.split(order.astype(np.int64), cuts))


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
    owner, owned = owner_map(n, world, seed)
    nz = np.flatnonzero(grad)
    dest = owner[nz]
    order = np.argsort(dest, kind="stable")  # by server, indices still sorted within each
    by_server = np.split(nz[order], np.cumsum(np.bincount(dest, minlength=world))[:-1])
    dests = [(rank + s) % world for s in range(1, world)]
    srcs = [(rank - s) % world for s in range(1, world)]
    got = comm.exchange({d: Piece(by_server[d], grad[by_server[d]]) for d in dests}, srcs, tag=400)
    acc = np.zeros(n, dtype=np.float32)  # the server's table, indexed by element
    present = np.zeros(n, dtype=np.bool_)
    mine = by_server[rank]
    acc[mine] = grad[mine]
    present[mine] = True
    for s in srcs:
        got[s].add_into(acc)
        present[got[s].index] = True
    my_owned = owned[rank]
    here = present[my_owned]
    pull = encode_pull(my_owned, here, acc[my_owned[here]])
    parts = comm.exchange(dict.fromkeys(dests, pull), srcs, tag=410)
    result = np.zeros(n, dtype=np.float32)
    result[my_owned[here]] = pull.values
    for s, p in parts.items():
        result[decode_pull(p, owned[s])] = p.values
    comm.notes["pull_bitmaps"] = int(pull.bitmap is not None) + sum(p.bitmap is not None for p in parts.values())
    return result
