"""Every benchmark table in README.md and docs/ is generated here, from `benchmarks/results/*.json`.

    python tools/tables.py            # rewrite every generated table in README.md and docs/*.md
    python tools/tables.py --check    # exit 1 naming each table that differs from its JSON (tests run this)
    python tools/tables.py --list     # the table names, and the page that shows each

A page asks for a table with two markers; what lies between them is this script's:

    <!-- table: codec-case -->
    ...
    <!-- end table -->

So re-running a benchmark and then this script updates every page that shows its figures, and a
figure typed by hand into a generated table fails the test suite.  Under each table a line names
the result file, its command, machine, date and commit (`provenance.meta_of`).  Where a page sums
a table up in a sentence, the sentence is generated here too, as the table's last line (`summary`
lines: the headline, the leaves against the spine, the torch backend against numba), so that prose
beside a table cannot drift from it; figures quoted further away are checked by
tests/docs/test_docs.py against the same JSON.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import campaign
from result_files import (
    LEAVES_RUNS,
    PRESETS,
    ROOT,
    TREE_RUNS,
    fidelity_line,
    load,
    short_verdict,
    systems,
    verdict_text,
)

from hina.baselines import registry
from hina.cliargs import OneLineParser
from hina.provenance import NOT_RECORDED, meta_of, source_line

MARKER = re.compile(r"(<!-- table: ([a-z0-9-]+) -->\n)(.*?)(<!-- end table -->)", re.S)
TABLES: dict[str, Callable[[], str]] = {}


def table(name: str):
    def register(fn: Callable[[], str]) -> Callable[[], str]:
        TABLES[name] = fn
        return fn
    return register


def rows_md(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(c) for c in r) + " |" for r in rows)]


def source(name: str, data: dict) -> str:
    """`provenance.source_line`, or for a result written before results kept their provenance (no machine,
    date or commit at all) a line that says so once instead of three "not recorded"s."""
    m = meta_of(data)
    if not all(m[k] == NOT_RECORDED for k in ("machine", "date", "commit")):
        return source_line(name, data)
    command = m["command"]
    if command != NOT_RECORDED and not command.startswith(("python", "sudo", ".venv", "make")):
        command = "python " + (command if "/" in command.split()[0] else f"benchmarks/{command}")
    versions = ", ".join(f"{k} {data[k]}" for k in ("torch",) if isinstance(data.get(k), str))
    return (f"Source: `benchmarks/results/{name}`, from `{command}`" + (f" ({versions})" if versions else "")
            + ", recorded before provenance was kept: its machine, date and commit are unknown.")


def block(lines: list[str], *sources: tuple[str, dict]) -> str:
    """The table's lines, then per result file its source line and, for a Mininet run, what set its time."""
    tail = []
    for name, data in sources:
        tail.append(source(name, data))
        fidelity = fidelity_line(data)
        if fidelity:
            tail.append(fidelity)
    return "\n".join([*lines, "", *tail]) + "\n"


def mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def times(x: float) -> str:
    """A speedup as prose gives it: 2.5x, 34x."""
    return f"{x:.1f}x" if x < 10 else f"{x:.0f}x"


def span(values: list[float], fmt: str = ".2f") -> str:
    """A range as prose gives it: 1.64-1.76, or one figure where both ends print alike."""
    lo, hi = f"{min(values):{fmt}}", f"{max(values):{fmt}}"
    return lo if lo == hi else f"{lo}-{hi}"


def and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# -- the comparison (benchmarks/compare.py) ---------------------------------------------------------

# the result file and environment README's headline shows: the comparison at the rate --calibrate found
# network-bound for dense aggregation of 8 workers (docs/fidelity.md)
HEADLINE = ("compare_faithful.json", f"mininet {int(campaign.STAR_MBPS) / 1000:g} Gbit/s")


def compare_cells(name: str, env: str, with_verdict: bool) -> tuple[list[str], list[list], dict]:
    data = load(name)
    rows = {(r["preset"], r["mode"]): r for r in data["rows"] if r["env"] == env}
    presets = [p for p in PRESETS if any(k[0] == p for k in rows)]
    out = []
    for mode, label in systems():
        cells = []
        for p in presets:
            r = rows.get((p, mode))
            if r is None:
                cells.append("-")
                continue
            text = f"{r['seconds']:.3f} s, {mb(r['bytes_per_worker'])}"
            if not r.get("exact", True) and r.get("system") != "baseline":
                text += " **NOT EXACT**"
            if with_verdict:
                text += f" ({short_verdict(r)})"
            cells.append(text)
        if any(c != "-" for c in cells):
            out.append([label, *cells])
    header = ["system", *(f"{p} ({data['meta']['scales'][p]} scale)" for p in presets)]
    return header, out, data


def compare_summary_line(data: dict, env: str) -> str:
    """One sentence on a compare.py result: hina auto against the fastest lossless baseline and dense where it
    ran sparse, against dense where it ran dense, and dense in-network aggregation against gloo's ring."""
    rows = {(r["preset"], r["mode"]): r for r in data["rows"] if r["env"] == env}
    label = dict(systems())
    presets = [p for p in PRESETS if (p, "auto") in rows and (p, "dense") in rows]
    sparse = [p for p in presets if rows[p, "auto"].get("encoding") != "dense"]
    dense = [p for p in presets if p not in sparse]
    text = []
    if sparse:
        best = []
        for p in sparse:
            lossless = [(rows[p, m]["seconds"], m) for m, _ in systems()
                        if (p, m) in rows and rows[p, m].get("system") == "baseline" and not registry.lossy(m)]
            best.append(min(lossless))
        text.append(f"Where hina auto ran sparse ({and_list(sparse)}) it was "
                    f"{and_list([times(s / rows[p, 'auto']['seconds']) for p, (s, _) in zip(sparse, best)])} faster "
                    f"than the fastest lossless baseline ({and_list([label[m] for _, m in best])}) and "
                    f"{and_list([times(rows[p, 'dense']['seconds'] / rows[p, 'auto']['seconds']) for p in sparse])} "
                    "faster than dense in-network aggregation")
    if dense:
        text.append(("; where" if text else "Where") + f" it ran dense ({and_list(dense)}) it took "
                    f"{span([rows[p, 'auto']['seconds'] / rows[p, 'dense']['seconds'] for p in dense])} of dense's "
                    "seconds")
    ring = [p for p in presets if (p, "ring") in rows]
    if ring:
        bound = [p for p in ring for m in ("dense", "ring") if verdict_text(rows[p, m]).startswith("network-bound")]
        text.append(f". Dense in-network aggregation was "
                    f"{span([rows[p, 'ring']['seconds'] / rows[p, 'dense']['seconds'] for p in ring])}x faster than "
                    f"gloo's ring on {'every model' if len(ring) == len(PRESETS) else and_list(ring)}, and "
                    + ("every dense and ring run was network-bound" if len(bound) == 2 * len(ring) else
                       f"{len(bound)} of its {2 * len(ring)} dense and ring runs were network-bound"))
    return "".join(text) + "."


@table("headline")
def headline() -> str:
    name, env = HEADLINE
    header, cells, data = compare_cells(name, env, with_verdict=True)
    lines = [f"{data['meta']['workers']} workers, {env}; best of {data['meta']['rounds']} rounds, bytes sent per "
             "worker, and what set each run's time by the fidelity monitor's verdict (network: the busiest link at "
             ">= 90% of its rate while sending; CPU: a process or the whole machine).", "",
             *rows_md(header, cells), "", compare_summary_line(data, env)]
    return block(lines, (name, data))


@table("compare-summary")
def compare_summary() -> str:
    data = load("compare.json")
    envs = list(dict.fromkeys(r["env"] for r in data["rows"]))
    lines = []
    for env in envs:
        header, cells, _ = compare_cells("compare.json", env, with_verdict=False)
        lines += [f"**{env}**", "", *rows_md(header, cells), ""]
    return block(lines[:-1], ("compare.json", data))


@table("compare")
def compare_full() -> str:
    from hina.benchmarks import compare

    data = load("compare.json")
    text = compare.markdown(data["rows"], data["auto_rule"], data["meta"])
    lines = [line for line in text.splitlines() if not line.startswith("Measured ")]
    while lines and not lines[0]:
        lines.pop(0)
    return block(lines, ("compare.json", data))


# -- the codec (benchmarks/codec_bench.py) -------------------------------------------------------

@table("codec-case")
def codec_case() -> str:
    from hina.benchmarks import codec_bench

    data = load("codec_bench_numba_2e25.json")  # the headline case, run on the codec with its kernel seam
    rows = [r for r in data["rows"] if r["kind"] == "uniform" and r["length"] == 1 << 25 and r["density"] == 0.01
            and r["workers"] == 8]
    body = [[f"{r['mode']} ({codec_bench.encoding_label(r)})", f"{r['encode_x_copy']:.2f}",
             f"{r['decode_x_copy']:.2f}", f"{r['first_encode_x_copy']:.2f} / {r['first_decode_x_copy']:.2f}",
             f"{r['bytes_per_bound']:.3f}", f"{r['bytes_per_dense']:.1%}", "yes" if r["exact"] else "**NO**"]
            for r in rows]
    copy_ms = 1e3 * rows[0]["copy_s"] if rows else float("nan")
    lines = [f"d = 2^25, 1% per worker, 8 workers ({rows[0]['union_density']:.1%} union); a numpy copy of the d "
             f"float32 values took {copy_ms:.1f} ms in the same run.", "",
             *rows_md(["mode (ran)", "encode / copy", "decode / copy", "first aggregation enc / dec",
                       "bytes / bound", "bytes / dense", "exact"], body), "",
             "Targets:", "", *(f"- {codec_bench.target_line(t)}" for t in data["targets"])]
    return block(lines, ("codec_bench_numba_2e25.json", data))


