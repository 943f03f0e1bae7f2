"""A job's lease on a long-running switch: a job whose workers were killed frees its slots, then a new job runs.

Starts `python -m hina.emulator --lease L` on loopback, and the job's workers (`hina worker`, each joining
at the control port) with one of them missing, so the others wait in their first round; kills them;
watches `hina switch jobs --json` until the job is gone; then runs a job of another shape on the same
slots, which the switch would have refused while the dead job held them.  Records when the workers were
last heard, when the job was removed (and what the switch logged), and whether the new job was exact.

    python benchmarks/lease.py --lease 5 --workers 4
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from hina.cliargs import OneLineParser, between, positive
from hina.host.demo import expected_fixed
from hina.provenance import command_line, default_out, out_help, out_path, write_result


def start_switch(lease: float) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen([sys.executable, "-m", "hina.emulator", "--listen", "127.0.0.1:0", "--lease", str(lease)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"the emulator did not start: {proc.stderr.read()}")
    return proc, json.loads(line)


def worker(where: dict, rank: int, workers: int, length: int, out: Path | None = None) -> subprocess.Popen:
    data, control = where["data"], where["control"]
    cmd = [sys.executable, "-m", "hina", "worker", "--switch", f"{data[0]}:{data[1]}", "--control",
           f"{control[0]}:{control[1]}", "--rank", str(rank), "--workers", str(workers), "--length", str(length),
           "--density", "0.05", "--seed", "3", "--deadline", "60", "--json"]
    if out is not None:
        cmd += ["--out", str(out), "--out-dtype", "float64"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def jobs(where: dict) -> list[dict]:
    control = where["control"]
    out = subprocess.run([sys.executable, "-m", "hina", "switch", "jobs", "--control", f"{control[0]}:{control[1]}",
                          "--json"], capture_output=True, text=True, timeout=30)
    if out.returncode:
        raise RuntimeError(f"hina switch jobs: {out.stderr.strip()}")
    listing = json.loads(out.stdout)
    return listing["jobs"] if isinstance(listing, dict) else listing


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="lease.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lease", type=positive, default=5.0, help="the switch's lease, seconds (default: 5)")
    ap.add_argument("--workers", type=between(2, 32), default=4, help="the dead job's workers (default: 4)")
    ap.add_argument("--length", type=between(1), default=200_000, help="elements per gradient (default: 200000)")
    ap.add_argument("--out", type=out_path, default=default_out("lease.json"), help=out_help("lease.json"))
    args = ap.parse_args(argv)
    switch, where = start_switch(args.lease)
    tmp = args.out.parent / "lease-sums"
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        doomed = [worker(where, r, args.workers, args.length) for r in range(args.workers - 1)]  # one missing
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(j["members"] for j in jobs(where)):
            time.sleep(0.2)
        listed = jobs(where)
        time.sleep(1.0)
        for p in doomed:
            p.kill()
            p.wait()
        killed = time.monotonic()
        print(f"killed {len(doomed)} of {args.workers} workers of job {listed[0]['job_id']} (one never came)",
              file=sys.stderr)
        while jobs(where) and time.monotonic() - killed < args.lease + 60:
            time.sleep(0.1)
        freed = time.monotonic() - killed
        gone = not jobs(where)
        print(f"job removed {freed:.2f} s after its workers were killed (lease {args.lease:g} s)", file=sys.stderr)
        n = args.workers // 2  # another shape on the same slots: refused while the dead job held them
        procs = [worker(where, r, n, args.length, tmp / f"sum{r}.npy") for r in range(n)]
        status = [p.wait(120) for p in procs]
        fixed = expected_fixed(n, args.length, 0.05, 3)
        shifts = [json.loads(p.stdout.read().strip().splitlines()[-1])["rounds"][-1]["shift"] if s == 0 else None
                  for p, s in zip(procs, status)]
        exact = all(s == 0 and np.array_equal(np.load(tmp / f"sum{r}.npy"), fixed / 2.0 ** shifts[r])
                    for r, s in enumerate(status))
        print(f"a new job of {n} workers on the same slots: exact {exact}", file=sys.stderr)
    finally:
        switch.terminate()
        _, log = switch.communicate(timeout=10)
        for f in tmp.glob("sum*.npy"):
            f.unlink()
        tmp.rmdir()
    removed = [line for line in log.splitlines() if "removed" in line]
    result = {"lease": args.lease, "workers": args.workers, "listed_before": listed, "removed": gone,
              "freed_after_kill_s": freed, "switch_log": removed, "new_job_workers": n, "new_job_exact": exact}
    write_result(args.out, result, command_line("benchmarks/lease.py", argv))
    print(f"wrote {args.out}")
    return 0 if gone and exact else 1


if __name__ == "__main__":
    sys.exit(main())
