"""`hina`: the command line.

    hina demo [--workers N --length D --density P --mode auto|dense|blocks|aligned|sketch --drop P ...] [--json]
        the main job on loopback: emulator + N worker processes, verified exact
    hina roundtrip grad0.npy grad1.npy ... [--lanes L --cells-per-element C] [--json]
        the codec on your own gradients (one .npy per worker), numpy standing in for the switch
    hina worker --spec SPEC.json --rank R
        one worker of an experiment (Mininet hosts): prints "ready", waits for "go" on stdin,
        aggregates a synthetic gradient through the switch, prints one JSON report per round
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def _demo(args: argparse.Namespace) -> int:
    from .demo import DemoConfig, format_summary, run_demo
    from .job import JobSpec

    try:
        cfg = DemoConfig(workers=args.workers, length=args.length, density=args.density, mode=args.mode,
                         drop=args.drop, dup=args.dup, reorder=args.reorder, seed=args.seed,
                         job=JobSpec(job_id=args.job_id, words=args.words, slots=args.slots),
                         deadline=args.deadline, workload=args.workload, scale=args.scale,
                         group=args.group, link_gbps=args.link_gbps, rounds=args.rounds)
    except ValueError as exc:
        print(f"hina demo: {exc}", file=sys.stderr)
        return 2
    log = (lambda msg: None) if args.json else (lambda msg: print(msg, file=sys.stderr, flush=True))
    summary = run_demo(cfg, log=log)
    if args.json:
        print(json.dumps(summary))
    else:
        print(format_summary(summary))
    return 0 if summary["exact"] else 1


def _roundtrip(args: argparse.Namespace) -> int:
    import codec

    try:
        grads = [np.load(path, allow_pickle=False) for path in args.files]
        result = codec.simulate_allreduce(grads, lanes=args.lanes, cells_per_element=args.cells_per_element,
                                          mode=args.mode, group=args.group, link_gbps=args.link_gbps)
    except (OSError, ValueError) as exc:
        print(f"hina roundtrip: {exc}", file=sys.stderr)
        return 2
    expected = np.zeros(grads[0].shape, dtype=np.int64)
    for g in grads:
        expected += codec.quantize(g, result.shift)
    exact = bool(np.array_equal(result.fixed, expected.astype(np.int32)))
    nnz = [int(np.count_nonzero(g)) for g in grads]
    summary = {
        "exact": exact, "workers": len(grads), "length": int(grads[0].size), "dtype": grads[0].dtype.name,
        "shift": result.shift, "encoding": result.encoding, "group": result.group, "union": result.union, "rows": result.rows, "residual": result.residual,
        "nonzeros_per_worker": nnz, "bytes_per_worker": result.bytes_per_worker,
        "dense_bytes_per_worker": result.dense_bytes_per_worker,
        "pairs_bytes_per_worker": 8 * max(nnz), "seconds": {k: round(v, 6) for k, v in result.workers[0].seconds.items()},
    }
    if args.json:
        print(json.dumps(summary))
    else:
        total = result.bytes_per_worker["total"]
        print(f"exact: {'yes' if exact else 'NO'}; {len(grads)} workers x {grads[0].size:,} {grads[0].dtype.name}; "
              f"encoding {result.encoding}" + (f" (index group {result.group})" if result.group else ""))
        if result.union is not None:
            print(f"union: {result.union:,} ({result.union / grads[0].size:.2%}), sketch rows {result.rows}, "
                  f"residual {result.residual}")
        print(f"bytes per worker: {total:,} = {total / result.dense_bytes_per_worker:.2%} of dense; "
              f"{', '.join(f'{k} {v:,}' for k, v in result.bytes_per_worker.items() if k != 'total')}")
        print(f"index/value pairs would send {8 * max(nnz):,} bytes (the largest worker)")
    return 0 if exact else 1


def _worker(args: argparse.Namespace) -> int:
    """Run one worker from an experiment spec (see mininet/hina_net.py: worker_spec)."""
    import codec

    from .agent import Worker
    from .demo import timed_aggregate
    from .job import JobSpec
    from .synthetic import gradient_for
    from .transport import open_transport

    spec = json.loads(Path(args.spec).read_text())
    params = codec.CodecParams.from_config(spec["params"])
    job = JobSpec.from_config(spec["job"])
    me = spec["hosts"][args.rank]
    grad = gradient_for(params.length, spec["density"], seed=spec["seed"], rank=args.rank,
                        workload=spec.get("workload"), scale=spec.get("scale", 1.0))
    transport = open_transport(spec["switch"]["ip"], ifname=me.get("ifname"), src_mac=me.get("mac"),
                               src_ip=me.get("ip"), switch_mac=spec["switch"]["mac"], kind=args.transport)
    print(json.dumps({"ready": args.rank, "transport": type(transport).__name__}), flush=True)
    worker = Worker(transport, job, args.rank, deadline=spec.get("deadline", 30.0))
    status = 0
    for line in sys.stdin:
        if line.strip() != "go":
            break
        try:
            print(json.dumps(timed_aggregate(worker, params, grad)), flush=True)
        except Exception as exc:  # reported to the orchestrator, which fails the run
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
            status = 1
    transport.close()
    return status


def _codec_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--group", type=int, default=0,
                    help="index group size: 1 = one-level bitmap, 2..1024 (a power of two) = two levels, "
                         "0 = chosen per tensor (default 0)")
    ap.add_argument("--link-gbps", type=float, default=10.0,
                    help="the link rate auto's cost model weighs bytes with (default 10)")


def build_parser() -> argparse.ArgumentParser:
    from codec.params import MODES

    from .job import DEFAULT_SLOTS, DEFAULT_WORDS

    ap = argparse.ArgumentParser(prog="hina", description="homomorphic in-network aggregation")
    sub = ap.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="the main job on loopback, verified exact")
    d.add_argument("--workers", type=int, default=4)
    d.add_argument("--length", type=int, default=1 << 22, help="elements per gradient (default 2^22)")
    d.add_argument("--density", type=float, default=0.01, help="non-zero fraction per worker")
    d.add_argument("--mode", choices=MODES, default="auto",
                   help="auto (default: the cheapest encoding by the cost model, per tensor), dense "
                        "(SwitchML-style), blocks (OmniReduce-style), aligned (index + values at the union) "
                        "or sketch (index + count sketch in one round)")
    d.add_argument("--workload", help="a model-shaped preset of benchmarks/workloads.py instead of uniform")
    d.add_argument("--scale", type=float, default=0.02, help="with --workload: shrink the preset by this factor")
    d.add_argument("--drop", type=float, default=0.0, help="switch drop probability, each direction")
    d.add_argument("--dup", type=float, default=0.0, help="switch duplication probability")
    d.add_argument("--reorder", type=float, default=0.0, help="switch reordering probability")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--job-id", type=int, default=1)
    d.add_argument("--words", type=int, default=DEFAULT_WORDS, help=f"K, words per packet (default {DEFAULT_WORDS})")
    d.add_argument("--slots", type=int, default=DEFAULT_SLOTS, help=f"W, packets in flight (default {DEFAULT_SLOTS})")
    d.add_argument("--deadline", type=float, default=20.0, help="seconds without progress before a worker gives up")
    _codec_flags(d)
    d.add_argument("--rounds", type=int, default=1,
                   help="aggregations per worker; with more than one, seconds is the best after the first "
                        "(the steady state of a training loop) and first_seconds the first (default 1)")
    d.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    d.set_defaults(func=_demo)

    r = sub.add_parser("roundtrip", help="the codec on your .npy gradients, one file per worker")
    r.add_argument("files", nargs="+")
    r.add_argument("--lanes", type=int, default=1024)
    r.add_argument("--cells-per-element", type=float, default=1.3)
    r.add_argument("--mode", choices=MODES, default="auto", help="the encoding (default auto)")
    _codec_flags(r)
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=_roundtrip)

    w = sub.add_parser("worker", help="one worker of an experiment (Mininet hosts)")
    w.add_argument("--spec", required=True, help="experiment spec JSON")
    w.add_argument("--rank", type=int, required=True)
    w.add_argument("--transport", choices=("auto", "udp", "raw"), default="auto")
    w.set_defaults(func=_worker)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
