"""tools/reproduce.py's claims and tools/campaign.py's guards, on the committed result files and tiny stand-in steps
(nothing here runs Mininet, BMv2 or a benchmark): every claim names real campaign steps and reads their outputs,
its extractor reads the committed figures the pages print, a re-run never writes into benchmarks/results/, and the
campaign refuses a checkout with uncommitted code before any step runs and records each step's time."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import campaign  # tools/, on the path by tests/conftest.py
import pytest
import reproduce
import tables

from hina import provenance

CLAIMS = list(reproduce.CLAIMS.values())


def by_name(figures: list[reproduce.Figure]) -> dict[str, reproduce.Figure]:
    return {f.name: f for f in figures}


# -- the registry --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.name)
def test_every_claim_names_campaign_steps_and_reads_their_outputs(claim):
    steps = {s.name: s for s in campaign.steps()}
    assert claim.steps and all(name in steps for name in claim.steps), claim.steps
    written = {o for name in claim.steps for o in steps[name].outputs}
    assert claim.files and all(f"{campaign.R}/{name}" in written for name in claim.files), (claim.files, written)
    assert claim.statement.endswith(".") and not re.search(r"\d+(\.\d+)?x\b", claim.statement), \
        "a statement states no figure: those come from the result files"


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.name)
def test_every_extractor_reads_the_committed_figures_and_verdicts(claim):
    figures = reproduce.committed_figures(claim)
    assert figures and len(by_name(figures)) == len(figures), "figure names are unique within a claim"
    for f in figures:
        t = f.tolerance
        assert t.why and t.kind, f.name
        if t.rel is None:
            assert f.value is True, f"{claim.name}: {f.name} is a claim, so it held when committed"
        else:
            assert not isinstance(f.value, bool) and math.isfinite(f.value) and f.value > 0, (f.name, f.value)
            assert t.holds(f.value, f.value)
        for v in f.verdicts:  # every Mininet figure says what set each time it divides
            assert v and "not monitored" not in v, (f.name, v)
    results = reproduce.load_results(claim, reproduce.RESULTS)
    mininet = any(s.group in ("mininet", "bmv2") for s in reproduce.steps_of(claim))
    if mininet:
        assert all(reproduce.what_set_the_time(results[name]) for name in claim.files), claim.name
    if any(f.verdicts for f in figures):
        assert mininet


def test_the_figures_are_the_ones_the_pages_print():
    """The extractors read what the generated tables say: README's headline sentence, the scale table, the tree
    and leaves tables, the TTA headline (so an extractor reading the wrong row or dividing the wrong way fails)."""
    faithful = tables.load(tables.HEADLINE[0])
    sentence = tables.compare_summary_line(faithful, tables.HEADLINE[1])
    leads = {p: by_name(reproduce.committed_figures(reproduce.CLAIMS[f"compare-{p}"])) for p in ("deeplight", "lstm")}
    over_dense = " and ".join(tables.times(leads[p]["hina auto over dense INA, seconds"].value)
                              for p in ("deeplight", "lstm"))
    over_best = " and ".join(tables.times(leads[p]["hina auto over the fastest lossless baseline, seconds"].value)
                             for p in ("deeplight", "lstm"))
    assert f"it was {over_best} faster than the fastest lossless baseline" in sentence, sentence
    assert f"and {over_dense} faster than dense in-network aggregation" in sentence, sentence
    ring = [f.value for f in reproduce.committed_figures(reproduce.CLAIMS["dense-vs-ring"])]
    assert f"Dense in-network aggregation was {tables.span(ring)}x faster than gloo's ring" in sentence
    on_dense = [f.value for f in reproduce.committed_figures(reproduce.CLAIMS["auto-dense-models"])
                if not isinstance(f.value, bool)]
    assert f"it took {tables.span(on_dense)} of dense's seconds" in sentence

    scale = by_name(reproduce.committed_figures(reproduce.CLAIMS["scale-deeplight"]))
    row = next(line for line in tables.readme_scale().splitlines() if line.startswith("| deeplight |"))
    assert f"| {scale['deeplight: hina auto over dense INA'].value:.2f}x | " \
           f"{scale['deeplight: hina auto over the ring'].value:.2f}x |" in row

    ns3 = by_name(reproduce.committed_figures(reproduce.CLAIMS["ns3-deeplight"]))
    row = next(line for line in tables.ns3_at_1024().splitlines() if line.startswith("| deeplight | leaf_spine |"))
    assert f"| {ns3['deeplight, 1024 workers, leaf/spine: hina auto over dense on ns-3'].value:.2f}x / " in row

    leaves = [f.value for f in reproduce.committed_figures(reproduce.CLAIMS["tree-leaves"]) if "bytes up" in f.name]
    assert f"Summing at the leaf sends {tables.span(leaves)}x fewer bytes up each uplink" in tables.trees_leaves()

    tta = by_name(reproduce.committed_figures(reproduce.CLAIMS["tta"]))
    fewer = tta["payload bytes per step: dense INA's over hina's"]
    headline = tables.tta_headline()
    assert f"sent {fewer.value:.1f}x fewer bytes" in headline
    dense, gloo = (tta[f"reached the target: {who}'s seconds over hina's"].value for who in ("dense INA", "gloo"))
    assert f"the target {dense:.1f}x sooner than dense in-network aggregation, {gloo:.1f}x sooner" in headline

    for preset in ("deeplight", "lstm"):
        tree = by_name(reproduce.committed_figures(reproduce.CLAIMS[f"tree-{preset}"]))
        ring = tree["gloo's ring's uplink bytes over hina auto's"].value
        assert f"| {1 / ring:.3f} |" in tables.readme_trees()


def test_a_tolerance_holds_within_its_width_and_on_its_better_side():
    two = reproduce.Tolerance("t", 0.1, "why")
    assert two.holds(2.0, 2.19) and two.holds(2.0, 1.81) and not two.holds(2.0, 2.3) and not two.holds(2.0, 1.7)
    up = reproduce.Tolerance("t", 0.3, "why", better="higher")
    assert up.holds(10.0, 7.1) and up.holds(10.0, 50.0) and not up.holds(10.0, 6.9)
    down = reproduce.Tolerance("t", 0.25, "why", better="lower")
    assert down.holds(1.7, 0.5) and down.holds(1.7, 2.1) and not down.holds(1.7, 2.2)
    assert reproduce.EXACT.holds(True, True) and not reproduce.EXACT.holds(True, False)
    with pytest.raises(ValueError, match="better"):
        reproduce.Tolerance("t", 0.1, "why", better="sideways")


# -- the command line ------------------------------------------------------------------------------------------

def test_a_bad_claim_name_exits_2_with_one_line_naming_it_and_the_claims(capsys):
    assert reproduce.main(["no-such-claim"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'no-such-claim'" in err and all(name in err for name in reproduce.CLAIMS)


def test_committed_only_prints_the_committed_figures(capsys):
    assert reproduce.main(["--committed-only", "demo", "compare-lstm"]) == 0
    out = capsys.readouterr().out
    for name in ("demo", "compare-lstm"):
        claim = reproduce.CLAIMS[name]
        assert f"{name}: {claim.statement}" in out
        for f in reproduce.committed_figures(claim):
            assert f"  {f.name}: {f.text()} ({f.tolerance.rule()})" in out
    assert "verdicts: auto " in out and "what set the time: network-bound" in out
    assert "compare-deeplight" not in out


def test_without_a_claim_every_claim_is_listed_with_its_needs_time_and_tolerance(capsys, monkeypatch):
    monkeypatch.setattr(reproduce, "timings", lambda: {"demo": {"seconds": 75.0}})
    assert reproduce.main([]) == 0
    out = capsys.readouterr().out
    for claim in CLAIMS:
        assert f"{claim.name}: {claim.statement}" in out
    assert "needs: root, Mininet; time: not yet timed; campaign steps: compare-faithful" in out
    assert "time: about 1m15s; campaign steps: demo" in out
    assert "tolerance, exactness: pass/fail: " in out
    # it ends saying how to run a claim, and which this machine can run
    lines = out.rstrip().splitlines()
    tail = lines[lines.index("To re-run a claim here and check it against its committed figures:"):]
    assert len(tail) <= 6 and tail[1].split()[:2] == ["make", "reproduce"] and "CLAIM=NAME" in tail[1]
    assert "tools/reproduce.py NAME" in tail[2]
    here = tail[3].split("): ", 1)[1].rstrip(".").split(", ")
    assert here == [c.name for c in CLAIMS if not reproduce.missing(c)] and "demo" in here


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.name)
def test_a_rerun_writes_only_into_its_scratch_folder_and_reads_its_inputs_where_they_are(claim, tmp_path):
    for step in reproduce.steps_of(claim):
        moved = reproduce.scratch_step(step, tmp_path)
        args = list(moved.args)
        outs = [args[i + 1] for i, word in enumerate(args[:-1]) if word == "--out"]
        assert outs, f"{step.name}: no --out"
        for path in [*outs, *moved.outputs]:
            assert not provenance.committed(path) and Path(path).is_relative_to(tmp_path), (step.name, path)
        changed = [(a, b) for a, b in zip(step.args, moved.args) if a != b]
        assert len(changed) == len(outs), f"{step.name}: only --out's value changes: {changed}"
    assert all(str(tmp_path / name) in {o for s in reproduce.steps_of(claim)
                                         for o in reproduce.scratch_step(s, tmp_path).outputs}
               for name in claim.files)


def test_the_scale_models_inputs_stay_the_committed_mininet_runs(tmp_path):
    step = reproduce.scratch_step(reproduce.steps_of(reproduce.CLAIMS["scale-deeplight"])[0], tmp_path)
    inputs = step.args[step.args.index("--validate") + 1:step.args.index("--out")]
    assert inputs and all(x.startswith(f"{campaign.R}/validation/") for x in inputs)


def test_out_into_the_committed_figures_is_refused(capsys):
    assert reproduce.main(["demo", "--out", str(provenance.COMMITTED / "x")]) == 2
    assert "never writes into benchmarks/results/" in capsys.readouterr().err


def test_a_claim_this_machine_cannot_run_is_refused_in_one_line_before_anything_runs(capsys, monkeypatch, tmp_path):
    ran = []
    monkeypatch.setattr(campaign, "unavailable", lambda group: None if group in ("loopback", "model") else
                        "needs root (sudo)")
    monkeypatch.setattr(campaign, "run_step", lambda step, bar: ran.append(step) or 0)
    assert reproduce.main(["demo", "tree-lstm", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "reproduce.py: tree-lstm cannot run here: needs root (sudo)"
    assert not ran and not (tmp_path / "r").exists()


# -- a re-run, with a stand-in step ------------------------------------------------------------------------------

STEP_CODE = """import json, sys
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--out") + 1])
if "benchmarks/results" in str(out.resolve()):  # were the rewriting broken, still never touch the committed figures
    sys.exit(3)
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"meta": {"command": "stand-in"}, "dense_s": 2.0, "hina_s": %r, "exact": True}))
print("stand-in step ran")
"""


def stand_in(monkeypatch, tmp_path: Path, hina_seconds: float) -> reproduce.Claim:
    """A claim of one stand-in step (a few lines of Python writing a result where --out says), its committed
    result in a folder of its own."""
    committed = tmp_path / "committed"
    (committed / "x").mkdir(parents=True)
    (committed / "x" / "stand_in.json").write_text(json.dumps({"dense_s": 2.0, "hina_s": 0.5, "exact": True}))
    step = campaign.Step("stand-in", "loopback", ("-c", STEP_CODE % hina_seconds, "--out",
                                                  f"{campaign.R}/x/stand_in.json"), "a stand-in",
                         outputs=(f"{campaign.R}/x/stand_in.json",))

    def extract(results):
        r = results["x/stand_in.json"]
        return [reproduce.Figure("hina over dense", r["dense_s"] / r["hina_s"], reproduce.LEAD),
                reproduce.Figure("exact", r["exact"], reproduce.EXACT)]

    claim = reproduce.Claim("stand-in", "A stand-in.", ("stand-in",), ("x/stand_in.json",), extract)
    monkeypatch.setattr(reproduce, "RESULTS", committed)
    monkeypatch.setattr(reproduce, "CLAIMS", {"stand-in": claim})
    monkeypatch.setattr(campaign, "steps", lambda: [step])
    return claim


def test_a_rerun_within_tolerance_reproduces(monkeypatch, tmp_path, capsys):
    stand_in(monkeypatch, tmp_path, hina_seconds=0.6)  # 3.3x against the committed 4x: 83% of it
    scratch = tmp_path / "scratch"
    assert reproduce.main(["stand-in", "--out", str(scratch)]) == 0
    out = capsys.readouterr().out
    assert "hina over dense: committed 4.00x, new 3.33x, 0.83 of it (at least 70% of it): reproduced" in out
    assert "exact: committed yes, new yes (pass/fail): reproduced" in out
    assert "2 of 2 figures reproduced" in out and str(scratch) in out
    assert json.loads((scratch / "x" / "stand_in.json").read_text())["hina_s"] == 0.6
    assert json.loads((tmp_path / "committed" / "x" / "stand_in.json").read_text())["hina_s"] == 0.5


def test_a_rerun_outside_tolerance_is_not_reproduced(monkeypatch, tmp_path, capsys):
    stand_in(monkeypatch, tmp_path, hina_seconds=1.0)  # 2x against the committed 4x
    assert reproduce.main(["stand-in", "--out", str(tmp_path / "scratch")]) == 1
    out = capsys.readouterr().out
    assert "hina over dense: committed 4.00x, new 2.00x, 0.50 of it (at least 70% of it): NOT REPRODUCED" in out
    assert "not reproduced: stand-in (hina over dense)" in out


def test_dry_run_prints_the_rewritten_commands_and_runs_nothing(monkeypatch, tmp_path, capsys):
    stand_in(monkeypatch, tmp_path, hina_seconds=0.5)
    assert reproduce.main(["stand-in", "--dry-run", "--out", str(tmp_path / "scratch")]) == 0
    assert f"--out {tmp_path / 'scratch' / 'x' / 'stand_in.json'}" in capsys.readouterr().out
    assert not (tmp_path / "scratch").exists()


# -- the campaign: refused on uncommitted code, each step's time recorded ------------------------------------------

@pytest.fixture
def steps_run(monkeypatch):
    """campaign.run_step replaced by a recorder (no step runs), HINA_ALLOW_DIRTY unset (restored after)."""
    ran = []
    monkeypatch.setattr(campaign, "run_step", lambda step, bar: ran.append(step.name) or 0)
    monkeypatch.setenv(provenance.ALLOW_DIRTY, "0")
    return ran


def test_the_campaign_refuses_uncommitted_code_before_any_step_runs(monkeypatch, tmp_path, capsys, steps_run):
    monkeypatch.setattr(provenance, "changes", lambda: [" M host/window.py", "?? host/new.py"])
    out = tmp_path / "campaign.json"
    assert campaign.main(["--only", "demo", "--no-tables", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "host/window.py, host/new.py" in err and "--allow-dirty" in err
    assert not steps_run and not out.exists()


def test_the_campaign_runs_drafts_with_allow_dirty(monkeypatch, tmp_path, steps_run):
    monkeypatch.setattr(provenance, "changes", lambda: [" M host/window.py"])
    out = tmp_path / "campaign.json"
    assert campaign.main(["--only", "demo", "--no-tables", "--allow-dirty", "--out", str(out)]) == 0
    assert steps_run == ["demo"]
    assert os.environ[provenance.ALLOW_DIRTY] == "1", "the steps write their drafts too"
    entry = json.loads(out.read_text())["steps"]["demo"]
    assert entry["dirty"] is True


def test_a_dry_run_writes_no_timings(monkeypatch, tmp_path, steps_run):
    monkeypatch.setattr(provenance, "changes", lambda: [])
    out = tmp_path / "campaign.json"
    assert campaign.main(["--only", "demo", "loss-model", "--dry-run", "--out", str(out)]) == 0
    assert not steps_run and not out.exists()


def test_each_step_that_ran_records_its_time_and_a_rerun_replaces_only_its_own(monkeypatch, tmp_path, steps_run):
    monkeypatch.setattr(provenance, "changes", lambda: [])
    out = tmp_path / "campaign.json"
    provenance.write_result(out, {"steps": {"soak": {"seconds": 61.0, "commit": "old"}}}, "python tools/campaign.py")
    assert campaign.main(["--only", "demo", "loss-model", "--no-tables", "--out", str(out)]) == 0
    assert steps_run == ["loss-model", "demo"]
    data = json.loads(out.read_text())
    assert data["meta"]["command"].startswith("python tools/campaign.py --only demo loss-model")
    assert set(data["steps"]) == {"soak", "demo", "loss-model"} and data["steps"]["soak"]["seconds"] == 61.0
    demo = data["steps"]["demo"]
    assert demo["group"] == "loopback" and demo["seconds"] >= 0 and len(demo["load_before"]) == 3
    assert demo["cpu_seconds"] >= 0 and demo["cpus"] == os.cpu_count()
    assert demo["commit"] == provenance.commit()[0] and demo["dirty"] is False
    monkeypatch.setattr(campaign, "run_step", lambda step, bar: 1)  # a failed step's time is not recorded
    assert campaign.main(["--only", "soak", "--no-tables", "--out", str(out)]) == 1
    assert json.loads(out.read_text())["steps"]["soak"]["seconds"] == 61.0


def test_a_steps_cpu_seconds_are_its_processes():
    """What children_cpu counts: a step's process (and its own children) once it has ended, not this one."""
    before = campaign.children_cpu()
    work = "sum(range(4_000_000))"
    code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {work!r}]); {work}"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert campaign.children_cpu() - before > 0.05


