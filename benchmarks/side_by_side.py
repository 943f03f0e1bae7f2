"""Two Mininet experiments on one machine at once (root): each with its own run id, both must finish exact.

Starts `mininet/run.py` twice together, a star and a leaf/spine tree, every mode each; records each run's
id, exit status, exactness per mode and seconds, and checks that neither left a switch, host or link of
its run behind.  On a 2-core machine the two share the CPU, so their seconds say little: what counts is
that neither's start or clean-up touched the other's network.

    sudo .venv/bin/python benchmarks/side_by_side.py --bw 100
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hina.cliargs import OneLineParser, positive
from hina.provenance import command_line, default_out, out_help, out_path, write_result

RUN = Path(__file__).resolve().parent.parent / "mininet" / "run.py"
EXPERIMENTS = {"sbs": ["--workers", "4"], "sbt": ["--topology", "leafspine:2,1,2", "--oversubscription", "2"]}


def leftovers(run: str) -> list[str]:
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    procs = subprocess.run(["pgrep", "-af", f"mininet:{run}hw|{run}hsw"], capture_output=True, text=True).stdout
    return [line for line in links.splitlines() if f": {run}" in line] + procs.splitlines()


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="side_by_side.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bw", type=positive, default=100.0, help="Mbit/s per link of both (default: 100)")
    ap.add_argument("--length", type=int, default=400_000, help="elements per gradient (default: 400000)")
    ap.add_argument("--out", type=out_path, default=default_out("side_by_side.json"),
                    help=out_help("side_by_side.json"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hina-sbs-") as tmp:
        common = ["--mode", "all", "--bw", str(args.bw), "--length", str(args.length), "--density", "0.02",
                  "--rounds", "2", "--out", tmp]
        start = time.monotonic()
        procs = {run: subprocess.Popen([sys.executable, str(RUN), *extra, "--run-id", run, "--name", run, *common],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for run, extra in EXPERIMENTS.items()}
        rows = []
        for run, p in procs.items():
            out, err = p.communicate(timeout=1800)
            path = Path(tmp) / f"{run}.json"
            result = json.loads(path.read_text()) if path.exists() else {}
            rows.append({"run_id": run, "experiment": " ".join(EXPERIMENTS[run]), "status": p.returncode,
                         "exact": {r["mode"]: r["exact"] for r in result.get("runs", [])},
                         "seconds": {r["mode"]: r["seconds"] for r in result.get("runs", [])},
                         "verdicts": {r["mode"]: r["fidelity"]["verdict"] for r in result.get("runs", [])},
                         "wall_seconds": time.monotonic() - start, "leftovers": leftovers(run),
                         "stderr_tail": err.strip().splitlines()[-3:]})
            print(f"{run} ({' '.join(EXPERIMENTS[run])}): status {p.returncode}, exact {rows[-1]['exact']}",
                  file=sys.stderr)
    ok = all(r["status"] == 0 and r["exact"] and all(r["exact"].values()) and not r["leftovers"] for r in rows)
    write_result(args.out, {"bw": args.bw, "rows": rows, "ok": ok}, command_line("benchmarks/side_by_side.py", argv))
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
