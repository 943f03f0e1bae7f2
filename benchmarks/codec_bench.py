"""Codec benchmark: every mode's compute time against a memory copy, and its bytes against the information bound.

Cases: d = 2^25 float32 (--lengths) at per-worker densities 0.1, 1, 5 and
20% (--densities; uniform random supports drawn independently per worker,
normal values) and the `lstm` and `deeplight` presets of
benchmarks/workloads.py (--presets, scaled by --preset-scale: 0.05 gives
2^24.3 and 2^24.9 elements), each with N = 2 and 8 workers (--workers).

For each case and each mode in codec.MODES ("auto", "dense", "blocks",
"aligned", "sketch"):

1. `codec.simulate_allreduce` runs every round once with numpy as the switch;
   every worker's sum must equal, bit for bit, numpy's int64 sum of
   `codec.quantize(g, shift)` cast to int32.
2. Worker 0 alone is re-run with `codec.replay` against the recorded
   aggregates, into one `out` buffer and one `Workspace` reused throughout:
   the first replay is the *first aggregation* (cold buffers; its encode and
   decode are reported apart), then --repeat more replays, of which the best
   encode and the best decode are kept.  Every time is a ratio to
   `numpy.copyto` of d float32 values into a warm destination (best of 7,
   timed in the same run, once per case).
3. Bytes one worker sends (`bytes_per_worker["total"]`) against the
   information bound, log2 C(d, |U|) bits + 32 bits per union element (|U|:
   the positions where any worker's gradient is non-zero, counted with
   numpy), and against dense (4d).  The bound is that of a union of |U|
   positions drawn uniformly: the presets' row-shaped supports carry less
   information, so a mode can come in under it there.

Targets (d = 2^25, N = 8, uniform): at 1%, auto encode <= 1.5x copy (one
pass over the gradient, then sparse work) and auto decode <= 1x copy,
sketch decode <= 10x copy; auto bytes <= 1.10x the bound at 1% and 5% and
<= 1.5x at 0.1%.  A target whose case did not run is reported "not run".

--backend torch runs worker 0's replays with the codec's torch kernels
(`codec.torch_kernels`) on --device cpu or cuda (the gradient, the `out`
buffer and every kernel on that device; only words cross to the host), and
times them against a device-to-device copy of d float32 values (torch
`copy_` into a warm tensor: a clone without its allocation), best of 7 in
the same run; the rounds' aggregates still come from the numba simulation,
and the torch replay's sum must equal it bit for bit.  --device cuda is
refused (one line, status 2) where torch sees no CUDA device.

Prints a line per case and mode as it goes, then a Markdown table and the
targets; writes codec_bench.json (--out; default: in $HINA_RESULTS, else
hina-results/ in the current directory) and, with matplotlib, a PNG next to
it (same name, .png).  Exit status 1 if any sum is
not exact.

    python benchmarks/codec_bench.py                # the full benchmark (make bench)
    python benchmarks/codec_bench.py --quick        # d = 2^20 and presets at ~2^20, for a fast look
    python benchmarks/codec_bench.py --lengths 1048576 --densities 0.01 --workers 2 --presets lstm --repeat 2
    python benchmarks/codec_bench.py --backend torch --device cuda --densities 0.001 0.01 0.05 --workers 8 \
        --presets --out benchmarks/results/codec_bench_torch_cuda.json
"""

from __future__ import annotations

import dataclasses
import gc
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hina import codec, provenance
from hina.cliargs import OneLineParser, between, fraction, scale_flag
from hina.codec.params import MAX_WORKERS
from hina.host import workloads

FULL_LENGTH = 2**25
QUICK_LENGTH = 2**20
PRESET_SCALE = 0.05  # lstm 20.6M (2^24.3), deeplight 30.4M (2^24.9) elements
QUICK_PRESET_SCALE = 0.0025  # lstm 1.0M, deeplight 1.5M: about 2^20


# -- cases -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Case:
    """One set of N gradients: `make()` draws them (called once, freed after the case)."""

    label: str
    kind: str  # "uniform" or the preset's name
    length: int
    density: float | None  # per-worker density asked for (uniform only)
    workers: int
    make: Callable[[], list[np.ndarray]]


def uniform_gradients(length: int, density: float, workers: int, seed: int) -> list[np.ndarray]:
    """Independent uniform supports of round(density * d) elements per worker, normal values."""
    rng = np.random.default_rng(seed)
    k = int(round(density * length))
    grads = []
    for _ in range(workers):
        g = np.zeros(length, dtype=np.float32)
        g[rng.choice(length, size=k, replace=False)] = rng.standard_normal(k, dtype=np.float32)
        grads.append(g)
    return grads