def test_reproduce_reads_the_campaigns_times(monkeypatch, tmp_path):
    monkeypatch.setattr(reproduce, "RESULTS", tmp_path)
    assert reproduce.timings() == {} and reproduce.time_text(reproduce.CLAIMS["demo"]) == "not yet timed"
    provenance.write_result(tmp_path / Path(campaign.TIMINGS).name,
                            {"steps": {"demo": {"seconds": 42.0}, "exact-leafspine214": {"seconds": 60.0}}},
                            "python tools/campaign.py")
    assert reproduce.time_text(reproduce.CLAIMS["demo"]) == "about 42s"
    assert reproduce.time_text(reproduce.CLAIMS["exact-trees"]) == "not yet timed", "until every step is timed"
    # what set the time, where the campaign recorded it: the CPUs, the worst load before a step, the CPU seconds
    names = [f"exact-leafspine214{x}" for x in ("", "-loss1")] + ["exact-leafspine422-loss1"]
    entries = {name: {"seconds": 40.0 + i, "cpus": 2, "load_before": [0.5 + i, 1.0, 1.0], "cpu_seconds": 30.0}
               for i, name in enumerate(names)}
    assert reproduce.time_text(reproduce.CLAIMS["exact-trees"], entries) == \
        "about 2m03s (2 CPUs, load 2.5 before it, 1m30s of CPU)"
    entries[names[0]].pop("cpu_seconds")  # an entry from before CPU seconds were recorded: none summed
    assert reproduce.time_text(reproduce.CLAIMS["exact-trees"], entries) == "about 2m03s (2 CPUs, load 2.5 before it)"


