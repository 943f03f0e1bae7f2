"""What every baseline shares: a torch.distributed (gloo) group that counts the bytes it sends, and sparse pieces.

`Comm` wraps the process group: point-to-point exchanges of variable-size
int32 buffers (a 16-byte size header, then the body), all-reduces of small
metadata, and the dense all-reduce of the ring baseline.  Every send is
counted by what it carries (`index`, `values`, `dense`, `meta`), as payload
bytes: TCP/IP headers and acknowledgements are not included.

A sparse piece is a sorted, duplicate-free int64 index array and its float32
values; on the wire it is one int32 buffer, the indices (32 bits each) then
the values' bits, or the values alone when sent dense, or a bitmap over
positions both ends know (Zen's pull) then the values.  The size header says
which: (words, nnz) sparse, (words, -1) dense, (words, -2 - bitmap words).
"""

from __future__ import annotations

import dataclasses

import numpy as np

KINDS = ("index", "values", "dense", "meta")
SIZE_HEADER_BYTES = 16  # a size header: two int64 (see the module docstring)


def require_torch():
    """torch.distributed with gloo, or an ImportError that says how to get it."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        raise ImportError(f"the baselines need PyTorch (pip install -e '.[torch]'): {exc}") from exc
    if not dist.is_available() or not dist.is_gloo_available():
        raise ImportError("the baselines need torch.distributed with the gloo backend")
    return torch, dist


@dataclasses.dataclass
class Piece:
    """A slice of a gradient: sparse (index, values) or dense over [lo, lo + values.size)."""

    index: np.ndarray | None  # int64, sorted, unique; None: dense (or bitmap)
    values: np.ndarray  # float32
    lo: int = 0  # dense only: where values[0] lives
    bitmap: np.ndarray | None = None  # uint8, packed bits over positions only the two ends know (Zen's pull)

    @property
    def dense(self) -> bool:
        return self.index is None and self.bitmap is None

    def add_into(self, out: np.ndarray, lo: int = 0) -> None:
        """out[i - lo] += value for every entry (out covers [lo, lo + out.size))."""
        if self.dense:
            out[self.lo - lo : self.lo - lo + self.values.size] += self.values
        else:
            out[self.index - lo] += self.values


def sparse_of(dense: np.ndarray, lo: int = 0) -> Piece:
    """The non-zeros of a dense float32 array, indices shifted by `lo`."""
    nz = np.flatnonzero(dense)
    return Piece(nz + lo, dense[nz])


def bitmap_words(piece: Piece) -> int:
    return -(-piece.bitmap.size // 4)


def wire_words(piece: Piece) -> int:
    if piece.bitmap is not None:
        return bitmap_words(piece) + piece.values.size
    return piece.values.size * (1 if piece.dense else 2)


def header_count(piece: Piece) -> int:
    """The header's second word: nnz (sparse), -1 (dense), or -2 - bitmap words (bitmap)."""
    if piece.bitmap is not None:
        return -2 - bitmap_words(piece)
    return -1 if piece.dense else piece.index.size


def pack(piece: Piece) -> np.ndarray:
    """One int32 buffer: indices (or bitmap words) then value bits, or value bits alone (dense)."""
    vals = np.ascontiguousarray(piece.values, dtype=np.float32).view(np.int32)
    if piece.bitmap is not None:
        bits = np.zeros(4 * bitmap_words(piece), dtype=np.uint8)
        bits[: piece.bitmap.size] = piece.bitmap
        return np.concatenate([bits.view(np.int32), vals])
    if piece.dense:
        return vals
    return np.concatenate([piece.index.astype(np.int32), vals])


def unpack(buf: np.ndarray, count: int, lo: int, length: int) -> Piece:
    """The inverse of `pack` (count: the header's second word; a dense piece spans [lo, lo + length))."""
    if count == -1:
        return Piece(None, buf.view(np.float32)[:length], lo)
    if count < -1:
        words = -2 - count
        return Piece(None, buf[words:].view(np.float32), bitmap=buf[:words].view(np.uint8))
    return Piece(buf[:count].astype(np.int64), buf[count : 2 * count].view(np.float32))


