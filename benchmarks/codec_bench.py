"""Codec benchmark: compute time per worker against a memory copy, bytes against the baselines.

For each gradient length d, per-worker density p and worker count N it
draws N float32 gradients with independent uniform random supports (the
worst case for the union), runs every codec phase with numpy as the switch,
checks the result bit for bit against the dense sum of quantized arrays, and
reports for one worker:

- encode seconds (finite check, scale exponent, quantize, index bitmap,
  sketch) and decode seconds (union, sketch layout, peeling, assembly), each
  as the best of --repeat replays and as a ratio to `numpy.copyto` of d
  float32 values timed in the same run;
- bytes sent per worker against dense (4d), index/value pairs (8 per
  non-zero) and the information bound (log2 C(d, |U|) bits + 4 bytes per
  union element), and the residual size.

Writes benchmarks/results/codec_bench.json and, with matplotlib,
benchmarks/results/codec_bytes.png.  Run: `make bench` or
`python benchmarks/codec_bench.py [--quick]`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

import codec

RESULTS = Path(__file__).resolve().parent / "results"
TARGET = {"length": 2**25, "density": 0.01, "workers": 8, "max_ratio": 10.0, "max_bytes_factor": 1.25}


def make_gradients(rng: np.random.Generator, workers: int, length: int, density: float) -> list[np.ndarray]:
    """Independent uniform supports of round(density * length) elements, normal values."""
    k = int(round(density * length))
    grads = []
    for _ in range(workers):
        g = np.zeros(length, dtype=np.float32)
        idx = rng.choice(length, size=k, replace=False)
        g[idx] = rng.standard_normal(k, dtype=np.float32)
        grads.append(g)
    return grads


def copy_seconds(length: int, repeat: int = 7) -> float:
    """Best time of numpy.copyto for `length` float32 values into a warm destination."""
    src = np.ones(length, dtype=np.float32)
    dst = np.empty_like(src)
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return best


def information_bound_bytes(length: int, union: int) -> float:
    """log2 C(d, |U|) bits to name the union, plus 32 bits per union element."""
    log2_choose = (math.lgamma(length + 1) - math.lgamma(union + 1) - math.lgamma(length - union + 1)) / math.log(2)
    return log2_choose / 8 + 4 * union


def check_exact(result: codec.AllreduceResult, grads: list[np.ndarray]) -> bool:
    expected = np.zeros(grads[0].size, dtype=np.int64)
    for g in grads:
        expected += codec.quantize(g, result.shift)
    return bool(np.array_equal(result.fixed, expected.astype(np.int32)))


def run_case(length: int, density: float, workers: int, repeat: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    grads = make_gradients(rng, workers, length, density)
    copy = copy_seconds(length)
    result = codec.simulate_allreduce(grads)
    exact = check_exact(result, grads)
    runs = [codec.replay(result.params, grads[0], result.aggregates) for _ in range(repeat)]
    encode = min(r.seconds["encode"] for r in runs)
    decode_union = min(r.seconds["decode_union"] for r in runs)
    decode_sketch = min(r.seconds["decode_sketch"] for r in runs)
    decode = min(r.seconds["decode_union"] + r.seconds["decode_sketch"] for r in runs)
    nnz = int(np.count_nonzero(grads[0]))
    sent = result.bytes_per_worker
    union = int(result.union)
    target_bytes = length / 8 + 4 * float(result.params.cell_factor) * union
    return {
        "length": length, "density": density, "workers": workers, "exact": exact,
        "union": union, "union_density": union / length, "rows": result.rows,
        "residual": result.residual, "peel_rounds": result.peel_rounds,
        "copy_s": copy, "encode_s": encode, "decode_s": decode,
        "decode_union_s": decode_union, "decode_sketch_s": decode_sketch,
        "encode_ratio": encode / copy, "decode_ratio": decode / copy,
        "bytes": sent, "bytes_total": sent["total"],
        "dense_bytes": 4 * length, "pairs_bytes": 8 * nnz,
        "bound_bytes": information_bound_bytes(length, union),
        "target_bytes": target_bytes, "bytes_factor": sent["total"] / target_bytes,
    }


def print_row(r: dict) -> None:
    print(
        f"d=2^{int(math.log2(r['length'])):<2d} p={r['density']:<6.2%} N={r['workers']:<2d} "
        f"|U|={r['union_density']:6.2%} exact={'yes' if r['exact'] else 'NO'} "
        f"enc {r['encode_s'] * 1e3:7.1f} ms ({r['encode_ratio']:5.1f}x copy) "
        f"dec {r['decode_s'] * 1e3:7.1f} ms ({r['decode_ratio']:5.1f}x; union {r['decode_union_s'] * 1e3:.0f} "
        f"+ sketch {r['decode_sketch_s'] * 1e3:.0f}) "
        f"bytes {r['bytes_total'] / r['dense_bytes']:6.2%} of dense, {r['bytes_total'] / r['pairs_bytes']:5.2f}x pairs, "
        f"{r['bytes_total'] / r['bound_bytes']:4.2f}x bound, residual {r['residual']}",
        flush=True,
    )


def print_table(rows: list[dict]) -> None:
    head = ("d", "p", "N", "|U|/d", "encode ms", "enc/copy", "decode ms", "dec/copy",
            "hina B", "dense B", "pairs B", "bound B", "hina/bound", "residual")
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = (f"2^{int(math.log2(r['length']))}", f"{r['density']:.1%}", r["workers"],
                 f"{r['union_density']:.2%}", f"{r['encode_s'] * 1e3:.1f}", f"{r['encode_ratio']:.1f}",
                 f"{r['decode_s'] * 1e3:.1f}", f"{r['decode_ratio']:.1f}", f"{r['bytes_total']:,}",
                 f"{r['dense_bytes']:,}", f"{r['pairs_bytes']:,}", f"{r['bound_bytes']:,.0f}",
                 f"{r['bytes_total'] / r['bound_bytes']:.2f}", r["residual"])
        print("| " + " | ".join(str(c) for c in cells) + " |")


def check_targets(rows: list[dict]) -> list[str]:
    lines = []
    for r in rows:
        if (r["length"], r["density"], r["workers"]) != (TARGET["length"], TARGET["density"], TARGET["workers"]):
            continue
        for name, value, limit in (("encode", r["encode_ratio"], TARGET["max_ratio"]),
                                   ("decode", r["decode_ratio"], TARGET["max_ratio"]),
                                   ("bytes", r["bytes_factor"], TARGET["max_bytes_factor"])):
            verdict = "met" if value <= limit else "MISSED"
            lines.append(f"target {name}: {value:.2f} (limit {limit}) {verdict}")
    return lines


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    combos = sorted({(r["length"], r["workers"]) for r in rows})
    fig, axes = plt.subplots(1, len(combos), figsize=(4.2 * len(combos), 3.6), squeeze=False, sharey=True)
    for ax, (length, workers) in zip(axes[0], combos):
        sel = sorted((r for r in rows if (r["length"], r["workers"]) == (length, workers)), key=lambda r: r["density"])
        x = [r["density"] * 100 for r in sel]
        for key, label, style in (("bytes_total", "hina", "o-"), ("pairs_bytes", "index/value pairs", "s--"),
                                  ("bound_bytes", "information bound", "^:")):
            ax.plot(x, [r[key] / r["dense_bytes"] for r in sel], style, label=label)
        ax.axhline(1.0, color="grey", lw=1, label="dense")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"d = 2^{int(math.log2(length))}, N = {workers}")
        ax.set_xlabel("per-worker density (%)")
    axes[0][0].set_ylabel("bytes per worker / dense")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[2**20, 2**25])
    ap.add_argument("--densities", type=float, nargs="+", default=[0.001, 0.01, 0.05, 0.2])
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 8])
    ap.add_argument("--repeat", type=int, default=3, help="replays of worker 0 to time (best is kept)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="only d = 2^20 (a minute instead of several)")
    ap.add_argument("--out", type=Path, default=RESULTS / "codec_bench.json")
    args = ap.parse_args(argv)
    lengths = [2**20] if args.quick else args.lengths

    cases = [(d, p, n) for d in lengths for p in args.densities for n in args.workers]
    rows = []
    for i, (d, p, n) in enumerate(cases, 1):
        print(f"[{i}/{len(cases)}] ", end="", flush=True)
        rows.append(run_case(d, p, n, args.repeat, args.seed + i))
        print_row(rows[-1])
    print_table(rows)
    targets = check_targets(rows)
    for line in targets:
        print(line)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": " ".join([os.path.basename(sys.argv[0])] + (argv if argv is not None else sys.argv[1:])),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
    }
    args.out.write_text(json.dumps({"meta": meta, "targets": targets, "rows": rows}, indent=1))
    print(f"wrote {args.out}")
    png = args.out.with_name("codec_bytes.png")
    if plot(rows, png):
        print(f"wrote {png}")
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