@table("codec-all")
def codec_all() -> str:
    from hina.benchmarks import codec_bench

    data = load("codec_bench.json")
    return block([codec_bench.markdown_table(data["rows"])], ("codec_bench.json", data))


@table("codec-torch-cpu")
def codec_torch_cpu() -> str:
    """docs/gpu.md: the torch backend on CPU tensors beside numba at d = 2^22."""
    return torch_beside_numba("codec_bench_torch_cpu.json", "codec_bench_numba_2e22.json")


@table("codec-torch-cpu-2e25")
def codec_torch_cpu_2e25() -> str:
    """docs/gpu.md: the same at d = 2^25."""
    return torch_beside_numba("codec_bench_torch_cpu_2e25.json", "codec_bench_numba_2e25.json")


def torch_beside_numba(torch_file: str, numba_file: str) -> str:
    """The torch backend's codec_bench rows beside numba's, the same cases, each against its own copy."""
    from hina.benchmarks import codec_bench

    torch_run, numba_run = load(torch_file), load(numba_file)
    ref = {(r["case"], r["workers"], r["mode"]): r for r in numba_run["rows"]}
    pairs = [(ref[key], r) for r in torch_run["rows"] if (key := (r["case"], r["workers"], r["mode"])) in ref]

    def ms(row: dict, key: str) -> str:
        return f"{1e3 * row[key]:.1f}"

    body = [[f"{r['case']} ({r['union_density']:.1%} union)", f"{r['mode']} ({codec_bench.encoding_label(r)})",
             f"{ms(n, 'encode_s')} / {ms(r, 'encode_s')}", f"{ms(n, 'decode_s')} / {ms(r, 'decode_s')}",
             f"{n['encode_x_copy']:.1f} / {r['encode_x_copy']:.1f}",
             f"{n['decode_x_copy']:.1f} / {r['decode_x_copy']:.1f}",
             f"{r['first_encode_x_copy']:.1f} / {r['first_decode_x_copy']:.1f}",
             "yes" if r["exact"] and n["exact"] else "**NO**"] for n, r in pairs]
    copies = dict.fromkeys(f"{r['case']}: numpy {1e3 * n['copy_s']:.2f} ms, torch {1e3 * r['copy_s']:.2f} ms"
                           for n, r in pairs)
    slower = {kind: [r[f"{kind}_s"] / n[f"{kind}_s"] for n, r in pairs if r["mode"] in ("aligned", "sketch")]
              for kind in ("encode", "decode")}
    lines = [f"N = 8, worker 0, best of the steady-state aggregations; numba / torch on CPU tensors "
             f"({torch_run['meta'].get('torch_threads', '?')} torch thread). The copies of the d float32 values each "
             f"ratio divides by, timed in the same runs: {'; '.join(copies)}.", "",
             *rows_md(["case", "mode (ran)", "encode ms", "decode ms", "encode / copy", "decode / copy",
                       "torch first aggregation enc / dec (x copy)", "exact"], body), "",
             f"The torch backend against numba, steady state, the aligned and sketch modes: "
             f"{span(slower['encode'], '.0f')}x numba's time to encode, {span(slower['decode'], '.0f')}x to decode."]
    return block(lines, (numba_file, numba_run), (torch_file, torch_run))


@table("capture-torch")
def capture_torch() -> str:
    data = load("capture_torch.json")
    body = []
    for c in data["cases"]:
        real, gen, cod = c["real"], c["generated"], c.get("codec", {})
        codec_text = (f"{'exact' if cod.get('exact') else 'NOT EXACT'}, "
                      f"{cod['bytes_per_worker']['total'] / cod['dense_bytes']:.0%} of dense bytes") if cod else "-"
        body.append([c["model"], f"{real['per_worker']:.2%} / {real['union']:.2%}",
                     f"{gen['per_worker']:.2%} / {gen['union']:.2%}", codec_text])
    return block(rows_md(["model", "real: per worker / union", "generator: per worker / union", "codec"], body),
                 ("capture_torch.json", data))


# -- the switch emulator (benchmarks/emulator_bench.py, switch_bench.py) --------------------------

@table("emulator-rate")
def emulator_rate() -> str:
    data = load("emulator_bench.json")
    rate = {(r["server"], r["words"], r["pipes"]): r["achieved_pps"] for r in data["packet_rate"]}
    words = sorted({r["words"] for r in data["packet_rate"]})
    pipes = sorted({r["pipes"] for r in data["packet_rate"]})
    header = ["K", "P = 1", "P = 1, `--no-batch`", *(f"P = {p}" for p in pipes if p > 1)]
    body = []
    for k in words:
        def cell(kind: str, p: int) -> str:
            r, echo = rate.get((kind, k, p)), rate.get(("echo", k, p))
            return f"{r / 1e3:.0f}k pkt/s, {r / echo:.2f} of echo" if r and echo else "-"
        body.append([f"{k:,}", cell("emulator", 1), cell("emulator-per-packet", 1),
                     *(cell("emulator", p) for p in pipes if p > 1)])
    return block(rows_md(header, body), ("emulator_bench.json", data))


@table("emulator-e2e")
def emulator_e2e() -> str:
    data = load("emulator_bench.json")
    e2e = data["end_to_end"]
    by = {(r["density"], r["mode"]): r for r in e2e}
    body = []
    for d in sorted({r["density"] for r in e2e}):
        dense, blocks, auto = (by.get((d, m)) for m in ("dense", "blocks", "auto"))
        if not (dense and auto):
            continue
        best = min(x["seconds"] for x in (dense, blocks) if x)
        body.append([f"{d:.1%}", f"{dense['seconds']:.3f} s", f"{blocks['seconds']:.3f} s" if blocks else "-",
                     f"{auto['seconds']:.3f} s ({auto.get('encoding', '?')})",
                     f"{dense['seconds'] / auto['seconds']:.1f}x", f"{auto['seconds'] / best:.2f}",
                     "yes" if all(x["exact"] for x in (dense, blocks, auto) if x) else "**NO**"])
    w, n = e2e[0]["workers"], e2e[0]["length"]
    lines = [f"{w} workers, d = 2^{n.bit_length() - 1}, loopback; steady state (best round after the first).", "",
             *rows_md(["density per worker", "dense", "blocks", "auto (ran)", "auto vs dense",
                       "auto / best of dense, blocks", "exact"], body)]
    for r in data.get("pipes_end_to_end", []):
        lines += ["", f"Pipes, {r['workers']} workers, d = 2^{r['length'].bit_length() - 1} at {r['density']:.0%}: "
                      f"P = {r['pipes']} {r['mode']} {r['seconds']:.3f} s "
                      f"({r['dense_equivalent_gbps']:.2f} Gbit/s dense-equivalent), exact: {r['exact']}."]
    lines += ["", "Targets:", "", *(f"- {t}" for t in data.get("targets", []))]
    return block(lines, ("emulator_bench.json", data))


def switch_bench_block(name: str) -> str:
    from hina.benchmarks import switch_bench

    data = load(name)
    return block(switch_bench.markdown(data["rows"], data.get("bmv2_missing"), data["config"],
                                       data.get("fast_bmv2_missing"), data.get("xdp_missing")).splitlines(),
                 (name, data))


@table("switch-bench")
def switch_bench_table() -> str:
    return switch_bench_block("switch_bench.json")


@table("switch-bench-lossless")
def switch_bench_lossless_table() -> str:
    return switch_bench_block("switch_bench_lossless/switch_bench.json")


@table("budget")
def budget_table() -> str:
    """docs/budget.md: where the CPU goes per megabyte aggregated on the 8-worker star, both data paths, beside
    the kernel alone."""
    from hina.benchmarks import budget

    data = load("budget.json")
    return block(budget.markdown(data), ("budget.json", data))


# -- the sender (sender_bench.py, loss_model.py) ----------------------------------------------------

@table("sender")
def sender() -> str:
    data = load("sender_bench.json")
    body = [[f"{r['words']:,}", f"{r['receive_us_per_chunk']:.2f}",
             f"{r['take_us_per_chunk']:.2f}" if "take_us_per_chunk" in r else "-", f"{r['copy_us_per_chunk']:.3f}",
             f"{r['take_us_per_chunk'] / r['copy_us_per_chunk']:.1f}x" if "take_us_per_chunk" in r else "-"]
            for r in data["rows"]]
    return block(rows_md(["K", "`receive`, us per chunk", "`take`, us per chunk", "memory copy, us per chunk",
                          "`take` / copy"], body), ("sender_bench.json", data))


@table("loss-model")
def loss_model() -> str:
    data = load("loss_model.json")
    body = [[r["case"], f"{r['seconds_per_round']:.3f}", ", ".join(f"{x:.3f}" for x in r["seconds_per_seed"]),
             f"{r['resent_share']:.1%}", f"{r['timeouts_per_worker_round']:.1f}"] for r in data["rows"]]
    lines = [f"Virtual seconds per round, {data['seeds']} seeds x {data['rounds']} rounds each; every sum exact.", "",
             *rows_md(["case", "seconds per round (mean)", "per seed", "resent per useful frame",
                       "timeouts per worker and round"], body)]
    return block(lines, ("loss_model.json", data))


