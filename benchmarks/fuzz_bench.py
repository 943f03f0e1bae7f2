"""A long run of the fuzz harness (switch_emulator/fuzz.py (hina.emulator.fuzz)): frames tried, failures, rate.

    python benchmarks/fuzz_bench.py --frames 5000000 [--seed 7]      (make fuzz)
"""

from __future__ import annotations

import sys
import time

from hina.cliargs import OneLineParser, between
from hina.emulator import fuzz as fuzz_harness
from hina.provenance import command_line, default_out, out_help, out_path, write_result


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="fuzz_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=between(1), default=2_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=out_path, default=default_out("fuzz_bench.json"), help=out_help("fuzz_bench.json"))
    args = ap.parse_args(argv)
    start = time.perf_counter()
    report = fuzz_harness.run(args.frames, args.seed, progress=lambda n: print(
        f"{n:,} frames, {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True))
    seconds = time.perf_counter() - start
    summary = {"frames": report.frames, "failures": len(report.failures), "victim_changed": report.victim_changed,
               "seconds": seconds, "frames_per_second": report.frames / seconds, "outputs": report.outputs,
               "drops": report.drops, "seed": args.seed}
    for failure in report.failures[:3]:
        print(failure, file=sys.stderr)
    print(f"{report.frames:,} frames in {seconds:.0f} s ({summary['frames_per_second']:,.0f}/s): "
          f"{len(report.failures)} failures, victim job {'CHANGED' if report.victim_changed else 'untouched'}")
    print(f"drops by reason: {report.drops}")
    write_result(args.out, summary, command_line("benchmarks/fuzz_bench.py", argv))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
