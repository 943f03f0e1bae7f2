"""README.md and docs/ stay true: links resolve, commands name real flags, examples run, tables match results,
and figures that prose quotes from a result file match that file."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def prose(text: str) -> str:
    """The page without its fenced code blocks (links and headings inside them are not links or headings)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@functools.cache
def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(prose(page.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z]+:", t)]


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in PAGES:
        for target in links(page):
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no heading with that anchor)")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_reachable_from_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    orphans = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not orphans, f"docs pages the README's map does not link: {orphans}"


def test_readme_is_a_first_screen_not_a_manual():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"
    first_screen = "\n".join(lines[:40])
    assert "exact" in first_screen and "make demo" in first_screen


@pytest.mark.slow
def test_generated_tables_match_the_result_files():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "tables.py"), "--check"], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_a_table_edited_by_hand_is_caught():
    """The check can fail: a figure typed into a generated block differs from what the JSON renders."""
    import tables  # tools/, on the path by tests/conftest.py

    page = "x\n<!-- table: reliability -->\n| 0.0% | 0% / 0% | auto | 0.001 |\n<!-- end table -->\n"
    text, changed = tables.render(page, README)
    assert changed == ["reliability"] and "packets sent per useful packet" in text and "0.001 |" not in text
    again, changed = tables.render(text, README)
    assert again == text and changed == []


# the repository's folders that are importable only as `hina.*`: an example must not import them by folder name
FOLDER_IMPORT = re.compile(r"^\s*(?:from|import)\s+(codec|wire|control|switch_emulator|host|baselines|sim|benchmarks|"
                           r"tables|campaign|provenance)\b", re.M)


def python_blocks(langs: tuple[str, ...] = ("python",)) -> list[tuple[Path, str]]:
    return [(page, code) for page in PAGES for lang, code in FENCE.findall(page.read_text()) if lang in langs]


