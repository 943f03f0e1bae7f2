"""What a stranger's first run costs: a fresh clone's `make install` and `make demo`, and a wheel's first demo.

    python benchmarks/first_run.py [--out benchmarks/results/first_run.json]

From a clone of this checkout's commit into a temporary folder (nothing shared with this checkout: its
own .venv, its own compiled kernels):

1. `make install`, timed as its three steps: the virtual environment and pip (packages from the
   registry), `hina compile` (every kernel, each group in its own process), the corpus (fetched, or
   checked where ~/.cache/hina holds it);
2. `make demo` right after: the main job, its kernels loaded, not compiled;
3. the wheel built from the clone, installed into a fresh venv with no extras, and its first `hina
   demo` (the kernels compiled by the demo itself, before its switch and workers start);
4. the same wheel's first demo in another fresh venv, with two CPU-bound processes running beside it
   (the compile takes longer, and nothing may time out because of it).

Each step's wall seconds, and for the demos what they printed of their kernels and their verdict.
The clone is removed at the end.  Needs git, make, network for pip and the corpus (or their caches).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, log=print) -> dict[str, Any]:
    log(f"$ {' '.join(cmd)}  (in {cwd})")
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    out = proc.stdout + proc.stderr
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{out[-3000:]}")
    return {"command": " ".join(cmd), "seconds": seconds, "output": out[-4000:]}


def _burn(seconds: float) -> None:
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF


def _demo_facts(output: str) -> dict[str, Any]:
    compiled = re.search(r"compiling hina's kernels.*?finished in (\w+)", output, re.S)
    return {"exact": "exact:            yes" in output, "compiled_in": compiled.group(1) if compiled else None,
            "compiled": compiled is not None}


def main(argv: list[str] | None = None) -> int:
    from hina.cliargs import OneLineParser
    from hina.provenance import command_line, default_out, out_help, out_path, write_result

    ap = OneLineParser(prog="first_run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=out_path, default=default_out("first_run.json"), help=out_help("first_run.json"))
    ap.add_argument("--keep", action="store_true", help="leave the temporary clone and venvs in place")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="hina-first-run-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HINA_", "NUMBA_CACHE_DIR", "VIRTUAL_ENV"))}
    steps: dict[str, Any] = {}
    try:
        clone = work / "hina"
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        subprocess.run(["git", "clone", "--quiet", "--no-local", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", head], check=True)
        # make install, step by step: the venv and pip, the kernels, the corpus
        steps["install_venv"] = _timed(["make", "-s", "venv"], clone, env)
        steps["install_kernels"] = _timed(["make", "-s", "kernels"], clone, env)
        steps["install_corpus"] = _timed(["make", "-s", "corpus"], clone, env)
        steps["make_demo"] = _timed(["make", "-s", "demo"], clone, env)
        steps["make_demo"].update(_demo_facts(steps["make_demo"]["output"]))
        wheels = work / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(clone)],
                       check=True)
        wheel = next(wheels.glob("hina-*.whl"))
        for name, burners in (("wheel_demo", 0), ("wheel_demo_beside_two_cpu_hogs", 2)):
            venv = work / name
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], check=True, env=env)
            hogs = [mp.Process(target=_burn, args=(600.0,), daemon=True) for _ in range(burners)]
            for h in hogs:
                h.start()
            try:
                steps[name] = _timed([str(venv / "bin" / "hina"), "demo"], work, env)
            finally:
                for h in hogs:
                    h.terminate()
            steps[name].update(_demo_facts(steps[name]["output"]))
            steps[name]["cpu_hogs"] = burners
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    install = sum(steps[k]["seconds"] for k in ("install_venv", "install_kernels", "install_corpus"))
    result = {"commit": head, "install_seconds": install, "steps": steps}
    for name, step in steps.items():
        print(f"{name}: {step['seconds']:.1f} s" + (f", exact: {step['exact']}, compiled here: {step['compiled']}"
                                                    if "exact" in step else ""))
    write_result(args.out, result, command_line("benchmarks/first_run.py", argv))
    print(f"wrote {args.out}")
    return 0 if all(s.get("exact", True) for s in steps.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