def log2_label(length: int) -> str:
    exp = math.log2(length)
    return f"2^{exp:.0f}" if exp.is_integer() else f"2^{exp:.1f}"


def build_cases(lengths: list[int], densities: list[float], presets: list[str], scale: float,
                workers: list[int], seed: int) -> list[Case]:
    cases = []
    for d in lengths:
        for p in densities:
            for n in workers:
                s = seed + len(cases)
                cases.append(Case(f"{log2_label(d)} {p * 100:.3g}%", "uniform", d, p, n,
                                  lambda d=d, p=p, n=n, s=s: uniform_gradients(d, p, n, s)))
    for name in presets:
        w = workloads.preset(name, scale)
        for n in workers:
            cases.append(Case(f"{name} {log2_label(w.size)}", name, w.size, None, n,
                              lambda w=w, n=n: w.gradients(workers=n, seed=seed)))
    return cases


# -- measurements ------------------------------------------------------------------------------
def copy_seconds(length: int, repeat: int = 7) -> float:
    """Best time of numpy.copyto of `length` float32 values into a warm destination."""
    src = np.ones(length, dtype=np.float32)
    dst = np.ones_like(src)
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return best


@dataclasses.dataclass(frozen=True)
class Backend:
    """Where worker 0's replays run: numba on numpy arrays, or torch kernels on a torch device."""

    name: str  # "numba" or "torch"
    device: str  # "cpu" or "cuda"

    @property
    def copy_label(self) -> str:
        return "numpy.copyto" if self.name == "numba" else f"torch copy_ on {self.device}"

    def tensor(self, grad: np.ndarray):
        """The gradient as this backend takes it."""
        if self.name == "numba":
            return grad
        import torch

        return torch.from_numpy(grad).to(self.device)

    def out(self, length: int):
        if self.name == "numba":
            return np.empty(length, dtype=np.int32)
        import torch

        return torch.empty(length, dtype=torch.int32, device=self.device)

    def host(self, fixed) -> np.ndarray:
        return fixed if isinstance(fixed, np.ndarray) else fixed.cpu().numpy()

    def copy_seconds(self, length: int, repeat: int = 7) -> float:
        """Best time of a copy of `length` float32 values into a warm destination on this backend's memory."""
        if self.name == "numba":
            return copy_seconds(length, repeat)
        import torch

        src = torch.ones(length, dtype=torch.float32, device=self.device)
        dst = torch.ones_like(src)
        sync = torch.cuda.synchronize if self.device == "cuda" else (lambda: None)
        best = math.inf
        for _ in range(repeat):
            sync()
            start = time.perf_counter()
            dst.copy_(src)
            sync()
            best = min(best, time.perf_counter() - start)
        return best


NUMBA = Backend("numba", "cpu")


def union_size(grads: list[np.ndarray]) -> int:
    """|U|: positions where any worker's gradient is non-zero."""
    union = grads[0] != 0
    for g in grads[1:]:
        union |= g != 0
    return int(np.count_nonzero(union))


def information_bound_bytes(length: int, union: int) -> float:
    """log2 C(d, |U|) bits to name the union, plus 32 bits per union element."""
    log2_choose = (math.lgamma(length + 1) - math.lgamma(union + 1) - math.lgamma(length - union + 1)) / math.log(2)
    return log2_choose / 8 + 4 * union


def expected_sum(grads: list[np.ndarray], shift: int | None) -> np.ndarray:
    """numpy's dense sum of the quantized gradients: int64, cast (wrapping) to int32."""
    total = np.zeros(grads[0].size, dtype=np.int64)
    for g in grads:
        total += codec.quantize(g, shift)
    return total.astype(np.int32)


def time_replays(result: codec.AllreduceResult, grad: np.ndarray, repeat: int,
                 backend: Backend = NUMBA) -> tuple[dict, np.ndarray]:
    """Worker 0 replayed 1 + repeat times into one out buffer and workspace: first and best seconds."""
    grad = backend.tensor(grad)
    out = backend.out(result.params.length)
    ws = codec.Workspace()
    first = codec.replay(result.params, grad, result.aggregates, out=out, workspace=ws).seconds
    steady = [codec.replay(result.params, grad, result.aggregates, out=out, workspace=ws).seconds
              for _ in range(repeat)]
    return {"first_encode_s": first["encode"], "first_decode_s": first["decode"],
            "encode_s": min(s["encode"] for s in steady), "decode_s": min(s["decode"] for s in steady)}, \
        backend.host(out)