def test_python_examples_import_the_installed_package():
    """The examples (run or not) use `import hina` / `from hina... import`, never a folder of the checkout by
    its own name."""
    blocks = python_blocks(("python", "py"))
    wrong = [f"{page.relative_to(ROOT)}: {m.group(0).strip()}" for page, code in blocks
             for m in FOLDER_IMPORT.finditer(code)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
def test_python_examples_run(monkeypatch):
    """Every ```python block in README and docs/ runs as written, from the repository's root."""
    monkeypatch.chdir(ROOT)
    blocks = python_blocks()
    assert blocks, "no python example in README or docs/"
    for page, code in blocks:
        exec(compile(code, str(page), "exec"), {})


# -- commands: every flag a page shows exists in that command's --help -------------------------------

def commands() -> list[tuple[Path, str]]:
    out = []
    for page in PAGES:
        for lang, code in FENCE.findall(page.read_text()):
            if lang not in ("sh", "bash"):
                continue
            for line in code.replace("\\\n", " ").splitlines():
                line = line.split(" #", 1)[0].strip()
                if line and not line.startswith("#"):
                    out.append((page, line))
    return out


def program(words: list[str]) -> tuple[tuple[str, ...], list[str]] | None:
    """(the command that prints the help, the words after it) for the commands this project ships."""
    while words and words[0] in ("sudo", "exec"):
        words = words[1:]
    if not words:
        return None
    head = words[0]
    if head.endswith("/hina") or head == "hina":
        return (sys.executable, "-m", "hina", words[1]), words[2:]
    if head.endswith("python") or head.endswith("python3"):
        if words[1] == "-m" and words[2] in ("hina.emulator", "hina"):
            return (sys.executable, "-m", words[2]), words[3:]
        if words[1] == "-m":
            return None  # pytest and friends
        if words[1].endswith(".py") and (ROOT / words[1]).exists():
            return (sys.executable, str(ROOT / words[1])), words[2:]
    return None


@functools.cache
def help_text(cmd: tuple[str, ...]) -> str:
    out = subprocess.run([*cmd, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, f"{' '.join(cmd)} --help failed: {out.stderr[-500:]}"
    return out.stdout


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


@pytest.mark.slow
def test_commands_in_readme_and_docs_name_real_targets_and_flags():
    checked, wrong = 0, []
    for page, line in commands():
        words = shlex.split(line)
        if words[0] == "make":
            missing = [w for w in words[1:] if "=" not in w and w not in make_targets()]
            wrong += [f"{page.relative_to(ROOT)}: make {w}: no such target" for w in missing]
            checked += 1
            continue
        found = program(words)
        if found is None:
            continue
        cmd, rest = found
        text = help_text(cmd)
        for flag in (w.split("=", 1)[0] for w in rest if w.startswith("--")):
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text):
                wrong.append(f"{page.relative_to(ROOT)}: `{line}`: {flag} is not in `{' '.join(cmd[1:])} --help`")
        checked += 1
    assert checked >= 10, f"only {checked} commands found in README and docs/"
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("heading, want", [
    ("The main job: `make demo`", "the-main-job-make-demo"),
    ("Where the build departs from the first design", "where-the-build-departs-from-the-first-design"),
    ("STALE_RUN, and why every member hears it", "stale_run-and-why-every-member-hears-it"),
    ("`hina.emulator`: the switch", "hinaemulator-the-switch"),
    ("`hina worker` against a running switch", "hina-worker-against-a-running-switch"),
])
def test_anchors_are_githubs(heading, want):
    assert slug(heading) == want


@pytest.mark.slow
def test_the_campaign_runs_real_scripts_with_real_flags_and_writes_where_the_tables_read(monkeypatch):
    """tools/campaign.py re-measures every figure: each step's script exists and takes each flag the
    step passes, and every result file a generated table reads is one the campaign writes."""
    import campaign  # tools/, on the path by tests/conftest.py
    import tables

    wrong, written = [], set()
    for step in campaign.steps():
        found = program(["python", *step.args])
        assert found is not None, f"{step.name}: {step.args[0]} is not a script of this checkout"
        cmd, rest = found
        text = help_text(cmd)
        wrong += [f"{step.name}: {flag} is not in `{step.args[0]} --help`"
                  for flag in (w for w in rest if w.startswith("--")) if not re.search(
                      rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text)]
        written.update(step.outputs)
    assert not wrong, "\n".join(wrong)
    assert len({s.name for s in campaign.steps()}) == len(campaign.steps()), "two steps share a name"
    read = set()
    monkeypatch.setattr(tables, "load", lambda name, _load=tables.load: read.add(name) or _load(name))
    for fn in tables.TABLES.values():
        fn()
    stray = sorted(name for name in read if f"benchmarks/results/{name}" not in written)
    assert not stray, f"tables read results no campaign step writes: {stray}"


def test_provenance_calls_a_checkout_dirty_for_code_not_for_results_or_pages(tmp_path, monkeypatch):
    """A result's meta says 'with uncommitted changes' when the code that measured it differs from its commit;
    the result files and the pages a campaign rewrites as it goes do not count."""
    from hina import provenance

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    for rel in ("codec/x.py", "benchmarks/results/r.json", "docs/p.md", "README.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("0\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    for rel in ("benchmarks/results/r.json", "docs/p.md", "README.md"):
        (tmp_path / rel).write_text("1\n")
    head, dirty = provenance.commit()
    assert head and not dirty
    (tmp_path / "codec/x.py").write_text("1\n")
    assert provenance.commit() == (head, True)


# -- figures that prose quotes from a result file --------------------------------------------------------
# A sentence that sums a table up beside it is generated with the table (tools/tables.py).  The figures
# below sit in prose further from their table, or among reasons no renderer could write; each is stated
# here as the JSON gives it, so a re-run that changes one fails this test and names the sentence to fix.

def squeeze(text: str) -> str:
    return " ".join(text.split())


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def pct(x: float, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f}%"


def span(values, fmt: str = ".2f", sep: str = "-") -> str:
    lo, hi = f"{min(values):{fmt}}", f"{max(values):{fmt}}"
    return lo if lo == hi else f"{lo}{sep}{hi}"


def numbers(texts: list[str], pattern: str) -> list[float]:
    """The number `pattern`'s group matches in each text (a verdict's percentages, say)."""
    return [float(m.group(1)) for text in texts if (m := re.search(pattern, text))]


def calibrate_figures(tables) -> list[tuple[str, str]]:
    """--calibrate's highest network-bound rates (fidelity-calibrate), quoted on four pages."""
    star8, star4, tree, xdp_star, xdp_tree = (tables.load(name) for name in tables.calibrations())
    r8, r4, rt, xs, xt = (c["highest_network_bound_mbps"] for c in (star8, star4, tree, xdp_star, xdp_tree))
    above = min(trial["mbps"] for trial in tree["trials"] if trial["mbps"] > rt)
    return [("README.md", f"network-bound on this 2-core machine ({r8:.0f} Mbit/s)"),
            ("docs/mininet.md", f"network-bound up to {r8:.0f} Mbit/s for a star of 8 workers, {r4:.0f} for a star "
                                f"of 4, and {rt:.0f} for an 8-worker leaf/spine tree"),
            ("docs/fidelity.md", f"stays network-bound up to {r8:.0f} Mbit/s, of 4 workers up to {r4:.0f} Mbit/s, and "
                                 f"of the 8-worker leaf/spine tree (three switch processes, 4:1 uplinks) up to "
                                 f"{rt:.0f} Mbit/s"),
            ("docs/trees.md", f"network-bound up to {rt:.0f} Mbit/s (not at {above:.0f};"),
            ("docs/fidelity.md", f"the XDP star holds **{xs:.0f} Mbit/s** and the XDP tree **{xt:.0f} Mbit/s**")]


def fidelity_figures(tables) -> list[tuple[str, str]]:
    """docs/fidelity.md's prose beside fidelity-compare, -gbit, -straggler, -cross, -window and -contest."""
    out = []
    name, env = tables.HEADLINE
    row = {(r["preset"], r["mode"]): r for r in tables.load(name)["rows"] if r["env"] == env}
    verdict = {k: tables.verdict_text(r) for k, r in row.items()}
    busy = numbers([v for v in verdict.values() if v.startswith("CPU-bound: the machine")], r"machine, ([\d.]+) of")
    rate = float(env.split()[1]) * 1e9  # "mininet 0.25 Gbit/s"
    lstm, deep, topk = row["lstm", "auto"], row["deeplight", "auto"], row["lstm", "oktopk_topk"]
    blocks, auto = row["bert_base", "blocks"]["seconds"], row["bert_base", "auto"]["seconds"]
    out += [f"CPU-bound: the machine ({span(busy)} of 2 cores busy)",
            f"LSTM's {tables.mb(lstm['bytes_per_worker'])} per worker take "
            f"{8 * lstm['bytes_per_worker'] / rate:.2f} s at line rate",
            f"DeepLight's {tables.mb(deep['bytes_per_worker'])} take {8e3 * deep['bytes_per_worker'] / rate:.0f} ms, "
            f"and its run is the machine's ({verdict['deeplight', 'auto'].split(',')[0]})",
            f"{'not ' * (topk['seconds'] > lstm['seconds'])}as fast as auto on LSTM ({topk['seconds']:.3f} s against "
            f"{lstm['seconds']:.3f}) with a relative error of {topk['rel_l2_error']:.2f}",
            f"blocks was {pct(1 - blocks / auto)} faster ({blocks:.3f} s against {auto:.3f})"]

    gbit = tables.load("compare.json")["rows"]
    dense = {(r["env"], r["preset"]): r["seconds"] for r in gbit if r["mode"] == "dense"}
    ratios: dict[str, list[float]] = {}
    for r in gbit:
        if r["mode"] == "ring":
            ratios.setdefault(r["env"], []).append(dense[r["env"], r["preset"]] / r["seconds"])
    out.append(f"{span(ratios['mininet 1 Gbit/s'], '.1f')}x at 1 Gbit/s and "
               f"{span(ratios['mininet 10 Gbit/s'], '.1f')}x at 10 Gbit/s")

    rows, _, base, hetero = tables.slowdown_rows("compare_faithful.json", "compare_straggler.json")
    lost = [r["lost_beyond_delay"] for r in rows if r["lost_beyond_delay"] is not None]
    key = ("env", "preset", "mode")
    hina = [(b, h) for b in base["rows"] for h in hetero["rows"]
            if b.get("system") == "hina" and all(b[k] == h[k] for k in key)]
    late = next(r for r in rows if r["preset"] == "deeplight" and r["mode"] == "auto")
    out += [f"the most any worker waited was {span([r['most_waited'] for r in rows], '.3f')} s",
            f"between {min(lost):+.2f} s and {max(lost):+.2f} s",
            f"the rounds resent {span([h['retransmissions'] for _, h in hina], 'd')} frames where the base rounds "
            f"resent {span([b['retransmissions'] for b, _ in hina], 'd')}",
            f"(hina auto on DeepLight: {late['base_seconds']:.3f} s becomes {late['seconds']:.3f} s)"]

    rows, beside, _, _ = tables.slowdown_rows("compare_faithful.json", "compare_cross.json")
    slow = {(r["preset"], r["mode"]): r for r in rows}
    crossed = [beside[r["env"], r["preset"], r["mode"]] for r in rows]
    bound = sum(tables.verdict_text(r).startswith("network-bound") for r in crossed)
    resent = {k: beside[r["env"], *k]["retransmissions"] for k, r in slow.items()}
    alltoall = [slow[p, m]["slowdown"] for p in ("lstm", "deeplight") for m in ("sparcml", "oktopk", "zen")]
    out += [f"Beside the flow {bound} of {len(crossed)} runs are network-bound",
            f"dense {slow['lstm', 'dense']['slowdown']:.2f}x on LSTM and {slow['deeplight', 'dense']['slowdown']:.2f}x "
            f"on DeepLight ({resent['lstm', 'dense']} and {resent['deeplight', 'dense']} frames resent",
            f"auto {slow['lstm', 'auto']['slowdown']:.2f}x on LSTM, and on DeepLight, whose "
            f"{tables.mb(deep['bytes_per_worker'])} per worker barely use the link, "
            f"{slow['deeplight', 'auto']['seconds']:.3f} s against {slow['deeplight', 'auto']['base_seconds']:.3f}",
            f"gloo's ring loses {slow['lstm', 'ring']['slowdown']:.1f}x on LSTM and "
            f"{slow['deeplight', 'ring']['slowdown']:.1f}x on DeepLight",
            f"The all-to-all baselines lose {span(alltoall, '.1f')}x; Zen the least "
            f"({slow['lstm', 'zen']['slowdown']:.2f}x and {slow['deeplight', 'zen']['slowdown']:.2f}x)"]

    alone, crossed = tables.load("cross_traffic.json")["runs"]
    best = [min(run["rounds"], key=lambda rd: rd["seconds"]) for run in (alone, crossed)]
    windows = [w["window"] for w in best[1]["workers"]]
    flow = crossed["flow"][0]
    out += [f"every worker's window stayed at {span([w['mean'] for w in windows], '.1f')} chunks on average and "
            f"never fell below {min(w['least'] for w in windows):.1f}",
            f"hina's best round took {best[1]['seconds']:.2f} s against {best[0]['seconds']:.2f} s alone "
            f"({best[1]['seconds'] / best[0]['seconds']:.2f}x",
            f"its sum was exact with {plural(crossed['retransmissions'], 'frame')} resent. The iperf3 flow got "
            f"{flow['mbps']:.0f} Mbit/s over its {flow['seconds']:.0f} s"]

    rule = {"delay rule alone": "delay", "contested": "contested", "fair share": "fair"}
    by = {(r["queue"], rule[r["rule"]]): r for r in tables.load("contest_model.json")["rows"]}
    deep_q = sorted(q for q, rule in by if rule == "delay" and q >= 128)
    short_q = sorted(q for q, rule in by if rule == "delay" and q < 128)
    contested = [by[q, "contested"] for q in deep_q]
    faster = [by[q, "delay"]["slowdown"] / by[q, "contested"]["slowdown"] for q in deep_q]
    gain = [100 * (by[q, "contested"]["share"] / by[q, "delay"]["share"] - 1) for q in short_q]
    out += [f"hina gets {span([100 * by[q, 'delay']['share'] for q in deep_q], '.0f')}% of the link; contested, the "
            f"window stays at {min(r['cwnd_min'] for r in contested):.0f}-{max(r['cwnd_max'] for r in contested):.0f} "
            f"chunks and hina gets {span([100 * r['share'] for r in contested], '.0f')}%, its rounds "
            f"{span(faster, '.1f')}x faster",
            f"contested it gains {span(gain, '.0f')}% more of the link",
            f"The fair-share rules keep {span([100 * r['share'] for (q, k), r in by.items() if k == 'fair'], '.0f')}% "
            "at every queue"]
    return [("docs/fidelity.md", text) for text in out]


def comparison_figures(tables) -> list[tuple[str, str]]:
    """compare.json's densities and BERT-base's blocks saving (comparison.md), the NCF capture (ddp.md), the
    switch benchmark (benchmarks.md, trees.md) and the codec's headline case (benchmarks.md)."""
    rows = tables.load("compare.json")["rows"]
    density = {r["preset"]: r["per_worker_density"] for r in rows if "per_worker_density" in r}
    bert = {(r["env"], r["mode"]): r["bytes_per_worker"] for r in rows if r["preset"] == "bert_base"}
    saved = [100 * (1 - bert[env, "blocks"] / bert[env, "dense"]) for env, mode in bert if mode == "blocks"]
    ncf = next(c for c in tables.load("capture_torch.json")["cases"] if c["model"].startswith("NCF"))
    bench = tables.load("switch_bench.json")["rows"]
    one = {r["mode"]: r for r in bench if r["switch"] == "emulator" and r["pipes"] == 1}
    resent = span([100 * r["resent"] / r["frames"] for r in bench], ".0f")
    case = [r for r in tables.load("codec_bench_numba_2e25.json")["rows"] if r["kind"] == "uniform"
            and r["length"] == 1 << 25 and r["density"] == 0.01 and r["workers"] == 8]
    auto = next(r for r in case if r["mode"] == "auto")
    return [("docs/comparison.md", f"({pct(density['ncf'])} / {pct(density['bert_base'])} / "
                                   f"{pct(density['vgg19'])} per worker"),
            ("docs/comparison.md", f"blocks saves about {span(saved, '.0f')}% of the bytes"),
            ("docs/ddp.md", f"({pct(ncf['real']['per_worker'])} per worker, {pct(ncf['real']['union'])} union at "
                            "8 workers"),
            ("docs/benchmarks.md", f"the one-pipe emulator is {one['dense']['bmv2_over_best']:.0f}x faster on dense "
                                   f"and {one['auto']['bmv2_over_best']:.0f}x on auto, best round to best round "
                                   f"({one['dense']['bmv2_over_median']:.0f}x and "
                                   f"{one['auto']['bmv2_over_median']:.0f}x by medians)"),
            ("docs/benchmarks.md", f"resend {resent}% of their frames"),
            ("docs/trees.md", f"in the 3-worker BMv2 star of `switch_bench.py` {resent}% of frames are resent"),
            ("docs/benchmarks.md", f"Here auto (aligned) encodes in {auto['encode_x_copy']:.2f}x a copy and decodes "
                                   f"in {auto['decode_x_copy']:.2f}x")]


def trees_figures(tables) -> list[tuple[str, str]]:
    """docs/trees.md's prose beside trees-mininet-exact, trees-bmv2 and trees-compare."""
    out = []

    def leaves(data: dict, key: str) -> int:
        """A counter summed over the leaves' jobs (they count for the network's life: its last run has all)."""
        switches = data["runs"][-1].get("switches") or {}
        return sum(job.get(key) or 0 for name, sw in switches.items() if name.startswith("l")
                   for job in sw["jobs"].values())

    def resends(data: dict) -> int:
        return sum(x["retransmissions"] for r in data["runs"] for x in r["rounds"])

    quiet, lossy, spread = (tables.load(n) for n in tables.TREE_RUNS)
    up, again, again_quiet = leaves(lossy, "sent_up"), leaves(lossy, "resent_up"), leaves(quiet, "resent_up")
    dropped = sum(v[w] for r in lossy["runs"] for v in (r.get("uplink_drops") or {}).values() for w in ("up", "down"))
    out += [f"with 1% loss on every link the uplinks dropped {dropped:,} frames, the workers resent "
            f"{resends(lossy):,}, and the leaves sent {up:,} partials up once and {again:,} up again "
            f"({pct(again / up)}); with no loss, {again_quiet:,} up again "
            f"({pct(again_quiet / leaves(quiet, 'sent_up'), 1)}",
            f"the leaves sent {leaves(spread, 'resent_up'):,} partials up again for {resends(spread):,} worker "
            f"resends"]

    bmv2 = {name: tables.load(f"trees/bmv2/{name}.json")["runs"] for name, _ in tables.campaign.BMV2_TREES}
    mixed = [b["seconds"] / e["seconds"] for b, e in zip(bmv2["bmv2-leaves-emulator-spine"],
                                                         bmv2["emulator-leaves-bmv2-spine"])]
    plain = bmv2["bmv2-spine-plain-leaves"]
    i = next(i for i, r in enumerate(plain) if r["mode"] == "dense")
    auto, aligned = (next(r for r in plain if r["mode"] == m) for m in ("auto", "aligned"))

    def duplicates(run: dict) -> int:  # the spine's counter, for the network's life up to this run
        return sum((sw.get("drops") or {}).get("duplicate", 0) for sw in (run.get("switches") or {}).values())

    out += [f"a tree runs {span(mixed, '.1f')}x faster, mode by mode, than with BMv2 leaves under an emulator spine",
            f"in this run (commit {tables.load('trees/bmv2/bmv2-spine-plain-leaves.json')['commit'][:7]}) they took "
            f"{auto['seconds']:.2f} s and {aligned['seconds']:.2f} s",
            f"the workers resent {sum(x['retransmissions'] for r in plain for x in r['rounds']):,} frames in the five "
            f"modes, {plain[i]['retransmissions']:,} of them in dense's {plain[i]['frames']:,}: "
            f"{plain[i]['timeouts']:,} on a timeout, {plain[i]['asked']:,} asks of a chunk the spine held, "
            f"{plain[i]['probes']:,} tail probes",
            f"the spine dropped {duplicates(plain[i]) - duplicates(plain[i - 1]):,} of dense's frames as duplicates"]

    rows = tables.load("trees/tree-compare.json")["rows"]
    tc = {(r["preset"], r["mode"]): r for r in rows if not r["env"].startswith("loopback")}

    def s(p: str, m: str) -> float:
        return tc[p, m]["seconds"]

    def uplink(p: str, m: str) -> float:
        return tc[p, m]["uplink_bytes_per_aggregation"] / tc[p, "ring"]["uplink_bytes_per_aggregation"]

    dense_presets, alltoall = ("ncf", "bert_base", "vgg19"), ("sparcml", "oktopk", "zen")
    pairs = [(p, m) for p in dense_presets for m in alltoall]
    dense_runs = [(p, "dense") for p in tables.PRESETS] + [(p, "auto") for p in dense_presets]
    short = {"sparcml": "SparCML", "oktopk": "Ok-Topk", "oktopk_topk": "Ok-Topk top-k", "zen": "Zen",
             "ring": "gloo's ring"}
    fastest = min(short, key=lambda m: s("deeplight", m))
    out += [f"on DeepLight {s('deeplight', 'auto'):.3f} s, {s('deeplight', fastest) / s('deeplight', 'auto'):.1f}x "
            f"ahead of the fastest baseline ({short[fastest]}, {s('deeplight', fastest):.3f} s)",
            f"{s('deeplight', 'zen') / s('deeplight', 'auto'):.1f}x ahead of Zen ({s('deeplight', 'zen'):.3f} s) and "
            f"{s('deeplight', 'ring') / s('deeplight', 'auto'):.0f}x ahead of the ring",
            f"on LSTM {s('lstm', 'auto'):.3f} s, {s('lstm', 'zen') / s('lstm', 'auto'):.1f}x ahead of the fastest "
            f"lossless baseline (Zen, {s('lstm', 'zen'):.3f} s), {s('lstm', 'ring') / s('lstm', 'auto'):.0f}x ahead "
            f"of the ring, and ahead of the lossy Ok-Topk top-k too ({s('lstm', 'oktopk_topk'):.3f} s, relative error "
            f"{tc['lstm', 'oktopk_topk']['rel_l2_error']:.2f})",
            f"1/{1 / uplink('deeplight', 'auto'):.0f} of the ring's on DeepLight and "
            f"1/{1 / uplink('lstm', 'auto'):.0f} on LSTM",
            f"dense aggregation came to {span([uplink(p, 'dense') for p in tables.PRESETS], '.3f')} of the ring's "
            f"(1/{span([1 / uplink(p, 'dense') for p in tables.PRESETS], '.2f', '-1/')})",
            f"**Missed by {span([100 * (1.75 * uplink(p, m) - 1) for p, m in dense_runs], '.1f')}%",
            f"they moved {span([uplink(p, m) for p, m in pairs], '.1f')}x the ring's bytes over the uplinks and took "
            f"{span([s(p, m) for p, m in pairs], '.1f')} s against the ring's "
            f"{span([s(p, 'ring') for p in dense_presets], '.1f')} s",
            f"(LSTM {span([s('lstm', m) for m in alltoall])} s) but "
            f"{span([s('lstm', m) / s('lstm', 'auto') for m in alltoall], '.0f')}x behind hina"]
    return [("docs/trees.md", text) for text in out]


def scale_model_figures(tables) -> list[tuple[str, str]]:
    """docs/scale_model.md's prose beside the validation, projection, workers and K = 32 tables."""
    out = []
    model = tables.load("scale_model.json")
    val = model["validation"]
    bound = [v for v in val if v["verdict"].startswith("network-bound")]
    verdicts = [v["verdict"] for v in bound]
    short = [v for v in val if v["mode"] == "auto" and v["workload"] == "deeplight"]
    at, sending = numbers(verdicts, r"at (\d+)% of"), numbers(verdicts, r"sending (\d+)% of")
    out += [f"measured / model {span([v['ratio'] for v in bound])}**",
            f"the busiest link ran at {span(at, '.0f')}% of its rate while sending and sent for "
            f"{span(sending, '.0f')}% of the window",
            "The 8-worker runs at 100 Mbit/s are the furthest off "
            f"({span([v['ratio'] for v in bound if v['workers'] == 8 and v['mbps'] == 100])})",
            f"in all {len(val)} rows",
            f"({span([v['measured_seconds'] for v in short])} s, of which the model's network time is "
            f"{span([v['model_network_seconds'] for v in short])} s)"]

    proj = {(r["preset"], r["topology"], r["workers"], r["gbps"]): r for r in model["projection"]}
    n = max(r["workers"] for r in model["projection"])

    def tree(preset: str, workers: int = n, gbps: float = 100.0) -> dict:
        return proj[preset, "tree2", workers, gbps]

    deep, lstm = tree("deeplight"), {w: tree("lstm", w) for w in (8, 32, 128)}
    rounds = deep["hina_auto"]["rounds"]  # the first round, the index's rounds, the values
    ring = {w: [r["ring"]["seconds"] / r["dense_ina"]["seconds"] for k, r in proj.items() if k[2] == w and k[3] == 100]
            for w in (8, n)}
    out += [f"hina auto is **{deep['speedup_vs_dense']:.1f}x** faster than dense INA at {n:,} workers and 100 "
            f"Gbit/s ({n:,} workers' union is {pct(deep['union_density'], 1)} of the elements",
            f"{sum(map(sum, rounds[1:-1])) / 1e6:.1f}M words, then the union's {sum(rounds[-1]) / 1e6:.1f}M values: "
            f"{deep['hina_auto']['words_per_worker'] / 1e6:.1f}M words per worker against dense's "
            f"{deep['dense_ina']['words_per_worker'] / 1e6:.1f}M",
            f"and {deep['speedup_vs_ring']:.0f}x faster than the ring. At 8 workers the union is "
            f"{pct(tree('deeplight', 8)['union_density'], 2)} and the speedup "
            f"{tree('deeplight', 8)['speedup_vs_dense']:.0f}x",
            "(" + ", ".join(f"{tree('deeplight', w)['speedup_vs_dense']:.0f}x at {w}" for w in (32, 128, 512)) + ")",
            f"At 400 Gbit/s it is {tree('deeplight', n, 400.0)['speedup_vs_dense']:.1f}x",
            f"{lstm[8]['speedup_vs_dense']:.1f}x at 8 workers (union {pct(lstm[8]['union_density'], 1)}), "
            f"{lstm[32]['speedup_vs_dense']:.1f}x at 32, {lstm[128]['speedup_vs_dense']:.1f}x at 128 "
            f"({lstm[128]['hina_auto']['encoding']})",
            f"union covers {pct(tree('lstm')['union_density'], 2)} of the vocabulary tables",
            "their unions are dense at 8 workers already "
            f"({span([100 * tree(p, 8)['union_density'] for p in ('ncf', 'bert_base', 'vgg19')], '.0f')}%)",
            f"dense in-network aggregation alone is {span(ring[8])}x faster at 8 workers and "
            f"{span(ring[n], '.1f')}x at {n:,}"]

    k32 = {data["parameters"]["slots"]: {r["preset"]: r for r in data["projection"]}
           for data in (tables.load("scale_model_k32_w64.json"), tables.load("scale_model_k32_w1024.json"))}
    vgg = k32[64]["vgg19"]
    out += [f"dense INA on VGG19 takes {vgg['dense_ina']['seconds']:.2f} s instead of "
            f"{tree('vgg19')['dense_ina']['seconds']:.3f} s, and the ring ({vgg['ring']['seconds']:.2f} s) wins; "
            f"with 1,024 slots it is {k32[1024]['vgg19']['dense_ina']['seconds']:.3f} s",
            f"(DeepLight {k32[64]['deeplight']['speedup_vs_dense']:.1f}x and "
            f"{k32[1024]['deeplight']['speedup_vs_dense']:.1f}x)"]
    return [("docs/scale_model.md", text) for text in out]


def share_figures(tables) -> list[tuple[str, str]]:
    """cross_traffic/*.json: hina's share of a link beside TCP, the default fair-share rules and the delay rule
    alone (fidelity, worker, deploy, design)."""
    def rows(name: str) -> list[tuple[float, float, float]]:
        """(rate, least share beside the flow, slowest round beside it over the best alone) per rate."""
        runs = tables.load(f"cross_traffic/{name}.json")["runs"]
        return [(b["bw"], min(x["share"] for x in b["rounds"]),
                 max(x["seconds"] for x in b["rounds"]) / min(x["seconds"] for x in a["rounds"]))
                for a, b in zip(runs[0::2], runs[1::2])]

    fair = rows("fair") + rows("fair_cap")
    delay, capped = rows("delay"), rows("delay_cap")
    kept = span([100 * r[1] for r in fair], ".0f")
    held = [100 * r[1] for r in capped] + [100 * r[1] for r in delay if r[0] >= 100]
    fell = span([100 * r[1] for r in delay if r[0] < 100], ".0f")
    return [("docs/fidelity.md", f"hina keeps {kept}% of the contested link at every rate from 30 to 200 Mbit/s"),
            ("docs/fidelity.md", f"its rounds {span([r[2] for r in fair], '.1f')}x their time alone"),
            ("docs/fidelity.md", f"The delay rule alone keeps {span(held, '.0f')}%"),
            ("docs/fidelity.md", f"but {fell}% at 30 and 60"),
            ("docs/fidelity.md", f"hina gets {fell}% of the link"),
            ("docs/worker.md", f"they keep {kept}% of the link from 30 to 200"),
            ("docs/deploy.md", f"keep hina at {kept}% of"),
            ("docs/design.md", f"They hold {kept}% of a link beside TCP from 30 to 200 Mbit/s, the delay rule "
                               f"alone {span([100 * r[1] for r in delay + capped], '.0f')}%")]


def quoted_figures() -> list[tuple[str, str]]:
    """(page, text) for every figure prose quotes away from its generated table, computed from the JSON."""
    import tables  # tools/, on the path by tests/conftest.py

    return [*calibrate_figures(tables), *fidelity_figures(tables), *comparison_figures(tables),
            *trees_figures(tables), *scale_model_figures(tables), *share_figures(tables)]


def test_prose_quotes_the_result_files_figures():
    """A figure that README or a page quotes away from its table is the one its result file holds today."""
    wrong = [f"{page}: expected (from benchmarks/results) {text!r}" for page, text in quoted_figures()
             if squeeze(text) not in squeeze(prose((ROOT / page).read_text()))]
    assert not wrong, ("prose no longer matches its result file; rewrite it (or generate it in tools/tables.py):\n"
                       + "\n".join(wrong))
