"""The main job's output as a result file: `hina demo` run once, its summary kept for README.

    python benchmarks/demo_result.py [hina demo flags]     # default: make demo's job, 3 rounds, 1% loss

Writes demo.json (`--out PATH`; default: in $HINA_RESULTS, else hina-results/): the demo's JSON
summary under `summary`, with the command, machine, date and commit; `tools/tables.py` prints it in
README as `hina demo` does.
Exits 1 unless every worker was exact.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from hina.host.cli import build_parser, demo_config
from hina.host.demo import format_summary, run_demo
from hina.provenance import command_line, default_out, dirty_refusal, out_help, write_result

DEFAULT = ["--workers", "4", "--length", "4194304", "--density", "0.01", "--mode", "auto", "--rounds", "3",
           "--drop", "0.01"]


def main(argv: list[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    argv = list(given)
    out = default_out("demo.json")
    if "--out" in argv:
        at = argv.index("--out")
        if at + 1 >= len(argv):
            print("demo_result.py: argument --out: expected a path", file=sys.stderr)
            return 2
        out = Path(argv[at + 1])
        del argv[at : at + 2]
        why = dirty_refusal(out)  # before the run, as out_path refuses it elsewhere
        if why:
            print(f"demo_result.py: argument --out: {why}", file=sys.stderr)
            return 2
    if {"-h", "--help"} & set(argv):  # its own flag, then the demo's
        print(f"usage: demo_result.py [--out PATH] [hina demo flags]\n\n{__doc__.strip()}\n\n"
              f"  --out PATH  {out_help('demo.json')}\n\nthe flags of `hina demo`:\n")
    flags = argv or DEFAULT
    args = build_parser().parse_args(["demo", *flags])  # the demo's own checks: one line, status 2
    try:
        cfg = demo_config(args)
    except ValueError as exc:
        print(f"demo_result.py: {exc}", file=sys.stderr)
        return 2
    summary = run_demo(cfg, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(format_summary(summary))
    write_result(out, {"demo": shlex.join(["hina", "demo", *flags]), "summary": summary},
                 command_line("benchmarks/demo_result.py", given))
    print(f"wrote {out}")
    return 0 if summary["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