def measure_mode(grads: list[np.ndarray], mode: str, repeat: int, copy: float, union: int,
                 backend: Backend = NUMBA) -> dict:
    """One mode on one case: exactness, worker 0's times as ratios to the copy, bytes against the bound."""
    d = grads[0].size
    result = codec.simulate_allreduce(grads, mode=mode)
    expected = expected_sum(grads, result.shift)
    exact = all(np.array_equal(w.fixed.reshape(-1), expected) for w in result.workers)
    seconds, out = time_replays(result, grads[0], repeat, backend)
    exact = exact and bool(np.array_equal(out, expected))  # the replays decode the same sum
    sent = result.bytes_per_worker
    bound = information_bound_bytes(d, union)
    estimate = result.workers[0].estimate
    row = {
        "mode": mode, "encoding": result.encoding, "group": result.group, "exact": exact,
        "codec_union": result.union, "estimated_union": estimate.union if estimate else None,
        "rows": result.rows, "residual": result.residual, "rounds": result.workers[0].rounds,
        **seconds, "bytes": sent, "bytes_total": sent["total"], "bound_bytes": bound, "dense_bytes": 4 * d,
        "bytes_per_bound": sent["total"] / bound if bound else math.inf, "bytes_per_dense": sent["total"] / (4 * d),
    }
    for key in ("encode", "decode", "first_encode", "first_decode"):
        row[f"{key}_x_copy"] = row[f"{key}_s"] / copy
    return row


def run_case(case: Case, repeat: int, progress: Callable[[dict], None], backend: Backend = NUMBA) -> list[dict]:
    start = time.perf_counter()
    grads = case.make()
    union = union_size(grads)
    per_worker = float(np.mean([np.count_nonzero(g) for g in grads])) / case.length
    copy = backend.copy_seconds(case.length)
    print(f"{case.label} N={case.workers}: drawn in {time.perf_counter() - start:.1f} s, "
          f"per-worker density {per_worker:.3%}, |U|/d {union / case.length:.3%}, "
          f"copy ({backend.copy_label}) {copy * 1e3:.2f} ms", flush=True)
    common = {"case": case.label, "kind": case.kind, "length": case.length, "density": case.density,
              "per_worker_density": per_worker, "workers": case.workers, "union": union,
              "union_density": union / case.length, "backend": backend.name, "device": backend.device,
              "copy": backend.copy_label, "copy_s": copy}
    rows = []
    for mode in codec.MODES:
        rows.append({**common, **measure_mode(grads, mode, repeat, copy, union, backend)})
        progress(rows[-1])
        gc.collect()
    return rows


# -- reporting ---------------------------------------------------------------------------------
def encoding_label(r: dict) -> str:
    """The encoding that ran, with the index's group size where it has one."""
    return f"{r['encoding']} G={r['group']}" if r["encoding"] in ("aligned", "sketch") else r["encoding"]


def print_progress(r: dict) -> None:
    print(f"  {r['mode']:<8} -> {encoding_label(r):<12} exact={'yes' if r['exact'] else 'NO'} "
          f"encode {r['encode_x_copy']:6.2f}x decode {r['decode_x_copy']:6.2f}x copy "
          f"(first {r['first_encode_x_copy']:.2f}x/{r['first_decode_x_copy']:.2f}x) "
          f"bytes {r['bytes_per_bound']:.3f}x bound, {r['bytes_per_dense']:.2%} of dense, "
          f"residual {r['residual']}", flush=True)


TABLE = (  # header, cell
    ("case", lambda r: r["case"]),
    ("N", lambda r: r["workers"]),
    (r"\|U\|/d", lambda r: f"{r['union_density']:.2%}"),
    ("mode", lambda r: r["mode"]),
    ("encoding (G)", encoding_label),
    ("exact", lambda r: "yes" if r["exact"] else "**NO**"),
    ("encode x copy", lambda r: f"{r['encode_x_copy']:.2f}"),
    ("decode x copy", lambda r: f"{r['decode_x_copy']:.2f}"),
    ("1st encode x copy", lambda r: f"{r['first_encode_x_copy']:.2f}"),
    ("1st decode x copy", lambda r: f"{r['first_decode_x_copy']:.2f}"),
    ("bytes/bound", lambda r: f"{r['bytes_per_bound']:.3f}"),
    ("bytes/dense", lambda r: f"{r['bytes_per_dense']:.2%}"),
    ("residual", lambda r: r["residual"]),
)