def test_reproduce_runs_as_a_script():
    out = subprocess.run([sys.executable, str(reproduce.ROOT / "tools" / "reproduce.py"), "nope"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "'nope'" in out.stderr


def test_the_pages_table_shows_the_campaigns_times_and_names_their_run(monkeypatch, tmp_path):
    monkeypatch.setattr(reproduce, "timings_file", lambda: tmp_path / "never-run.json")
    assert "| not yet timed |" in tables.reproduce_table()
    timed = tmp_path / "campaign.json"
    provenance.write_result(timed, {"steps": {"demo": {"seconds": 75.0}}}, "python tools/campaign.py --only demo")
    monkeypatch.setattr(reproduce, "timings_file", lambda: timed)
    text = tables.reproduce_table()
    row = next(line for line in text.splitlines() if line.startswith("| `demo` "))
    assert "| `make reproduce CLAIM=demo` | about 1m15s |" in row
    assert "Source: `benchmarks/results/campaign.json`, from `python tools/campaign.py --only demo`" in text
    assert "`sudo make reproduce CLAIM=tree-lstm` | not yet timed |" in text


# -- --switch xdp: the claims' Mininet steps through the XDP switch ------------------------------------------------

def test_a_step_is_switched_where_it_ran_the_emulator_and_bmv2_stays():
    """mininet/run.py, compare.py and time_to_accuracy.py steps run the XDP switch wherever the emulator ran (given
    or by default); BMv2 stays BMv2; a step of another script, or off Mininet, is not switched."""
    by = {s.name: s for s in campaign.steps()}

    def args(name):
        return list(reproduce.switched(by[name], "xdp").args)

    assert args("compare-faithful")[-2:] == ["--switch", "xdp"]
    assert args("tta-4")[-2:] == ["--switch", "xdp"]
    mixed = args("tree-emulator-leaves-bmv2-spine")
    assert mixed[mixed.index("--switch") + 1:mixed.index("--switch") + 2] == ["xdp"] and "emulator" not in mixed
    assert args("tree-bmv2-leaves-emulator-spine").count("xdp") == 1  # the spine; the leaves stay BMv2
    assert args("tree-bmv2-leafspine214") == list(by["tree-bmv2-leafspine214"].args)  # BMv2 only: as it was
    assert all(reproduce.switched(by[name], "xdp") is None for name in ("cross-traffic-fair", "switch-bench", "demo"))


def test_switch_xdp_refuses_a_claim_it_would_not_change_and_dry_runs_the_switched_commands(capsys, tmp_path):
    assert reproduce.main(["--switch", "xdp", "demo", "tree-lstm", "--dry-run", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("reproduce.py: --switch xdp: no step of demo runs a hina switch")
    assert "tree-lstm" in err[0].split("re-runs: ")[1]
    assert reproduce.main(["--switch", "xdp", "tree-leaves", "--dry-run", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    commands = [line for line in lines if "): python " in line]  # then what the cache says of the link rates
    assert len(commands) == 4 and all(line.endswith("--switch xdp") or "--switch xdp " in line for line in commands)
    assert all(line.startswith("tree-leaves: needs ") for line in lines if line not in commands)


def test_switch_xdp_needs_the_xdp_switch_here(monkeypatch, capsys, tmp_path):
    from hina.emulator.xdp import build

    monkeypatch.setattr(build, "cannot_load", lambda: "needs root (CAP_BPF)")
    assert reproduce.main(["--switch", "xdp", "tree-leaves", "--out", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.strip() == ("reproduce.py: --switch xdp: the XDP switch cannot run here: needs "
                                               "root (CAP_BPF)")
    assert not (tmp_path / "r").exists()


def test_the_switch_claim_holds_the_xdp_switch_against_the_emulator_where_it_ran():
    rows = [{"switch": "emulator", "pipes": 1, "build": None, "mode": "dense", "exact": True, "xdp_over_best": 0.5,
             "bmv2_over_best": None, "fidelity": {"verdict": "network-bound"}},
            {"switch": "xdp", "pipes": 1, "build": None, "mode": "dense", "exact": True,
             "fidelity": {"verdict": "network-bound"}}]
    figures = by_name(reproduce.switch_figures({"switch_bench.json": {"rows": rows}}))
    assert figures["dense: XDP's best round over the one-pipe emulator's"].value == 0.5
    assert figures["every switch and mode exact"].value is True


def test_a_switch_build_the_rerun_machine_lacks_is_not_measured_here_not_a_failure(capsys):
    """switch_bench.py says why it left a build out (here the -O3 BMv2 not installed): the re-run's figure for it is
    'not measured here', counted neither reproduced nor not, where it used to read NOT REPRODUCED."""
    def bench(fast_missing):
        rows = [{"switch": "emulator", "pipes": 1, "build": None, "mode": "dense", "exact": True,
                 "bmv2_over_best": 60.0, "fast_over_best": None if fast_missing else 8.0,
                 "fidelity": {"verdict": "network-bound"}},
                {"switch": "bmv2", "pipes": 1, "build": None, "mode": "dense", "exact": True,
                 "fidelity": {"verdict": "network-bound"}}]
        if not fast_missing:
            rows.append({"switch": "bmv2", "pipes": 1, "build": "fast", "mode": "dense", "exact": True,
                         "fidelity": {"verdict": "network-bound"}})
        return {"switch_bench.json": {"rows": rows, "fast_bmv2_missing": fast_missing}}

    old = reproduce.switch_figures(bench(None))
    new = reproduce.switch_figures(bench("not installed at /opt/bmv2-fast/bin/simple_switch_grpc"))
    outcome = dict(reproduce.compare(old, new))
    out = capsys.readouterr().out
    assert outcome == {"dense: BMv2's best round over the one-pipe emulator's": True,
                       "dense: BMv2 -O3's best round over the one-pipe emulator's": None,
                       "every switch and mode exact": True}
    assert ("dense: BMv2 -O3's best round over the one-pipe emulator's: committed 8.00x, new: not measured here "
            "(not installed at /opt/bmv2-fast/bin/simple_switch_grpc)") in out
    assert "NOT REPRODUCED" not in out
    # the other way round (committed without the build, re-run with it): nothing to hold the re-run to
    assert "dense: BMv2 -O3's best round over the one-pipe emulator's" not in dict(reproduce.compare(new, old))
