"""The sender's own cost per chunk, without sockets: what a worker spends besides the kernel's UDP path.

One `PhaseTransfer` of `--chunks` chunks of K words (W slots, the window
open) is answered by a switch that echoes each UPDATE back as its RESULT,
as fast as the sender lets chunks out; the clock is `perf_counter`.  Three
ways of feeding it:

- `receive`: one RESULT (bytes) in, a list of frames (bytes) out: the
  sans-I/O API, which the per-frame transports (raw frames, in-process) use;
- `take`: 64 RESULTs per call from a receive buffer laid out as `recvmmsg`
  fills it, the frames written into the ring `sendmmsg` sends from: the
  rules `Worker` runs on a `UdpTransport` (its `step` runs the timers in the
  same compiled call);
- a memory copy of the same bytes (every RESULT into the answers, every
  UPDATE out of the payload), as the floor: `take` is reported against it.

    python benchmarks/sender_bench.py [--chunks 20000] [--words 32 2239]

Writes sender_bench.json (`--out`; default: in $HINA_RESULTS, else hina-results/).

Run from an older checkout, whose PhaseTransfer has no `take`, it times
`receive` alone (the before figure of a change).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from hina.cliargs import OneLineParser, between
from hina.codec.ops import Op
from hina.control.controller import P4_WORDS
from hina.host.job import DEFAULT_WORDS
from hina.host.window import PhaseTransfer, Ring, RttEstimator, SlotPool
from hina.provenance import command_line, default_out, out_help, out_path, write_result
from hina.wire.headers import HEADER_BYTES, max_words

SLOTS = 64
BATCH = 64


def transfer(words: int, chunks: int) -> PhaseTransfer:
    return PhaseTransfer(job_id=1, worker_id=0, words=words, pool=SlotPool(0, SLOTS), rtt=RttEstimator(),
                         tag=7, op=Op.ADD, payload=np.arange(words * chunks, dtype=np.int32), name="bench",
                         now=0.0, deadline=60.0)


def as_result(frame: bytes) -> bytes:
    return b"\x01" + frame[1:]  # msg_type RESULT, the rest as it went


def by_receive(words: int, chunks: int) -> float:
    x = transfer(words, chunks)
    start = time.perf_counter()
    pending = x.start(start)
    while pending:
        now = time.perf_counter()
        out = []
        for frame in pending:
            out += x.receive(as_result(frame), now)
        out += x.poll(now)
        pending = out
    seconds = time.perf_counter() - start
    assert x.done and np.array_equal(x.result, np.arange(words * chunks, dtype=np.int32))
    return seconds


def by_take(words: int, chunks: int) -> float:
    x = transfer(words, chunks)
    size = Ring.frame_size(words)
    rx = np.zeros(BATCH * size, np.uint8)
    lengths = np.full(2 * BATCH, size, np.uint32)[::2]  # strided, as the mmsghdr lengths are
    ring, iov = x.ring.tx, x.ring.iov
    start = time.perf_counter()
    m = x.start_into(start)
    queue = ring[: m * size].reshape(m, size).copy()
    while len(queue):
        now = time.perf_counter()
        out = []
        for at in range(0, len(queue), BATCH):  # the echoing switch's RESULTs, a recvmmsg batch at a time
            n = min(BATCH, len(queue) - at)
            rx[: n * size] = queue[at : at + n].reshape(-1)
            rx[0 : n * size : size] = 1  # msg_type RESULT
            i, m = x.take(rx, size, lengths, 0, n, now)
            while i < n:
                out.append(ring[: m * size].reshape(m, size).copy())
                i, m = x.take(rx, size, lengths, i, n, now)
            if not x.room(m):
                out.append(ring[: m * size].reshape(m, size).copy())
                m = 0
            m = x.poll_into(now, m)
            out.append(ring[: m * size].reshape(m, size).copy())
        queue = np.concatenate(out) if out else queue[:0]
    seconds = time.perf_counter() - start
    assert int(iov[1]) == size
    assert x.done and np.array_equal(x.result, np.arange(words * chunks, dtype=np.int32))
    return seconds


def by_copy(words: int, chunks: int) -> float:
    size = Ring.frame_size(words)
    frames = np.zeros((chunks, size), np.uint8)
    payload = np.arange(words * chunks, dtype=">i4").view(np.uint8).reshape(chunks, 4 * words)
    answers = np.zeros_like(payload)
    start = time.perf_counter()
    for at in range(0, chunks, BATCH):
        frames[at : at + BATCH, HEADER_BYTES:] = payload[at : at + BATCH]
        answers[at : at + BATCH] = frames[at : at + BATCH, HEADER_BYTES:]
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="sender_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=between(1), default=20_000, help="chunks per transfer (default: 20000)")
    ks = [P4_WORDS, DEFAULT_WORDS]  # the P4 program's K and a jumbo frame's
    ap.add_argument("--words", type=between(1, max_words(65535)), nargs="+", default=ks,
                    help=f"K values (default: {' '.join(map(str, ks))})")
    ap.add_argument("--repeat", type=between(1), default=5, help="runs per figure, the best reported (default: 5)")
    ap.add_argument("--out", type=out_path, default=default_out("sender_bench.json"),
                    help=out_help("sender_bench.json"))
    args = ap.parse_args(argv)
    rows = []
    has_take = hasattr(PhaseTransfer, "take")
    by_receive(8, 200), has_take and by_take(8, 200)  # compile or load the kernels first
    print(f"{'K':>6} {'receive us/chunk':>17} {'take us/chunk':>14} {'copy us/chunk':>14} {'take / copy':>12}")
    for words in args.words:
        best = {name: min(f(words, args.chunks) for _ in range(args.repeat)) / args.chunks * 1e6
                for name, f in (("receive", by_receive), ("take", by_take), ("copy", by_copy))
                if name != "take" or has_take}
        take = best.get("take")
        rows.append({"words": words, "chunks": args.chunks, **{f"{k}_us_per_chunk": v for k, v in best.items()}})
        print(f"{words:>6} {best['receive']:>17.2f} " + (f"{take:>14.2f}" if take else f"{'-':>14}")
              + f" {best['copy']:>14.3f} " + (f"{take / best['copy']:>11.1f}x" if take else f"{'-':>12}"))
    write_result(args.out, {"rows": rows}, command_line("benchmarks/sender_bench.py", argv))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