def markdown_table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(h for h, _ in TABLE) + " |", "|" + "---|" * len(TABLE)]
    lines += ["| " + " | ".join(str(cell(r)) for _, cell in TABLE) + " |" for r in rows]
    return "\n".join(lines)


# (mode, density, metric, limit): all at d = 2^25, N = 8, uniform supports
TARGETS = (
    ("auto", 0.01, "decode_x_copy", 1.0),
    ("auto", 0.01, "encode_x_copy", 1.5),
    ("sketch", 0.01, "decode_x_copy", 10.0),
    ("auto", 0.01, "bytes_per_bound", 1.10),
    ("auto", 0.05, "bytes_per_bound", 1.10),
    ("auto", 0.001, "bytes_per_bound", 1.5),
)


def check_targets(rows: list[dict]) -> list[dict]:
    out = []
    for mode, density, metric, limit in TARGETS:
        found = [r for r in rows if (r["kind"], r["length"], r["density"], r["workers"], r["mode"])
                 == ("uniform", FULL_LENGTH, density, 8, mode)]
        value = found[0][metric] if found else None
        status = "not run" if value is None else "met" if value <= limit else "MISSED"
        out.append({"mode": mode, "length": FULL_LENGTH, "density": density, "workers": 8,
                    "metric": metric, "limit": limit, "value": value, "status": status})
    return out


def target_line(t: dict) -> str:
    value = "-" if t["value"] is None else f"{t['value']:.3f}"
    return (f"target {t['mode']} {t['metric']} at d=2^25 {t['density']:.1%} N=8: "
            f"{value} (limit {t['limit']:.2f}) {t['status']}")


PANELS = (  # key, first-aggregation key, y label, target lines (value, label)
    ("encode_x_copy", "first_encode_x_copy", "encode / copy", ((1.5, "auto target 1.5x"),)),
    ("decode_x_copy", "first_decode_x_copy", "decode / copy", ((1.0, "auto target 1x"), (10.0, "sketch target 10x"))),
    ("bytes_per_bound", None, "bytes / information bound", ((1.1, "auto target 1.10x"), (1.5, "1.5x (0.1%)"))),
)


def plot(rows: list[dict], path: Path, title: str) -> bool:
    """Grouped bars per case, one per mode: encode and decode x copy (ticks: first aggregation), bytes/bound."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter
    except ImportError:
        return False
    cases = list(dict.fromkeys((r["case"], r["workers"]) for r in rows))
    union = {(r["case"], r["workers"]): r["union_density"] for r in rows}
    modes = list(codec.MODES)
    width = 0.8 / len(modes)
    x = np.arange(len(cases))
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(max(8.0, 1.2 * len(cases) + 2), 10), sharex=True)
    for ax, (key, first_key, ylabel, lines) in zip(axes, PANELS):
        for k, mode in enumerate(modes):
            by_case = {(r["case"], r["workers"]): r for r in rows if r["mode"] == mode}
            at = x + (k - (len(modes) - 1) / 2) * width
            ax.bar(at, [by_case[c][key] if c in by_case else np.nan for c in cases], width, label=mode)
            if first_key:
                ax.scatter(at, [by_case[c][first_key] if c in by_case else np.nan for c in cases],
                           marker="_", s=60, color="black", zorder=3,
                           label="first aggregation" if k == 0 else None)
        for y, label in lines:
            ax.axhline(y, color="black", lw=0.8, ls="--")
            ax.annotate(label, (0.995, y), xycoords=("axes fraction", "data"), fontsize=7, ha="right", va="bottom")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0].legend(ncol=len(modes) + 1, fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0))
    fig.suptitle(title, fontsize=9)
    axes[-1].set_xticks(x, [f"{c}\nN={n}, |U|/d {union[c, n]:.2%}" for c, n in cases], fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def metadata(scale: float, backend: Backend) -> dict:
    """What this benchmark adds to provenance's meta: versions, the backend and device, the copy it divides by."""
    import numba

    meta = {"numba": numba.__version__, "preset_scale": scale, "modes": list(codec.MODES),
            "backend": backend.name, "device": backend.device, "copy": backend.copy_label}
    if backend.name == "torch":
        import torch

        meta.update(torch=torch.__version__, torch_threads=torch.get_num_threads(),
                    gpu=torch.cuda.get_device_name() if backend.device == "cuda" else None)
    return meta