@table("first-run")
def first_run() -> str:
    """docs/contributing.md: a fresh clone's make install (per step) and make demo, and a wheel's first demos."""
    name = "first_run.json"
    data = load(name)
    steps = data["steps"]
    what = {"install_venv": "`make install`: the venv and pip", "install_kernels": "`make install`: `hina compile`",
            "install_corpus": "`make install`: the corpus", "make_demo": "`make demo` after it",
            "wheel_demo": "the wheel's first `hina demo` (a fresh venv)",
            "wheel_demo_beside_two_cpu_hogs": "the same beside two CPU-bound processes"}
    rows = []
    for key, label in what.items():
        step = steps[key]
        compiled = ("-" if "compiled" not in step else
                    f"yes, {step['compiled_in']}" if step["compiled"] else "no: loaded")
        exact = "-" if "exact" not in step else ("yes" if step["exact"] else "NO")
        rows.append([label, f"{step['seconds']:.1f}", compiled, exact])
    lines = rows_md(["step", "wall s", "kernels compiled by the demo", "exact"], rows)
    lines += ["", f"`make install` in all: {data['install_seconds']:.0f} s."]
    return block(lines, (name, data))


@table("demo")
def demo() -> str:
    from hina.host.demo import format_summary

    data = load("demo.json")
    text = ["```text", f"$ {data['demo']}", format_summary(data["summary"]), "```"]
    return block(text, ("demo.json", data))


# -- reliability (reliability_bench.py, soak.py, fuzz_bench.py) -----------------------------------

@table("reliability")
def reliability() -> str:
    data = load("reliability_bench.json")
    body = [[f"{r['drop']:.1%}", f"{r['dup']:.0%} / {r['reorder']:.0%}", r["mode"], f"{r['seconds']:.3f}",
             f"{r['packets_per_useful_packet']:.3f}", f"{r['retransmissions']:,}", "yes" if r["exact"] else "**NO**"]
            for r in data["rows"]]
    return block(rows_md(["drop (each direction)", "dup / reorder", "mode", "seconds",
                          "packets sent per useful packet", "retransmissions", "exact"], body),
                 ("reliability_bench.json", data))


@table("soak-fuzz")
def soak_fuzz() -> str:
    soak, fuzz = load("soak.json"), load("fuzz_bench.json")
    rss = soak["rss_kib"]
    w0, w1 = rss["start"]["workers"], rss["end"]["workers"]
    body = [["fuzzing", f"{fuzz['frames']:,} random and mutated frames: {fuzz['failures']} failures, idle job "
                        f"{'CHANGED' if fuzz['victim_changed'] else 'untouched'}, "
                        f"{fuzz['frames_per_second']:,.0f} frames/s"],
            ["soak", f"{soak['workers']} workers, d = {soak['length']:,}, {soak['drop']:.0%} drop + {soak['dup']:.0%} "
                     f"dup + {soak['reorder']:.0%} reorder: {soak['rounds']} rounds in {soak['seconds']:.0f} s, "
                     f"every result exact: {'yes' if soak['all_exact'] else '**NO**'}; emulator RSS "
                     f"{rss['start']['switch'] / 1024:.1f} -> {rss['end']['switch'] / 1024:.1f} MiB, workers "
                     f"{min(w0) / 1024:.0f}-{max(w0) / 1024:.0f} -> {min(w1) / 1024:.0f}-{max(w1) / 1024:.0f} MiB"]]
    return block(rows_md(["test", "result"], body), ("fuzz_bench.json", fuzz), ("soak.json", soak))


# -- training (train_ddp.py) ----------------------------------------------------------------------

@table("train-ddp")
def train_ddp() -> str:
    body, sources = [], []
    for name in ("train_ddp.json", "train_ddp_mininet.json"):
        data = load(name)
        sources.append((name, data))
        env = "loopback" if data["env"] == "loopback" else data["env"].split(":")[0]
        by = {(r["model"], r["workers"], r["backend"]): r for r in data["table"]}
        for (model, workers, backend), r in by.items():
            if backend != "hina":
                continue
            gloo, dense = by.get((model, workers, "gloo")), by.get((model, workers, "hina-dense"))

            def cell(x: dict | None) -> str:
                return f"{x['seconds_per_iteration']:.3f} ({x['comm_seconds']:.3f})" if x and "error" not in x else "-"

            def ratio(key: str) -> str:
                it, comm = r.get(f"speedup_vs_{key}"), r.get(f"comm_speedup_vs_{key}")
                return f"{it:.2f}x / {comm:.2f}x" if it and comm else "-"

            same = all(x.get("identical_every_step") for x in (r, gloo, dense) if x)
            body.append([env, model, workers, cell(gloo), cell(r), cell(dense), ratio("gloo"), ratio("hina-dense"),
                         "yes" if same else "**NO**"])
    return block(rows_md(["env", "model", "N", "gloo s/iter (comm)", "hina auto (comm)", "hina dense (comm)",
                          "hina vs gloo, iter / comm", "hina vs dense, iter / comm",
                          "parameters identical on every rank"], body), *sources)


# -- hina on ns-3 (benchmarks/ns3_scale.py) --------------------------------------------------------

def _ns3_cell(r: dict | None) -> str:
    if r is None:
        return "-"
    return f"{r['seconds'] * 1e3:.3f} / {r['model_seconds'] * 1e3:.3f} ({r['ratio']:.3f})"