class Comm:
    """A gloo process group's rank, with per-kind counts of the payload bytes this rank sent."""

    def __init__(self, rank: int, world: int):
        self.torch, self.dist = require_torch()
        self.rank, self.world = rank, world
        self.sent = dict.fromkeys(KINDS, 0)
        self.notes: dict = {}  # what a baseline decided (its algorithm, dense partitions, k), for the report

    def reset(self) -> None:
        self.sent = dict.fromkeys(KINDS, 0)
        self.notes = {}

    def count(self, piece: Piece, copies: int = 1) -> None:
        if piece.bitmap is not None:
            self.sent["index"] += 4 * bitmap_words(piece) * copies
            self.sent["values"] += 4 * piece.values.size * copies
        elif piece.dense:
            self.sent["dense"] += 4 * piece.values.size * copies
        else:
            self.sent["index"] += 4 * piece.index.size * copies
            self.sent["values"] += 4 * piece.values.size * copies
        self.sent["meta"] += SIZE_HEADER_BYTES * copies

    def exchange(self, outgoing: dict[int, Piece], sources: list[int], tag: int,
                 spans: dict[int, tuple[int, int]] | None = None) -> dict[int, Piece]:
        """Send each outgoing piece to its peer and receive one piece from each source.

        Sizes first (one header per message), then the bodies; sends are posted
        in the order of `outgoing` (callers rotate destinations).  `spans` gives
        each source's dense range (lo, length), needed only for dense pieces.
        """
        torch, dist = self.torch, self.dist
        heads_out = {p: torch.tensor([wire_words(pc), header_count(pc)], dtype=torch.int64)
                     for p, pc in outgoing.items()}
        heads_in = {p: torch.empty(2, dtype=torch.int64) for p in sources}
        reqs = [dist.irecv(heads_in[p], src=p, tag=tag) for p in sources]
        reqs += [dist.isend(h, dst=p, tag=tag) for p, h in heads_out.items()]
        for r in reqs:
            r.wait()
        bodies = {p: torch.empty(int(heads_in[p][0]), dtype=torch.int32) for p in sources}
        reqs = [dist.irecv(bodies[p], src=p, tag=tag + 1) for p in sources if bodies[p].numel()]
        packed = {}  # one buffer per distinct piece (an allgather sends the same one to every peer); they
        for p, pc in outgoing.items():  # live until their sends complete
            self.count(pc)
            if wire_words(pc):
                if id(pc) not in packed:
                    packed[id(pc)] = torch.from_numpy(pack(pc))
                reqs.append(dist.isend(packed[id(pc)], dst=p, tag=tag + 1))
        for r in reqs:
            r.wait()
        out = {}
        for p in sources:
            lo, length = (spans or {}).get(p, (0, 0))
            out[p] = unpack(bodies[p].numpy(), int(heads_in[p][1]), lo, length)
        return out

    def allreduce_meta(self, values: np.ndarray, op: str = "sum") -> np.ndarray:
        """A small all-reduce (counts, boundaries, histograms): counted as meta, as a ring would send it."""
        torch, dist = self.torch, self.dist
        t = torch.from_numpy(np.ascontiguousarray(values).copy())
        dist.all_reduce(t, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}[op])
        self.sent["meta"] += ring_allreduce_bytes(t.numel() * t.element_size(), self.world)
        return t.numpy()

    def allreduce_dense(self, grad: np.ndarray) -> np.ndarray:
        """gloo's own all_reduce of the dense float32 tensor (its ring algorithm)."""
        t = self.torch.from_numpy(grad.copy())
        self.dist.all_reduce(t)
        self.sent["dense"] += ring_allreduce_bytes(grad.nbytes, self.world)
        return t.numpy()

    def barrier(self) -> None:
        self.dist.barrier()


def ring_allreduce_bytes(nbytes: int, world: int) -> int:
    """What one rank sends in a ring all-reduce: a reduce-scatter and an allgather, 2 (N-1)/N of the data."""
    return 0 if world == 1 else round(2 * (world - 1) * nbytes / world)


def merge(a: Piece, b: Piece, length: int) -> Piece:
    """a + b over the whole vector [0, length): dense when either is, else on the union of the indices.

    Each element is one float32 addition x + y (or x alone), so the two ends of
    an exchange that merge (a, b) and (b, a) hold bitwise the same result.
    """
    if a.dense or b.dense:
        dense, other = (a, b) if a.dense else (b, a)
        out = dense.values.copy()
        other.add_into(out)
        return Piece(None, out, 0)
    # two sorted runs: a stable sort merges them in linear time (np.union1d sorts from scratch, 15x slower)
    index = np.concatenate([a.index, b.index])
    order = np.argsort(index, kind="stable")
    index = index[order]
    values = np.concatenate([a.values, b.values])[order]
    starts = np.flatnonzero(np.concatenate([[True], index[1:] != index[:-1]]))
    return Piece(index[starts], np.add.reduceat(values, starts) if values.size else values)


def densify(piece: Piece, length: int) -> Piece:
    if piece.dense:
        return piece
    out = np.zeros(length, dtype=np.float32)
    out[piece.index] = piece.values
    return Piece(None, out, 0)


def sparse_is_smaller(nnz: int, length: int) -> bool:
    """Index + value (8 bytes) per non-zero against 4 bytes per element dense: SparCML's switch point."""
    return 8 * nnz < 4 * length