def backend_for(ap: OneLineParser, name: str, device: str) -> Backend:
    """The backend the flags ask for, or one line and status 2 if this machine cannot run it."""
    if name == "numba":
        if device != "cpu":
            ap.error(f"--device {device}: the numba backend runs on the CPU; use --backend torch")
        return NUMBA
    try:
        import torch
    except ImportError:
        ap.error("--backend torch: PyTorch is not installed (pip install -e '.[torch]')")
    if device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device is available to torch on this machine")
    return Backend(name, device)


# -- main --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = OneLineParser(prog="codec_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", type=between(1), nargs="+", default=[FULL_LENGTH], help="uniform cases' d")
    ap.add_argument("--densities", type=fraction, nargs="+", default=[0.001, 0.01, 0.05, 0.2],
                    help="uniform cases' per-worker density (fractions)")
    ap.add_argument("--workers", type=between(1, MAX_WORKERS), nargs="+", default=[2, 8], help="N, for every case")
    ap.add_argument("--presets", nargs="*", default=["lstm", "deeplight"], choices=list(workloads.PRESETS),
                    help="benchmarks/workloads.py presets (none: uniform cases only)")
    ap.add_argument("--preset-scale", type=scale_flag, default=None,
                    help=f"presets' scale (default {PRESET_SCALE}; {QUICK_PRESET_SCALE} with --quick)")
    ap.add_argument("--repeat", type=between(1), default=3, help="steady-state replays of worker 0 (best is kept)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help=f"d = 2^20 only, presets at {QUICK_PRESET_SCALE}")
    ap.add_argument("--backend", choices=("numba", "torch"), default="numba",
                    help="worker 0's kernels: numba on numpy arrays, or torch ops on --device")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the torch backend runs")
    ap.add_argument("--torch-threads", type=between(1, 1024), default=1,
                    help="torch's intra-op threads on the CPU (default 1: numba's kernels run on one core too)")
    ap.add_argument("--out", type=provenance.out_path, default=None,
                    help=provenance.out_help("codec_bench.json (codec_bench_torch_DEVICE.json with --backend "
                                             "torch)", "the JSON result, the PNG next to it"))
    args = ap.parse_args(argv)
    backend = backend_for(ap, args.backend, args.device)
    if backend.name == "torch":
        import torch

        torch.set_num_threads(args.torch_threads)
    if args.out is None:
        name = "codec_bench.json" if backend.name == "numba" else f"codec_bench_torch_{backend.device}.json"
        args.out = provenance.default_out(name)
    lengths = [QUICK_LENGTH] if args.quick else args.lengths
    scale = args.preset_scale if args.preset_scale is not None else QUICK_PRESET_SCALE if args.quick else PRESET_SCALE

    cases = build_cases(lengths, args.densities, args.presets, scale, args.workers, args.seed)
    print(f"{len(cases)} cases x {len(codec.MODES)} modes; presets at scale {scale}; "
          f"{args.repeat} steady-state replays; backend {backend.name} on {backend.device}", flush=True)
    rows = []
    for i, case in enumerate(cases, 1):
        print(f"[{i}/{len(cases)}] ", end="")
        rows.extend(run_case(case, args.repeat, print_progress, backend))
        gc.collect()

    print(f"\nPresets at scale {scale}; times are worker 0's ({backend.name} on {backend.device}), as multiples of "
          f"{backend.copy_label} of d float32 values.\n")
    print(markdown_table(rows))
    targets = check_targets(rows)
    print()
    for t in targets:
        print(target_line(t))

    command = provenance.command_line("benchmarks/codec_bench.py", argv)
    data = provenance.write_result(args.out, {"targets": targets, "rows": rows}, command, **metadata(scale, backend))
    meta = data["meta"]
    print(f"wrote {args.out}")
    png = args.out.with_suffix(".png")
    where = meta["gpu"] if backend.device == "cuda" else f"{meta['cpu']}, {meta['cpus']} CPUs"
    title = (f"hina codec, worker 0, {backend.name} on {backend.device} (best of {args.repeat}; ticks: first "
             f"aggregation; x {backend.copy_label}); presets at scale {scale}\n{where}, {meta['date']}")
    if plot(rows, png, title):
        print(f"wrote {png}")
    exact = all(r["exact"] for r in rows)
    if not exact:
        print("NOT EXACT: " + ", ".join(f"{r['case']} N={r['workers']} {r['mode']}" for r in rows if not r["exact"]))
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