def _ns3_cross(name: str) -> str:
    data = load(name)
    rows = data["rows"]
    by = {(r["preset"], r["fabric"], r["workers"], r["mode"]): r for r in rows}
    keys = list(dict.fromkeys((r["preset"], r["fabric"], r["workers"]) for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    body = [[name, fab, n, *(_ns3_cell(by.get((name, fab, n, m))) for m in modes)] for name, fab, n in keys]
    ratios = [r["ratio"] for r in rows if r["workers"] >= 64]
    lines = rows_md(["preset", "fabric", "workers", *(f"{m}: ns-3 / model ms (ratio)" for m in modes)], body)
    lo, hi = f"{min(ratios):.3f}", f"{max(ratios):.3f}"
    n = len(ratios)
    spread = f"is {lo} at all {n} points" if lo == hi else f"lies between {lo} and {hi} over {n} points"
    lines += ["", f"From 64 to {max(r['workers'] for r in rows):,} workers, ns-3 / model {spread}; "
                  f"{sum(r['retransmissions'] for r in rows)} retransmissions and {sum(r['drops'] for r in rows)} "
                  f"drops in all of them.{_ns3_checked(rows)}"]
    return block(lines, (name, data))


def _ns3_checked(rows: list[dict]) -> str:
    """What the rows say of their sums and of the model's domain (nothing for rows that sent zeros)."""
    if not all("exact" in r for r in rows):
        return ""
    exact = sum(bool(r["exact"]) for r in rows)
    inside = sum(bool(r["model_in_domain"]) for r in rows)
    return (f" Every worker's result was numpy's sum in {exact} of {len(rows)} points (real words, every result "
            f"checked); {inside} of {len(rows)} lie in the scale model's domain.")


@table("ns3-cross-check")
def ns3_cross_check() -> str:
    """docs/ns3.md: every point of the cross-check at 100 Gbit/s, ns-3 beside the scale model."""
    return _ns3_cross("ns3_scale.json")


@table("ns3-10g")
def ns3_10g() -> str:
    """docs/ns3.md: the same at 10 Gbit/s, DeepLight."""
    return _ns3_cross("ns3_10g.json")


@table("ns3-at-1024")
def ns3_at_1024() -> str:
    """docs/ns3.md: the speedup over dense and where hina auto's time goes at the largest worker count."""
    data = load("ns3_scale.json")
    rows = data["rows"]
    top = max(r["workers"] for r in rows)
    sp = {(s["preset"], s["fabric"]): s for s in data["speedups"] if s["workers"] == top}
    body = []
    for r in rows:
        if r["workers"] != top or r["mode"] != "auto":
            continue
        s = sp.get((r["preset"], r["fabric"]))
        secs = [x["seconds"] * 1e3 for x in r["rounds"]]
        index = sum(secs[1:-1]) if len(secs) > 2 else 0.0
        body.append([r["preset"], r["fabric"], r["encoding"], f"{secs[0]:.3f}", f"{index:.3f}",
                     f"{secs[-1] if len(secs) > 1 else 0.0:.3f}", f"{r['seconds'] * 1e3:.3f}",
                     f"{s['ns3']:.2f}x / {s['model']:.2f}x / {s['model_cap2048']:.2f}x" if s else "-",
                     r["retransmissions"], r["drops"], r["root_max_queue"], r["max_queue"], f"{r['wall_seconds']:.0f}"])
    lines = rows_md(["preset", "fabric", "auto runs", "first round ms", "index ms", "values ms", "total ms",
                     "over dense: ns-3 / model / model at cap 2048", "retransmissions", "drops",
                     "deepest root queue (packets)", "deepest switch queue", "wall s"], body)
    return block(lines, ("ns3_scale.json", data))


@table("ns3-every-chunk")
def ns3_every_chunk() -> str:
    """docs/ns3.md: runs with every chunk of every round on both simulators (no extrapolation)."""
    from hina.benchmarks.ns3_scale import exact_cell

    body, sources = [], []
    for name in ("ns3_every_chunk.json", "ns3_full.json"):
        data = load(name)
        sources.append((name, data))
        for r in data["rows"]:
            chunks = sum(x["chunks"] for x in r["rounds"])
            body.append([r["preset"], r["fabric"], r["workers"], f"{r['mode']} ({r['encoding']})", f"{chunks:,}",
                         f"{r['frames']:,}", f"{r['seconds'] * 1e3:.3f}", f"{r['model_seconds'] * 1e3:.3f}",
                         f"{r['ratio']:.3f}", f"{r['model_seconds_cap2048'] * 1e3:.3f}", r["retransmissions"],
                         exact_cell(r), f"{r['wall_seconds']:.0f}"])
    lines = rows_md(["preset", "fabric", "workers", "mode", "chunks per worker", "UPDATEs sent (all workers)",
                     "ns-3 ms", "model ms", "ratio", "model ms, capped at 2048", "retransmissions", "exact",
                     "ns-3 wall s"], body)
    return block(lines, *sources)


@table("ns3-shallow")
def ns3_shallow() -> str:
    """docs/ns3.md: racks of 32 under oversubscribed uplinks whose switch ports queue 16 or 32 packets, every
    chunk: ns-3, and the scale model's time if the ports held, with its verdict on its domain."""
    from hina.benchmarks.ns3_scale import domain_cell, exact_cell

    runs = [(name, load(name)) for name in ("ns3_uplink50.json", "ns3_shallow.json")]
    body = []
    for _name, data in runs:
        p = data["parameters"]
        uplinks = f"{p['spines']} x {p['uplink_gbps']:g} Gbit/s, {p['queue']}-packet ports"
        for r in data["rows"]:
            held = r["model_seconds"]  # the model's time if the ports held
            body.append([r["workers"], uplinks, f"{r['mode']} ({r['encoding']})", f"{r['oversubscription']:g}:1",
                         f"{r['seconds'] * 1e3:.3f}", f"{held * 1e3:.3f} ({r['seconds'] / held:.2f})",
                         domain_cell(r), f"{r['drops']:,}", f"{r['retransmissions']:,}", r["max_queue"],
                         exact_cell(r)])
    lines = rows_md(["workers", "each leaf's uplinks", "mode", "leaf oversubscription", "ns-3 ms",
                     "model ms if the ports held (ns-3 / model)", "the model's domain", "drops (ns-3)",
                     "retransmissions, all workers (ns-3)", "deepest switch queue (ns-3)", "exact"], body)
    return block(lines, *runs)


# -- the scale model (benchmarks/scale_model.py) ---------------------------------------------------

@table("scale-model-validation")
def scale_model_validation() -> str:
    """docs/scale_model.md: the model against every Mininet run it was validated on."""
    from hina.benchmarks import scale_model

    data = load("scale_model.json")
    nb = data.get("validation_network_bound") or {}
    lines = scale_model.validation_table(data)
    if nb.get("runs"):
        lines += ["", f"Network-bound runs within 20% of the model: {nb['within_20pct']} of {nb['runs']} "
                      f"(measured / model {', '.join(f'{x:.2f}' for x in nb['ratios'])})."]
    return block(lines, ("scale_model.json", data))


@table("scale-model-projection")
def scale_model_projection() -> str:
    """docs/scale_model.md: every preset and topology at the largest worker count, 100 Gbit/s."""
    from hina.benchmarks import scale_model

    data = load("scale_model.json")
    return block(scale_model.projection_table(data), ("scale_model.json", data))


@table("scale-model-workers")
def scale_model_workers() -> str:
    """docs/scale_model.md: hina auto over dense INA against the worker count, the 2-tier tree at 100 Gbit/s."""
    data = load("scale_model.json")
    rows = [r for r in data["projection"] if r["topology"] == "tree2" and r["gbps"] == 100.0]
    workers = sorted({r["workers"] for r in rows})
    by = {(r["preset"], r["workers"]): r for r in rows}

    def cell(r: dict | None) -> str:
        if r is None:
            return "-"
        return f"{r['speedup_vs_dense']:.2f}x ({r['hina_auto']['encoding']}, union {r['union_density']:.1%})"

    body = [[name, *(cell(by.get((name, n))) for n in workers)]
            for name in dict.fromkeys(r["preset"] for r in rows)]
    lines = ["hina auto's speedup over dense INA (what auto ran, the union's share of the elements), 2-tier tree, "
             "100 Gbit/s:", "", *rows_md(["preset", *(f"{n} workers" for n in workers)], body)]
    return block(lines, ("scale_model.json", data))


@table("scale-model-k32")
def scale_model_k32() -> str:
    """docs/scale_model.md: K = 32 words (MTU 172, the P4 program's) with 64 and with 1,024 slots."""
    from hina.benchmarks import scale_model

    names = ("scale_model_k32_w64.json", "scale_model_k32_w1024.json")
    runs = [(name, load(name)) for name in names]
    lines = []
    for _name, data in runs:
        p = data["parameters"]
        lines += [f"**MTU {p['mtu']}, {p['slots']} slots**", "", *scale_model.projection_table(data), ""]
    return block(lines[:-1], *runs)


# -- trees (mininet/run.py --topology, benchmarks/compare.py --topology) ------------------------------

def tree_setting(data: dict) -> str:
    """A Mininet tree run's topology, link rates and loss, in words."""
    cfg, args = data["config"], data["command"].split()
    topology = args[args.index("--topology") + 1] if "--topology" in args else "star"
    over = cfg.get("oversubscription") or 1
    tree = data.get("topology") or {}
    rates = sorted(set((tree.get("uplink_mbps") or {}).values()))
    spines = {k.split("-")[1] for k in tree.get("uplink_mbps") or {}}
    uplinks = (f"uplinks at {'/'.join(f'{x:g}' for x in rates)} Mbit/s ({over:g}:1)" if rates
               else f"uplinks {over:g}:1 oversubscribed")
    if len(spines) > 1:
        uplinks += f", slots spread over {len(spines)} spines"
    everywhere = data.get("loss_by") in ("tc netem", "nftables on host interfaces and uplinks")
    return (f"{topology}, {cfg['bw']:g} Mbit/s host links, {uplinks}, "
            + (f"{cfg['loss']:g}% loss on {'every link' if everywhere else 'host links'}" if cfg.get("loss")
               else "no loss"))


def ran_text(r: dict) -> str:
    return r["mode"] + (f" (ran {r['encoding']})" if r["mode"] == "auto" and r.get("encoding") else "")


def switches_text(data: dict) -> str:
    """Which target each tier of a tree ran: "emulator", "BMv2", "BMv2 leaves, emulator spine", ..."""
    kinds = (data.get("topology") or {}).get("switches") or {}
    label = {"bmv2": "BMv2", "emulator": "emulator", "bridge": "plain"}
    leaves = {label[k] for n, k in kinds.items() if n.startswith("l")}
    spines = {label[k] for n, k in kinds.items() if n.startswith("s")}
    if leaves == spines:
        return "/".join(sorted(leaves))
    return f"{'/'.join(sorted(leaves))} leaves, {'/'.join(sorted(spines))} spine"


def resent_up(runs: list[dict]) -> int | None:
    """Partials the switches sent up again over every mode and round of one network (a duplicate UPDATE
    for a copy already sent up, no total yet: the partial or the total was lost, or a worker's timer
    fired first); None where no switch counts them (BMv2).  The counters run for the network's life,
    so the last mode's are the total."""
    counts = [job.get("resent_up") for c in (runs[-1].get("switches") or {}).values()
              for job in (c.get("jobs") or {}).values()]
    counts = [n for n in counts if n is not None]
    return sum(counts) if counts else None


def tree_exactness(names, first: str) -> str:
    runs = [(name, load(name)) for name in names]
    body = []
    for _, data in runs:
        rs = data["runs"]
        rounds = {len(r["rounds"]) for r in rs}
        dropped = [sum(v[way] for r in rs for v in (r.get("uplink_drops") or {}).values()) for way in ("up", "down")]
        again = resent_up(rs)
        body.append([tree_setting(data), switches_text(data), ", ".join(ran_text(r) for r in rs),
                     "/".join(map(str, sorted(rounds))),
                     "exact" if all(r["exact"] for r in rs) else
                     "**NOT EXACT**: " + ", ".join(r["mode"] for r in rs if not r["exact"]),
                     f"{sum(x['retransmissions'] for r in rs for x in r['rounds']):,}",
                     f"{dropped[0]:,} / {dropped[1]:,}", "-" if again is None else f"{again:,}",
                     "/".join(f"{r['seconds']:.2f}" for r in rs)])
    return block(rows_md([first, "switches", "modes", "rounds each", "result", "workers' resends, every round",
                          "frames dropped on the uplinks, up / down", "partials sent up again",
                          "seconds, mode by mode"], body), *runs)


@table("trees-mininet-exact")
def trees_mininet_exact() -> str:
    """docs/trees.md: every mode's result in each Mininet tree run, against numpy."""
    return tree_exactness(TREE_RUNS, "Mininet tree")


@table("trees-bmv2")
def trees_bmv2() -> str:
    """docs/trees.md: the same through BMv2 and mixed trees."""
    return tree_exactness([f"trees/bmv2/{name}.json" for name, _ in campaign.BMV2_TREES], "Mininet tree")


def tree_uplinks(name: str, ranges: bool) -> str:
    data = load(name)
    links = list(data["runs"][0]["uplinks"])
    if ranges:
        header = ["mode", "bytes per worker on its host link", f"each of the {len(links)} uplinks, up (MB)",
                  "down (MB)"]
    else:
        header = ["mode", "bytes per worker on its host link", *(f"uplink {k} up / down" for k in links)]
    body = []
    for r in data["runs"]:
        up = r["uplinks"]
        if ranges:
            ups, downs = [v["up"] / 1e6 for v in up.values()], [v["down"] / 1e6 for v in up.values()]
            cells = [f"{min(ups):.2f} to {max(ups):.2f}", f"{min(downs):.2f} to {max(downs):.2f}"]
        else:
            cells = [f"{up[k]['up']:,.0f} / {up[k]['down']:,.0f}" for k in links]
        body.append([ran_text(r), f"{r['wire_bytes_per_worker']:,.0f}", *cells])
    lines = [f"{tree_setting(data)}; best of {data['config']['rounds']} rounds, bytes on the wire (headers "
             "included) per aggregation.", "", *rows_md(header, body)]
    return block(lines, (name, data))


@table("trees-leaves")
def trees_leaves() -> str:
    """docs/trees.md: aggregation at every tier against the spine only (plain leaves), same wires."""
    body, runs = [], []
    for preset, (summed, plain) in LEAVES_RUNS.items():
        a, b = load(summed), load(plain)
        runs += [(summed, a), (plain, b)]
        for ra, rb in zip(a["runs"], b["runs"]):
            def per_uplink(r, way):
                return sum(v[way] for v in r["uplinks"].values()) / len(r["uplinks"])
            body.append([preset, ran_text(ra),
                         f"{ra['seconds']:.3f} ({short_verdict(ra)})", f"{rb['seconds']:.3f} ({short_verdict(rb)})",
                         f"{rb['seconds'] / ra['seconds']:.2f}x",
                         f"{per_uplink(ra, 'up') / 1e6:.2f} / {per_uplink(ra, 'down') / 1e6:.2f}",
                         f"{per_uplink(rb, 'up') / 1e6:.2f} / {per_uplink(rb, 'down') / 1e6:.2f}",
                         f"{per_uplink(rb, 'up') / per_uplink(ra, 'up'):.2f}x"])
    lines = [f"{tree_setting(runs[0][1])}; best of {runs[0][1]['config']['rounds']} rounds; uplink MB per "
             "aggregation, the mean of the two uplinks.", "",
             *rows_md(["model", "mode", "seconds, leaves sum their rack", "seconds, spine only (plain leaves)",
                       "spine only is slower", "uplink MB up / down, leaves sum", "uplink MB up / down, spine only",
                       "uplink bytes up, spine only / leaves"], body), "", leaves_summary(runs)]
    return block(lines, *runs)


def leaves_summary(runs: list[tuple[str, dict]]) -> str:
    """The trees-leaves table in one sentence: bytes up, dense's and auto's seconds, what the uplink's rate
    allows the spine-only dense run."""
    pairs = {}  # (preset, mode) -> (leaves summing, spine only)
    for preset, (summed, plain) in LEAVES_RUNS.items():
        a, b = dict(runs)[summed], dict(runs)[plain]
        for ra, rb in zip(a["runs"], b["runs"]):
            pairs[preset, ra["mode"]] = (ra, rb)

    def up(r: dict) -> float:
        return sum(v["up"] for v in r["uplinks"].values()) / len(r["uplinks"])

    ratio_up = [up(rb) / up(ra) for ra, rb in pairs.values()]
    dense = [pairs[k] for k in pairs if k[1] == "dense"]
    auto = [(k[0], *pairs[k]) for k in pairs if k[1] == "auto"]
    cfg = runs[0][1]["config"]
    worst_up = max(up(rb) for _, rb in dense)
    text = (f"Summing at the leaf sends {span(ratio_up)}x fewer bytes up each uplink; dense runs "
            f"{span([rb['seconds'] / ra['seconds'] for ra, rb in dense])}x faster "
            f"({span([ra['seconds'] for ra, _ in dense], '.3f')} s against "
            f"{span([rb['seconds'] for _, rb in dense], '.3f')} s: with plain leaves an uplink carries up to "
            f"{worst_up / 1e6:.1f} MB up per aggregation, {8 * worst_up / (cfg['bw'] * 1e6):.1f} s at "
            f"{cfg['bw']:g} Mbit/s)")
    for preset, ra, rb in auto:
        slower = rb["seconds"] / ra["seconds"]
        text += (f"; auto {times(slower)} faster on {preset} ({ra['seconds']:.3f} s against {rb['seconds']:.3f} s, "
                 f"{mb(ra['wire_bytes_per_worker'])} per worker)")
    return text + "."


@table("readme-trees")
def readme_trees() -> str:
    """README: every system on the leaf/spine tree, the sparse presets: seconds, uplink bytes against the ring's."""
    name = "trees/tree-compare.json"
    data = load(name)
    rows = [r for r in data["rows"] if not r["env"].startswith("loopback")]
    env = rows[0]["env"]
    find = {(r["preset"], r["mode"]): r for r in rows}
    presets = [p for p in ("deeplight", "lstm") if (p, "ring") in find]
    dense = [p for p in PRESETS if p not in presets and (p, "ring") in find]
    body = []
    for mode, label in systems():
        if not any((p, mode) in find for p in presets):
            continue
        cells = []
        for p in presets:
            r, ring = find.get((p, mode)), find[p, "ring"]
            if r is None:
                cells += ["-", "-"]
                continue
            cells += [f"{r['seconds']:.3f} ({short_verdict(r)})",
                      f"{r['uplink_bytes_per_aggregation'] / ring['uplink_bytes_per_aggregation']:.3f}"]
        ratios = [find[p, mode]["uplink_bytes_per_aggregation"] / find[p, "ring"]["uplink_bytes_per_aggregation"]
                  for p in dense if (p, mode) in find]
        cells.append(f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-")
        body.append([label, *cells])
    header = ["system", *(h for p in presets for h in (f"{p} s (verdict)", f"{p} uplink bytes / ring's")),
              f"uplink bytes / ring's, {', '.join(dense)}"]
    over = data["meta"].get("oversubscription") or 1
    lines = [f"{data['meta']['workers']} workers, {env} (host links and uplinks at that rate: {over:g}:1 "
             f"oversubscribed), best of {data['meta']['rounds']} rounds; uplink bytes summed over every uplink "
             "both ways, per aggregation.", "", *rows_md(header, body)]
    return block(lines, (name, data))


@table("readme-scale")
def readme_scale() -> str:
    """README: the scale model at its largest worker count, 100 Gbit/s, the 2-tier tree: hina auto against dense
    INA and the ring, per preset."""
    data = load("scale_model.json")
    rows = [r for r in data["projection"] if r["topology"] == "tree2" and r["gbps"] == 100.0]
    n = max(r["workers"] for r in rows)
    body = [[r["preset"], f"{r['union_density']:.1%}", r["hina_auto"]["encoding"],
             f"{r['speedup_vs_dense']:.2f}x", f"{r['speedup_vs_ring']:.2f}x"]
            for r in rows if r["workers"] == n]
    nb = data.get("validation_network_bound") or {}
    lines = [f"{n:,} workers under a 2-tier tree of switches, 100 Gbit/s links, modelled (the model was within 20% "
             f"of {nb.get('within_20pct', '?')} of {nb.get('runs', '?')} network-bound Mininet runs).", "",
             *rows_md(["preset", "union of the supports", "hina auto runs", "hina auto over dense INA",
                       "hina auto over the ring"], body)]
    return block(lines, ("scale_model.json", data))


@table("trees-uplinks")
def trees_uplinks() -> str:
    """docs/trees.md: the bytes each uplink carried per mode, leafspine:2,1,4 without loss."""
    return tree_uplinks(TREE_RUNS[0], ranges=False)


@table("trees-uplinks-spread")
def trees_uplinks_spread() -> str:
    """docs/trees.md: the same for leafspine:4,2,2 (slots spread over two spines), as ranges over the uplinks."""
    return tree_uplinks(TREE_RUNS[2], ranges=True)


@table("trees-compare")
def trees_compare() -> str:
    """docs/trees.md: every system on the leaf/spine wires: seconds and uplink bytes against the ring's."""
    from hina.benchmarks import compare

    name = "trees/tree-compare.json"
    data = load(name)
    rows = [r for r in data["rows"] if not r["env"].startswith("loopback")]
    return block(compare.uplink_table(rows, seconds=True), (name, data))


# -- fidelity (mininet/run.py --calibrate, benchmarks/slowdown.py, benchmarks/cross_traffic.py) ----------

def calibrations() -> list[str]:
    """The campaign's `--calibrate` results: stars first, most workers first, then the tree."""
    return [f"calibrate/{name}.json" for name, _ in campaign.CALIBRATIONS]


def rates(mbps: list[float]) -> str:
    return ", ".join(f"{x:g}" if x == int(x) else f"{x:.1f}" for x in mbps)


@table("fidelity-contest")
def fidelity_contest() -> str:
    """docs/fidelity.md: the window beside a Reno flow on the virtual clock, delay rule alone or contested."""
    from hina.benchmarks import contest_model

    name = "contest_model.json"
    data = load(name)
    seeds = data["rows"][0]["seeds"]
    lines = [f"{data['workers']} workers, {data['link_mbps']:g} Mbit/s, {data['frame_bytes']:,}-byte frames; "
             f"the mean of {seeds} seeds (windows: the least and most over them).", "",
             *contest_model.table(data)]
    return block(lines, (name, data))


@table("fidelity-calibrate")
def fidelity_calibrate() -> str:
    """docs/fidelity.md: each --calibrate run: the highest network-bound rate and every trial's verdict."""
    runs = [(name, load(name)) for name in calibrations()]
    body = []
    for _name, data in runs:
        trials = sorted(data["trials"], key=lambda t: t["mbps"])
        best = data["highest_network_bound_mbps"]
        above = [t["mbps"] for t in trials if best is None or t["mbps"] > best]
        found = ("none" if best is None
                 else f"**{best:.0f} Mbit/s**" + (f" (not at {min(above):.0f})" if above else ""))
        groups: dict[str, list[float]] = {}
        for t in trials:
            groups.setdefault(short_verdict({"verdict": t["verdict"]}), []).append(t["mbps"])
        command = re.sub(r" --(out|name) \S+", "", data["command"])  # where it wrote is not what it measured
        body.append([data.get("topology", "star"), data["config"]["workers"], f"`{command}`", found,
                     "; ".join(f"{rates(v)}: {k}" for k, v in groups.items()),
                     "-".join(f"{x:.1f}" for x in (min(data["loadavg"]), max(data["loadavg"])))])
    lines = rows_md(["topology", "workers", "command", "highest network-bound rate",
                     "trials (Mbit/s: verdict of the best round)", "load average at the start"], body)
    return block(lines, *runs)


def compare_with_verdicts(name: str, env: str) -> str:
    """A comparison's seconds, bytes and verdicts at one rate, and its summary line."""
    header, cells, data = compare_cells(name, env, with_verdict=True)
    return block([*rows_md(header, cells), "", compare_summary_line(data, env)], (name, data))


@table("fidelity-compare")
def fidelity_compare() -> str:
    """docs/fidelity.md: the comparison at the calibrated rate, seconds, bytes and verdicts."""
    return compare_with_verdicts(*HEADLINE)


@table("fidelity-compare-xdp")
def fidelity_compare_xdp() -> str:
    """docs/fidelity.md: the same comparison through the XDP switch, at the rate its calibration holds."""
    return compare_with_verdicts("compare_xdp.json", f"mininet {int(campaign.XDP_STAR_MBPS) / 1000:g} Gbit/s")


@table("fidelity-gbit")
def fidelity_gbit() -> str:
    """docs/fidelity.md: the one-shot comparison on Mininet (0.1, 1 and 10 Gbit/s) with its verdicts."""
    name = "compare.json"
    data = load(name)
    lines = []
    for env in dict.fromkeys(r["env"] for r in data["rows"] if r["env"].startswith("mininet")):
        header, cells, _ = compare_cells(name, env, with_verdict=True)
        lines += [f"**{env}**", "", *rows_md(header, cells), ""]
    return block(lines[:-1], (name, data))


def slowdown_rows(base_name: str, with_name: str) -> tuple[list[dict], dict, dict, dict]:
    """benchmarks/slowdown.py's rows for two compare.py results, and each (env, preset, mode)'s row of WITH."""
    from hina.benchmarks import slowdown

    base, hetero = load(base_name), load(with_name)
    rows, _ = slowdown.table(base, hetero)
    return rows, {(r["env"], r["preset"], r["mode"]): r for r in hetero["rows"]}, base, hetero


def label(mode: str) -> str:
    from hina.benchmarks import compare

    return compare.label(mode)


def verdicts(r: dict) -> str:
    return f"{short_verdict({'fidelity': r['base_fidelity']})} / {short_verdict({'fidelity': r['fidelity']})}"


@table("fidelity-straggler")
def fidelity_straggler() -> str:
    """docs/fidelity.md: every system with a straggler against the same runs without (benchmarks/slowdown.py)."""
    from hina.benchmarks import slowdown

    names = ("compare_faithful.json", "compare_straggler.json")
    rows, _, base, hetero = slowdown_rows(*names)
    body = [[r["preset"], label(r["mode"]), f"{r['base_seconds']:.3f}", f"{r['seconds']:.3f}",
             f"{r['slowdown']:.2f}x", "-" if r["lost_beyond_delay"] is None else f"{r['lost_beyond_delay']:+.3f} s",
             "-" if r["most_waited"] != r["most_waited"] else f"{r['most_waited']:.3f} s", verdicts(r)] for r in rows]
    delay = slowdown.largest_delay(hetero["meta"], hetero["meta"]["workers"])
    lines = [f"{rows[0]['env']}; the straggler's largest start delay {delay:.3f} s (\"lost beyond the delay\": the "
             "seconds with it less the base seconds less that delay).", "",
             *rows_md(["model", "system", "seconds (base)", "seconds (with)", "slowdown", "lost beyond the delay",
                       "most a worker waited", "verdict (base / with)"], body)]
    return block(lines, *zip(names, (base, hetero)))


@table("fidelity-cross")
def fidelity_cross() -> str:
    """docs/fidelity.md: every system beside an iperf3 flow against the same runs alone (benchmarks/slowdown.py)."""
    names = ("compare_faithful.json", "compare_cross.json")
    rows, beside, base, hetero = slowdown_rows(*names)
    alone = {(r["env"], r["preset"], r["mode"]): r for r in base["rows"]}

    def resent(r: dict) -> str:
        key = (r["env"], r["preset"], r["mode"])
        a, b = alone[key].get("retransmissions"), beside[key].get("retransmissions")
        return "-" if a is None or b is None else f"{a} / {b}"

    body = [[r["preset"], label(r["mode"]), f"{r['base_seconds']:.3f}", f"{r['seconds']:.3f}",
             f"{r['slowdown']:.2f}x", resent(r), verdicts(r)] for r in rows]
    lines = [f"{rows[0]['env']}; resent frames are hina's (the baselines' TCP retransmissions are not counted: -).", "",
             *rows_md(["model", "system", "seconds alone", "seconds beside the flow", "slowdown",
                       "resent frames (alone / beside)", "verdict (alone / beside)"], body)]
    return block(lines, *zip(names, (base, hetero)))


@table("fidelity-window")
def fidelity_window() -> str:
    """docs/fidelity.md: hina's congestion window per round, alone and beside a TCP flow (cross_traffic.py)."""
    name = "cross_traffic.json"
    data = load(name)

    def spread(values: list[float], fmt: str = ".1f") -> str:
        lo, hi = min(values), max(values)
        return f"{lo:{fmt}}" if f"{lo:{fmt}}" == f"{hi:{fmt}}" else f"{lo:{fmt}}-{hi:{fmt}}"

    body = []
    for run in data["runs"]:
        what = "with the TCP flow " + ", ".join(run["cross"]) if run["cross"] else "alone"
        best = min(range(len(run["rounds"])), key=lambda i: run["rounds"][i]["seconds"])
        for i, rd in enumerate(run["rounds"]):
            win = [w["window"] for w in rd["workers"]]
            shown = i == best
            body.append([what, i + 1, f"{rd['seconds']:.3f}" + (" (best)" if shown else ""),
                         f"{run['line_rate_seconds']:.2f}",
                         " / ".join(spread([w[k] for w in win]) for k in ("least", "mean", "last")),
                         spread([w["cuts"] for w in win], "d"), run["retransmissions"] if shown else "-",
                         rd["fidelity"] + (f" ({run['fidelity_detail']})" if shown and run["fidelity_detail"] else "")])
    flows = [f"{f['src']}>{f['dst']}: {f['bytes'] / 1e6:.1f} MB in {f['seconds']:.1f} s ({f['mbps']:.1f} Mbit/s, "
             f"{f['retransmits']} TCP retransmits)" for run in data["runs"] for f in run.get("flow") or []]
    lines = [*rows_md(["run", "round", "seconds", "line rate seconds", "every worker's window: least / mean / last "
                       "(chunks)", "cuts per worker", "resent (best round)", "verdict (detail: best round)"], body),
             "", "The iperf3 flow: " + "; ".join(flows) + "."]
    return block(lines, (name, data))


SHARE_RUNS = ("cross_traffic/delay.json", "cross_traffic/delay_cap.json", "cross_traffic/fair.json",
              "cross_traffic/fair_cap.json")


@table("fidelity-share")
def fidelity_share() -> str:
    """docs/fidelity.md: hina's share of a link it shares with one iperf3 TCP flow, from 30 to 200 Mbit/s, the
    flow uncapped and capped at half the link, with the default window (the fair-share rules) and the delay rule
    alone (--delay-rule)."""
    from hina.benchmarks.cross_traffic import TABLE_HEADER, table_rows

    sources = [(name, load(name)) for name in SHARE_RUNS]
    return block([*TABLE_HEADER, *(row for _, data in sources for row in table_rows(data))], *sources)


# -- deployment (mininet/run.py --ranks-per-host, mininet/deploy.py, benchmarks/lease.py, side_by_side.py) ------

@table("ranks")
def ranks_table() -> str:
    """docs/deploy.md: 8 workers as 2 hosts of 4 ranks and as 8 hosts, every mode, the emulator and BMv2."""
    rows, sources = [], []
    for switch in ("emulator", "bmv2"):
        runs = {}
        for shape in ("2x4", "8x1"):
            name = f"ranks/{switch}-{shape}.json"
            data = load(name)
            sources.append((name, data))
            runs[shape] = {r["mode"]: r for r in data["runs"]}
        for mode, shared in runs["2x4"].items():
            alone = runs["8x1"][mode]
            exact = "yes" if shared["exact"] and alone["exact"] else "**NO**"
            rows.append([switch, mode, shared.get("encoding"), exact,
                         f"{shared['seconds']:.3f} ({_short(shared['fidelity']['verdict'])})",
                         f"{alone['seconds']:.3f} ({_short(alone['fidelity']['verdict'])})",
                         f"{shared['seconds'] / alone['seconds']:.2f}x",
                         f"{shared['line_rate_seconds'] / alone['line_rate_seconds']:.1f}x"
                         if shared.get("line_rate_seconds") and alone.get("line_rate_seconds") else "-"])
    cfg = sources[0][1]["config"]
    lines = [f"8 workers, mininet {cfg['bw']:g} Mbit/s star, best of {cfg['rounds']} rounds: 2 hosts of 4 ranks (each "
             "at a UDP port of its own, the host's link shared by its 4 ranks) against 8 hosts of one rank.", "",
             *rows_md(["switch", "mode", "ran", "exact", "2 hosts x 4 ranks: s (verdict)", "8 hosts x 1: s (verdict)",
                       "2x4 / 8x1", "line-rate time 2x4 / 8x1"], rows)]
    return block(lines, *sources)


def _verdict_of(run: dict) -> str:
    return _short(run["fidelity"]["verdict"]) if run.get("fidelity") else "not monitored"


def _short(verdict: str) -> str:
    return verdict.split(":")[0].split(" (")[0]


@table("deploy")
def deploy_table() -> str:
    """docs/deploy.md: the guide's commands in Mininet (2 machines x 4 ranks, the switch on a third)."""
    name = "deploy.json"
    data = load(name)
    st = data["standalone"]
    hina, gloo = data["ddp_hina"], data["ddp_gloo"]
    rows = [["standalone `hina worker` x 8", "yes" if st["exact"] else "**NO**", "-", "-", _verdict_of(st)],
            *[[f"torchrun --nnodes 2 --nproc-per-node {data['ranks_per_machine']}, {r['backend']}",
               "yes" if r["identical_every_step"] else "**NO**", f"{r['steps']}",
               f"{r['seconds_per_iteration']:.3f}" if r["seconds_per_iteration"] else "-", _verdict_of(r)]
              for r in (hina, gloo)]]
    ratio = gloo["seconds_per_iteration"] / hina["seconds_per_iteration"]
    lines = [f"2 machines of {data['ranks_per_machine']} ranks and a server, one Linux bridge at {data['bw_mbps']:g} "
             "Mbit/s per link (Mininet); standalone: every rank's sum against numpy's; torchrun: every rank's "
             "parameters compared after every step.", "",
             *rows_md(["what ran", "exact / identical on every rank", "steps", "seconds per iteration (median, "
                       "past the first)", "what set the time"], rows), "",
             f"hina's DDP step took {1 / ratio:.2f}x gloo's on the same machines ({ratio:.2f}x faster)."]
    return block(lines, (name, data))


@table("deploy-checks")
def deploy_checks() -> str:
    """docs/deploy.md: a dead job's lease, and two experiments at once."""
    lease, sbs = load("lease.json"), load("side_by_side.json")
    rows = [[f"a job of {lease['workers']} whose workers were killed (lease {lease['lease']:g} s)",
             f"removed {lease['freed_after_kill_s']:.1f} s after the kill; a new job of {lease['new_job_workers']} on "
             f"its slots exact: {'yes' if lease['new_job_exact'] else '**NO**'}"]]
    for r in sbs["rows"]:
        exact = "yes" if r["exact"] and all(r["exact"].values()) else "**NO**"
        rows.append([f"run {r['run_id']} ({r['experiment']}), started with the other",
                     f"every mode exact: {exact}; left nothing behind: {'yes' if not r['leftovers'] else '**NO**'}"])
    return block(rows_md(["check", "result"], rows), ("lease.json", lease), ("side_by_side.json", sbs))


# -- time to accuracy (benchmarks/time_to_accuracy.py) ---------------------------------------------

TTA = "time_to_accuracy"


def _tta_sooner(data: dict) -> list[str]:
    """What the 4-rank run to the target showed, as sentences: the exact systems (mean over the seeds, from the
    interpolated crossings where the result has them), then each lossy one."""
    from hina.benchmarks import time_to_accuracy as tta

    by = data.get("spread") or tta.spread(tta.runs_of(data))
    runs = tta.runs_of(data)
    first = {r["system"]: r for r in runs[0]["table"]}
    seeds = len(runs)
    lines = []
    exact = ("hina", "hina-dense", "gloo")
    if all(s in by and by[s]["reached"] == seeds for s in exact):
        key = "seconds_to_target_interp" if by["hina"].get("seconds_to_target_interp") else "seconds_to_target"
        mean = {s: by[s][key]["mean"] for s in (*exact, "hina-blocks") if s in by and by[s].get(key)}
        per_step = by["hina-dense"]["seconds_per_step"]["mean"] / by["hina"]["seconds_per_step"]["mean"]
        fewer = by["hina-dense"]["bytes_per_step"]["mean"] / by["hina"]["bytes_per_step"]["mean"]
        how = (["interpolated crossings"] if key.endswith("interp") else []) + (
            [f"the mean of {seeds} seeds"] if seeds > 1 else [])
        note = f" ({', '.join(how)})" if how else ""
        blocks = (f" and {mean['hina-blocks'] / mean['hina']:.1f}x sooner than blocks (OmniReduce-style)"
                  if "hina-blocks" in mean and by["hina-blocks"]["reached"] == seeds else "")
        steps = [str({r["system"]: r for r in run["table"]}["hina"]["steps_to_target"]) for run in runs]
        lines.append(f"hina reached the target {mean['hina-dense'] / mean['hina']:.1f}x sooner than dense in-network "
                     f"aggregation, {mean['gloo'] / mean['hina']:.1f}x sooner than gloo{blocks}{note}, in the same "
                     f"steps as dense in-network aggregation ({', '.join(steps)}"
                     f"{f' for the {seeds} seeds' if seeds > 1 else ''}); per step it was "
                     f"{per_step:.1f}x faster than dense in-network aggregation (the paper's 3.74x) and sent "
                     f"{fewer:.1f}x fewer bytes.")
    hina = by.get("hina", {})
    for lossy in (b.name for b in registry.trained() if b.lossy):
        s = by.get(lossy)
        r = first.get(lossy)
        if not s or not r or "error" in r:
            continue
        if s["reached"]:
            steps = s["steps_to_target"]["mean"]
            key = "seconds_to_target_interp" if s.get("seconds_to_target_interp") else "seconds_to_target"
            late = (f", {s[key]['mean'] / hina[key]['mean']:.2f}x hina's time" if hina.get(key) else "")
            extra = (f"reached it in {steps:.0f} steps ({steps - hina['steps_to_target']['mean']:+.0f} against the "
                     f"exact systems{late})" if hina.get("steps_to_target") else f"reached it in {steps:.0f} steps")
            if s["reached"] < seeds:
                extra += f" in {s['reached']} of {seeds} seeds"
        else:
            extra = f"missed it within {r['steps_run']} steps"
        final = r.get("final_heldout_loss")
        ended = f" and ended at {final:.2f} nats per token" if final is not None else ""
        lines.append(f"- {tta.label_of(lossy)} {extra}{ended}; its parameters ended {r['vs_exact']} from the "
                     "exact trajectory's.")
    return lines


@table("tta")
def tta_table() -> str:
    """docs/ddp.md: every system trained to the target held-out loss, 4 ranks on a Mininet star."""
    from hina.benchmarks import time_to_accuracy as tta

    name = f"{TTA}/mininet_4.json"
    data = load(name)
    return block([tta.markdown(data), "", *_tta_sooner(data)], (name, data))


@table("tta-headline")
def tta_headline() -> str:
    """README: the same run in one sentence."""
    name = f"{TTA}/mininet_4.json"
    data = load(name)
    return block(_tta_sooner(data)[:1], (name, data))


@table("tta-per-step")
def tta_per_step() -> str:
    """docs/ddp.md: per step, with several DDP buckets, on a model with dense gradients, at 8 ranks, and through
    the XDP switch; with the share of each step its bytes take at line rate (the rest is the CPU's: the
    training, the encoding, the switch, or waiting)."""
    from hina.benchmarks import time_to_accuracy as tta

    runs = (("mininet_4_buckets.json", "4 ranks, `--bucket-mb 4` (several buckets a step)"),
            ("mininet_4_dense_model.json", "4 ranks, dense gradients (`--vocab 2000 --samples 0`)"),
            ("mininet_8_per_iteration.json", "8 ranks"),
            ("mininet_4_xdp.json", "4 ranks, through the XDP switch"),
            ("mininet_8_xdp.json", "8 ranks, through the XDP switch"))
    rows, sources = [], []
    for file, what in runs:
        name = f"{TTA}/{file}"
        data = load(name)
        sources.append((name, data))
        by = {r["system"]: r for r in tta.runs_of(data)[0]["table"]}
        dense = by.get("hina-dense")
        bw = data["bw_mbit"]
        for system in ("hina", "hina-dense", "gloo"):
            r = by.get(system)
            if r is None or "error" in r:
                continue
            vs = f"{dense['seconds_per_step'] / r['seconds_per_step']:.2f}x" if dense and "error" not in dense else "-"
            wire = r["bytes_per_step"] * 8 / (bw * 1e6) / r["seconds_per_step"] if bw else None
            rows.append([f"{what}, {bw:g} Mbit/s", tta.label_of(system), f"{r['steps_run']}",
                         f"{r['bytes_per_step'] / 1e6:.3f} MB", f"{r['seconds_per_step']:.3f}", vs,
                         "-" if wire is None else f"{wire:.0%}",
                         f"{r['overlap']:.0%}" if r.get("overlap") is not None else "-",
                         tta.short_verdict(r.get("fidelity"))])
    lines = ["Mininet star, seconds per step as the median over the run's steps; \"at line rate\": the share of that "
             "step its bytes per rank take at the link's rate.", "",
             *rows_md(["run", "system", "steps", "bytes per step (per rank)", "seconds per step",
                       "speed against hina dense", "at line rate", "comm hidden in backward", "what set the time"],
                      rows)]
    return block(lines, *sources)


# -- the claims and how to reproduce them (tools/reproduce.py) -------------------------------------

@table("reproduce")
def reproduce_table() -> str:
    """docs/reproduce.md: every claim of tools/reproduce.py's registry, its command, time, needs, committed
    figures (with their commits) and tolerances; then each tolerance's reason."""
    import reproduce

    times = reproduce.timings()
    body, kinds = [], {}
    for claim in reproduce.CLAIMS.values():
        figures = reproduce.committed_figures(claim)
        need = reproduce.needs(claim)
        command = f"{'sudo ' if 'root' in need else ''}make reproduce CLAIM={claim.name}"
        shown = "; ".join(f"{f.name} **{f.text()}**" for f in figures)
        for t in reproduce.tolerances(figures):
            kinds.setdefault(f"**{t.kind}**, {t.rule()}", t.why)
        page = Path(claim.page)  # README.md or docs/x.md, linked from docs/
        link = (f"[{page.stem}]({page.name})" if page.parent.name == "docs" else f"[{page.name}](../{page})")
        body.append([f"`{claim.name}` ({link})", claim.statement, f"`{command}`", reproduce.time_text(claim, times),
                     ", ".join(need) or "-", f"{shown} (commit {reproduce.commits(claim)})",
                     "; ".join(t.text() for t in reproduce.tolerances(figures))])
    lines = [*rows_md(["claim", "statement", "command", "time (the campaign's run)", "needs", "committed figures",
                       "tolerance"], body), "", "Why each tolerance is as wide as it is:", "",
             *(f"- {text}: {why}." for text, why in kinds.items())]
    path = reproduce.timings_file()
    if path.exists():
        return block(lines, (path.name, json.loads(path.read_text())))
    return block([*lines, "", f"Times: not yet timed (no `{campaign.TIMINGS}`: tools/campaign.py writes it as its "
                              "steps run)."])


# -- the pages ------------------------------------------------------------------------------------

def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def render(text: str, where: Path) -> tuple[str, list[str]]:
    """The page with every generated block rewritten; the names of the blocks that changed."""
    changed = []

    def fill(m: re.Match) -> str:
        name = m.group(2)
        if name not in TABLES:
            raise ValueError(f"{where.relative_to(ROOT)}: unknown table {name!r} (known: {', '.join(sorted(TABLES))})")
        new = TABLES[name]()
        if new != m.group(3):
            changed.append(name)
        return m.group(1) + new + m.group(4)

    return MARKER.sub(fill, text), changed


# -- one switch, many jobs (benchmarks/tenants.py, churn_model.py) ---------------------------------------

@table("tenants-sharing")
def tenants_sharing() -> str:
    """docs/tenants.md: J jobs at once through one switch, each against its rounds alone."""
    name = "tenants.json"
    data = load(name)
    rows = []
    for run in data["sharing"]["together"]:
        for p in run["per_job"]:
            alone = data["sharing"]["alone"][str(p["job_id"])]
            rows.append([str(run["jobs"]), f"{p['job_id']} ({p['preset']})", f"[{p['slot_base']}, "
                         f"{p['slot_base'] + p['slots']})", f"{p['alone']:.3f}", f"{p['together']:.3f}",
                         f"{max(p['round_seconds']):.2f} of {len(p['round_seconds'])}", f"{p['slowdown']:.2f}x",
                         f"{max(alone['resent']):,}", f"{max(p['resent']):,}", "yes" if p["exact"] else "NO"])
        for f in run.get("failed", []):
            rows.append([str(run["jobs"]), f"{f['job_id']} ({f['preset']})", "-", "-", "-", "-", "-", "-", "-",
                         f"failed: `{f['error'].removeprefix('hina worker: ')}`"])
    lines = rows_md(["jobs at once", "job (preset)", "slots", "alone s", "together s", "slowest round s (of rounds)",
                     "slowdown", "most frames resent in a round alone", "together", "exact"], rows)
    summary = [[str(r["jobs"]), f"{r['jain']:.3f}", f"{r['worst_slowdown']:.2f}x", f"{r['worst_over_share']:.2f}",
                f"{r['server_link_load']:.0%}", "yes" if r["disjoint"] else "NO", str(len(r.get("failed", []))),
                short_verdict(r)] for r in data["sharing"]["together"]]
    lines += ["", *rows_md(["jobs at once", "Jain's index of the slowdowns", "worst slowdown",
                            "worst / jobs sharing", "server link busy", "slot ranges disjoint",
                            "jobs that timed out", "what set the time"], summary)]
    return block(lines, (name, data))


def slot_range(job: dict) -> str:
    return f"[{job['slot_base']}, {job['slot_base'] + job['slots']})"


@table("tenants-full")
def tenants_full() -> str:
    """docs/tenants.md: a job meeting a full switch, each answer."""
    name = "tenants.json"
    data = load(name)
    f = data["full"]
    alone, fewer, wait, host = f["b_alone_64"], f["fewer"], f["wait"], f["host_fallback"]
    stalled = f["beside_stalled"]
    rows = [["refuse", f"exit status {f['refuse']['status'][0]} on every rank after {f['refuse']['seconds']:.1f} s "
                       "(their start included)", f"`{f['refuse']['line']}`"],
            ["fewer (at least 16)", f"slots {slot_range(fewer['slots'])}, {fewer['seconds']:.3f} s a round beside "
                                    f"job A",
             f"alone on 64 slots {alone['seconds']:.3f} s, on 32 {f['b_alone_32']['seconds']:.3f} s; exact: "
             f"{'yes' if fewer['exact'] else 'NO'}"],
            ["fewer, job A stalled", f"slots {slot_range(stalled['slots'])}, {stalled['seconds']:.3f} s a round "
                                     "beside job A with one rank stopped",
             f"exact: {'yes' if stalled['exact'] else 'NO'}"],
            ["wait", f"first round {wait['waited_s']:.1f} s after it asked, {wait['after_a_s']:.2f} s after job A's "
                     f"last round ended", f"in line as number 1: {'yes' if wait['in_line'] else 'no'}; slots "
                                         f"{slot_range(wait['slots'])}; exact: {'yes' if wait['exact'] else 'NO'}"],
            ["DDP with --host-fallback", f"{host['steps']} steps through the {host['through']}, "
                                         f"{host['seconds_per_iteration']:.3f} s each",
             f"every rank identical after every step: {'yes' if host['identical_every_step'] else 'NO'}"]]
    verdicts = ["- (no round ran)", f"{short_verdict(fewer)} (alone on 64 and 32: {short_verdict(alone)}, "
                f"{short_verdict(f['b_alone_32'])})", short_verdict(stalled), short_verdict(wait), short_verdict(host)]
    rows = [[*row, verdict] for row, verdict in zip(rows, verdicts)]
    return block(rows_md(["job B's answer", "what happened", "check", "what set the time"], rows), (name, data))


@table("tenants-star")
def tenants_star() -> str:
    """docs/tenants.md: two jobs through one star's switch at once, on the emulator, BMv2 and the XDP switch."""
    name = "tenants.json"
    data = load(name)
    rows = []
    for target, found in data["star"].items():
        for run in found["runs"]:
            ranges = ", ".join(f"job {j['job_id']} {slot_range(j)}: {run['seconds'][str(j['job_id'])]:.3f} s"
                               for j in run["jobs"])
            rows.append([{"emulator": "the emulator (raw frames)", "bmv2": "BMv2", "xdp": "the XDP switch"}[target],
                         run["mode"], ranges,
                         "yes" if run["exact"] else "NO", short_verdict(run)])
    return block(rows_md(["switch", "mode", "each job's slots and median round", "both exact, every round",
                          "what set the time"], rows), (name, data))


@table("churn")
def churn() -> str:
    """docs/tenants.md: an hour of jobs arriving and leaving on the virtual clock."""
    name = "churn_model.json"
    data = load(name)
    c = data["counts"]
    wait = data["wait_s"]
    rows = [["jobs arrived", f"{c['arrived']:,}"],
            ["given slots", f"{c['granted']:,} ({c['fewer']:,} fewer than they asked, {c['waited']:,} after waiting"
                            + (f": median {wait['median']:.0f} s, longest {wait['max']:.0f} s" if wait else "") + ")"],
            ["refused", f"{c['refused']:,}"],
            ["rounds, exact", f"{c['rounds']:,}, {c['exact_rounds']:,}"],
            ["most slots held, of the switch's", f"{data['most_held']:,} of {data['space']:,}"],
            ["most jobs at once, most in line", f"{data['most_jobs']}, {data['most_waiting']}"],
            ["jobs on the switch at the end (leaked)", f"{data['leaked']}"],
            ["problems", f"{len(data['problems'])}"]]
    return block(rows_md(["over the hour", ""], rows), (name, data))


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="tables.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table differs from its JSON")
    ap.add_argument("--list", action="store_true", help="print each table's name and the pages that show it")
    args = ap.parse_args(argv)
    stale, shown = [], {name: [] for name in TABLES}
    for page in pages():
        text = page.read_text()
        try:
            new, changed = render(text, page)
        except (ValueError, OSError, KeyError) as exc:
            print(f"tables.py: {exc}", file=sys.stderr)
            return 2
        for m in MARKER.finditer(text):
            shown[m.group(2)].append(str(page.relative_to(ROOT)))
        stale += [f"{page.relative_to(ROOT)}: {name}" for name in changed]
        if changed and not args.check:
            page.write_text(new)
    if args.list:
        for name, where in shown.items():
            print(f"{name}: {', '.join(where) or '(shown nowhere)'}")
        return 0
    if args.check:
        if stale:
            print("tables differ from benchmarks/results (run python tools/tables.py): " + "; ".join(stale),
                  file=sys.stderr)
            return 1
        print("every generated table matches benchmarks/results")
        return 0
    print(f"rewrote {len(stale)} table(s)" + (": " + "; ".join(stale) if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
