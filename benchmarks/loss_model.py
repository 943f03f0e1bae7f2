"""The sender under loss on a virtual clock: how long a lossy aggregation takes, what it resends.

The workers' own `PhaseTransfer`s and the switch's `Pipeline` on the
deterministic network of sim/netsim.py (a run is a pure function of its
seed: no sockets, no CPU time in the figures).  Each case aggregates
`--rounds` phases in a row with the workers' default RTT estimator and
congestion window, as `Worker` builds them, and checks the sum.  The
cases: the Mininet K = 32 run (3 workers, 1% loss per link and direction,
jittery hosts), the same on a quiet host, and heavy loss (4 and 8 workers,
10%, K = 256).

    python benchmarks/loss_model.py [--seeds 3]
Prints one row per case: virtual seconds per round (mean over seeds),
frames resent per useful frame, and timeouts per worker and round; writes
them to loss_model.json (`--out`; default: in $HINA_RESULTS, else hina-results/).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from hina.cliargs import OneLineParser, between
from hina.codec.ops import Op
from hina.control import JobConfig, Member
from hina.emulator import Pipeline
from hina.host.congestion import CongestionWindow
from hina.host.congestion_settings import CongestionSettings
from hina.host.window import RttEstimator
from hina.provenance import command_line, default_out, out_help, out_path, write_result
from hina.sim.netsim import VirtualNetwork, expected, run_transfers

# name, workers, words (K), chunks per worker, drop per link and direction, latency, jitter (seconds)
CASES = [
    ("Mininet K=32, 1% loss, 1 ms jitter", 3, 32, 6250, 0.01, 1e-4, 1e-3),
    ("K=32, 1% loss, 0.1 ms jitter", 3, 32, 6250, 0.01, 1e-4, 1e-4),
    ("K=32, no loss, 1 ms jitter", 3, 32, 6250, 0.0, 1e-4, 1e-3),
    ("4 workers, K=256, 10% loss", 4, 256, 4096, 0.10, 1e-4, 1e-4),
    ("8 workers, K=256, 10% loss", 8, 256, 2000, 0.10, 1e-4, 1e-3),
]


def run_case(workers: int, words: int, chunks: int, drop: float, latency: float, jitter: float, *,
             seed: int, rounds: int, slots: int = 64) -> dict:
    rng = np.random.default_rng(seed)
    pipeline = Pipeline()
    pipeline.add_job(JobConfig(5, workers, words, 0, slots, tuple(Member(w, ("w", w)) for w in range(workers))))
    payloads = [rng.integers(-(2**20), 2**20, size=chunks * words).astype(np.int32) for _ in range(workers)]
    net = VirtualNetwork(pipeline, rng, drop=drop, latency=latency, jitter=jitter)
    results, net, stats = run_transfers(pipeline, payloads, Op.ADD, job_id=5, words=words, slot_base=0, slots=slots,
                                        rng=rng, rounds=rounds, deadline=600.0, net=net,
                                        windows=[CongestionWindow(slots, CongestionSettings(fair=False))
                                                 for _ in range(workers)],
                                        rtts=[RttEstimator() for _ in range(workers)])
    want = expected(Op.ADD, payloads)
    if not all(np.array_equal(r, want) for per_worker in results for r in per_worker):
        raise SystemExit("a worker's sum is wrong")  # never: the model is for the sender's speed
    resent = sum(s.get("retransmissions", 0) for rnd in stats for s in rnd)
    timeouts = sum(s.get("timeouts", 0) for rnd in stats for s in rnd)
    return {"seconds": net.now / rounds, "resent": resent / (workers * chunks * rounds),
            "timeouts": timeouts / (workers * rounds)}


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="loss_model.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=between(1), default=3, help="seeds per case (default: 3)")
    ap.add_argument("--rounds", type=between(1), default=2, help="phases in a row per run (default: 2)")
    ap.add_argument("--out", type=out_path, default=default_out("loss_model.json"), help=out_help("loss_model.json"))
    args = ap.parse_args(argv)
    rows = []
    print(f"{'case':40s} {'s/round':>9s} {'(per seed)':>24s} {'resent':>8s} {'timeouts':>9s}")
    for name, *shape in CASES:
        start = time.perf_counter()
        runs = [run_case(*shape, seed=seed, rounds=args.rounds) for seed in range(args.seeds)]
        seconds = [r["seconds"] for r in runs]
        rows.append({"case": name, "workers": shape[0], "words": shape[1], "chunks": shape[2], "drop": shape[3],
                     "seconds_per_round": float(np.mean(seconds)), "seconds_per_seed": seconds,
                     "resent_share": float(np.mean([r["resent"] for r in runs])),
                     "timeouts_per_worker_round": float(np.mean([r["timeouts"] for r in runs]))})
        print(f"{name:40s} {np.mean(seconds):9.3f} {', '.join(f'{s:.3f}' for s in seconds):>24s} "
              f"{np.mean([r['resent'] for r in runs]):8.1%} {np.mean([r['timeouts'] for r in runs]):9.1f}"
              f"   [{time.perf_counter() - start:.0f} s]", flush=True)
    write_result(args.out, {"seeds": args.seeds, "rounds": args.rounds, "rows": rows},
                 command_line("benchmarks/loss_model.py", argv))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
