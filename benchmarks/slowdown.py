"""Each system's slowdown under a straggler or cross-traffic: two compare.py results side by side.

    python benchmarks/slowdown.py BASE.json HETERO.json [--out NAME.md]

BASE and HETERO are compare.py results of the same presets, systems and
link rates, HETERO with --straggler / --cross / --host-bw (its meta says
which).  Per Mininet (env, preset, system): seconds in each, the ratio,
for a straggler the time lost beyond its delay (HETERO - BASE - the
largest start delay: what the system adds to the wait nobody can avoid),
the most any worker waited, and both runs' fidelity verdicts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hina.benchmarks.compare import label
from hina.cliargs import OneLineParser
from hina.provenance import out_path

ROOT = Path(__file__).resolve().parent.parent


def largest_delay(meta: dict, workers: int) -> float:
    """The straggler's largest start delay in seconds (the first round's draw; 0 without one)."""
    from hina.mininet import heterogeneity

    het = meta.get("heterogeneity") or {}
    if not het.get("straggler"):
        return 0.0
    draws = heterogeneity.straggler_delays(het["straggler"], workers, het.get("compute", 0.0), 0, 1)
    return max(draws[0])


def table(base: dict, hetero: dict) -> tuple[list[dict], str]:
    find = {(r["env"], r["preset"], r["mode"]): r for r in base["rows"]}
    delay = largest_delay(hetero["meta"], hetero["meta"]["workers"])
    rows = []
    for h in hetero["rows"]:
        b = find.get((h["env"], h["preset"], h["mode"]))
        if b is None or not h["env"].startswith("mininet"):
            continue
        waited = max(h.get("workers_waited") or [float("nan")])
        rows.append({"env": h["env"], "preset": h["preset"], "mode": h["mode"], "base_seconds": b["seconds"],
                     "seconds": h["seconds"], "slowdown": h["seconds"] / b["seconds"],
                     "lost_beyond_delay": h["seconds"] - b["seconds"] - delay if delay else None,
                     "most_waited": waited, "base_fidelity": b.get("fidelity"), "fidelity": h.get("fidelity")})
    het = hetero["meta"].get("heterogeneity") or {}
    what = ", ".join(f"{k} {v}" for k, v in het.items() if v)
    lines = [f"Base: `{base['meta']['command']}` ({base['meta']['date']}); with {what or 'nothing'}: "
             f"`{hetero['meta']['command']}` ({hetero['meta']['date']}), on {hetero['meta']['machine']}.",
             "", "| env | model | system | seconds (base) | seconds (with) | slowdown | lost beyond the delay | "
             "most a worker waited | fidelity (base / with) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lost = "" if r["lost_beyond_delay"] is None else f"{r['lost_beyond_delay']:+.3f} s"
        waited = "" if r["most_waited"] != r["most_waited"] else f"{r['most_waited']:.3f} s"
        lines.append(f"| {r['env']} | {r['preset']} | {label(r['mode'])} | "
                     f"{r['base_seconds']:.3f} | {r['seconds']:.3f} | {r['slowdown']:.2f}x | {lost} | {waited} | "
                     f"{r['base_fidelity']} / {r['fidelity']} |")
    if delay:
        lines += ["", f"The straggler's largest start delay: {delay:.3f} s; \"lost beyond the delay\" is the "
                      "seconds with it less the base seconds less that delay."]
    return rows, "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="slowdown.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("base", type=Path)
    ap.add_argument("hetero", type=Path)
    ap.add_argument("--out", type=out_path, help="write the markdown (and NAME.json) here")
    args = ap.parse_args(argv)
    try:
        base, hetero = (json.loads(p.read_text()) for p in (args.base, args.hetero))
    except (OSError, ValueError) as exc:
        ap.error(str(exc))
    rows, text = table(base, hetero)
    print(text)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps({"base": str(args.base), "with": str(args.hetero),
                                                             "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
