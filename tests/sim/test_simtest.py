"""benchmarks/simtest.py, the simulation campaign: a seed draws one scenario and one outcome, the scenarios cover
every dimension and stay small, a small campaign (CI's, `tools/campaign.py`'s `simtest-ci`) is exact and over its
bound only where a kept regression is, a switch that corrupts a word makes a run inexact and its seed replays it,
a run past its bound is reported so, and bad arguments are one line and exit status 2.  The ns-3 cases skip
where ns-3's Python bindings are not installed."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import campaign  # tools/, on the path by tests/conftest.py
import pytest

from hina.benchmarks import simtest
from hina.codec.params import MAX_WORKERS
from hina.host.workloads import PRESETS
from hina.sim import ns3sim

ROOT = Path(__file__).resolve().parents[2]
REGRESSIONS = json.loads((Path(__file__).parent / "simtest_regressions.json").read_text())
missing = ns3sim.available()
needs_ns3 = pytest.mark.skipif(missing is not None, reason=str(missing))


def same(record: dict) -> dict:
    """A run's record but its wall time: what a replay must give again."""
    return {k: v for k, v in record.items() if k != "wall_seconds"}


def test_a_seed_draws_one_scenario_and_a_shorter_campaign_is_a_longer_one_s_start():
    assert simtest.seeds(7, 5) == simtest.seeds(7, 500)[:5] and len(set(simtest.seeds(7, 500))) == 500
    sc = simtest.draw(123)
    assert simtest.draw(123) == sc and simtest.draw(124) != sc
    assert simtest.Scenario.from_dict(json.loads(json.dumps(sc.to_dict()))) == sc


def test_the_scenarios_cover_every_dimension_and_most_are_small():
    drawn = [simtest.draw(s) for s in simtest.seeds(0, 600)]
    assert {sc.fabric for sc in drawn} == {"star", "leaf_spine", "fat_tree"}
    workers = [sc.workers for sc in drawn]
    assert min(workers) == 4 and 128 < max(workers) <= 256 and statistics.median(workers) <= 16
    assert len(set(workers)) > 50  # not only powers of two: racks and pods not always full
    assert {sc.gbps for sc in drawn} == set(simtest.HOST_GBPS) and {sc.queue for sc in drawn} == set(simtest.QUEUES)
    assert {sc.mtu for sc in drawn} == set(simtest.MTUS) and {sc.slots for sc in drawn} == set(simtest.SLOTS)
    assert {sc.oversubscription for sc in drawn if sc.fabric == "leaf_spine"} == {1, 2, 4, 8}
    impaired = [sc.impair for sc in drawn if sc.impair]
    assert {im["scope"] for im in impaired} == {"every link", "host links", "switch links", "one link"}
    assert all(any(im[what] for im in impaired) for what in ("drop", "dup", "reorder"))
    assert any(sc.start_spread_us for sc in drawn)
    assert {"late_us", "slow"} <= {key for sc in drawn if sc.straggler for key in sc.straggler}
    assert any(sc.kill for sc in drawn) and {sc.restart["reinstall"] for sc in drawn if sc.restart} == {True, False}
    assert {len(sc.jobs) for sc in drawn} == {1, 2, 3} and {name for sc in drawn for name, _ in sc.jobs} == set(PRESETS)
    for sc in drawn:  # within the budgets, and a fabric ns-3 can run (no switch over its bitmap's children)
        chunks = [c for _, rounds in sc.jobs for c in rounds]
        assert sc.workers * sum(chunks) <= max(simtest.FRAME_BUDGET, sc.workers * len(chunks)), sc
        assert sc.workers * len(sc.jobs) * max(chunks) * sc.words <= simtest.WORD_BUDGET or max(chunks) == 1, sc
        fabric = simtest.fabric_of(sc)
        assert len(fabric.hosts) == sc.workers
        assert all(len(fabric.children(s.name)) <= MAX_WORKERS for s in fabric.switches)


def test_a_fat_tree_or_a_leaf_spine_is_alike_on_every_way_up():
    """The bound's lossless time is the scale model's, which runs host 0's way up: every uplink of a tier runs at
    one rate, so no other host's way is slower (a short last rack or pod has fewer children, not slower links)."""
    for sc in (simtest.Scenario(seed=0, fabric="fat_tree", workers=16, gbps=10, queue=None, mtu=9000, slots=8,
                                delay_us=1, jobs=(("lstm", (1,)),), k=6, oversubscription=2),
               simtest.Scenario(seed=0, fabric="leaf_spine", workers=20, gbps=10, queue=None, mtu=9000, slots=8,
                                delay_us=1, jobs=(("lstm", (1,)),), rack=8, spines=2, oversubscription=4)):
        rates = simtest.fabric_of(sc).link_rates()
        tiers = simtest.fabric_of(sc).tiers()
        by_tier = {}
        for (a, _), mbps in rates.items():
            by_tier.setdefault(tiers[a], set()).add(mbps)
        assert all(len(r) == 1 for r in by_tier.values()), by_tier
    assert simtest.fabric_of(sc).link_rates()[("l1", "s1")] == 8 * 10_000 / (2 * 4)


def test_the_bound_grows_with_loss_and_timeouts_and_each_term_is_stated():
    sc = simtest.Scenario(seed=1, fabric="leaf_spine", workers=8, gbps=10, queue=None, mtu=9000, slots=16,
                          delay_us=1, jobs=(("deeplight", (40, 40)),), rack=4, spines=2)
    clean = simtest.state_bound(sc)
    assert clean.growth == 1 and clean.rtos == (0,) and clean.in_domain and clean.window == 16
    assert clean.seconds == pytest.approx(simtest.MODEL_SLACK * clean.lossless[0])
    lossy, worse = (simtest.state_bound(dataclasses.replace(sc, impair={"scope": "every link", "drop": drop, "dup": 0.0,
                                                                        "reorder": 0.0})) for drop in (0.01, 0.05))
    assert 1.2 < lossy.growth < worse.growth and 1 <= lossy.rtos[0] < worse.rtos[0]
    assert lossy.lossless == clean.lossless
    assert lossy.seconds == pytest.approx(simtest.MODEL_SLACK * lossy.growth * lossy.lossless[0]
                                          + lossy.rtos[0] * lossy.rto)
    reordering = dataclasses.replace(sc, impair={"scope": "host links", "drop": 0.0, "dup": 0.0, "reorder": 0.05})
    held = simtest.state_bound(reordering)
    # reordering is no loss: it lengthens the lossless time, by the holds a round trip meets or its flows' slower pace
    assert held.growth == 1 and held.rtos == (0,) and 0 < held.held and held.flow > 1
    links = simtest.impaired_links(reordering, simtest.fabric_of(sc))
    longest = max(simtest.path_holds(simtest.fabric_of(sc), links))
    chance = min(1, sum(simtest.path_losses(simtest.fabric_of(sc), links, "reorder")))
    assert held.held == pytest.approx(chance * longest / 2) and longest == pytest.approx(2 * simtest.REORDER_FRAMES
                                                                  * simtest.frame_seconds(sc, sc.gbps * simtest.GBIT))
    per_link = held.held / (2 * simtest.Setup(simtest.fabric_of(sc)).depth)  # a round trip crosses 2 D links
    assert held.lossless[0] == pytest.approx(max(held.flow * clean.lossless[0],
                                                 simtest._model(sc, simtest.fabric_of(sc), (40, 40), 16, per_link)[0]))
    late = simtest.state_bound(dataclasses.replace(sc, straggler={"rank": 3, "late_us": 500.0}, start_spread_us=20))
    assert late.start == pytest.approx(520e-6) and late.seconds == pytest.approx(clean.seconds + 520e-6)
    slow = simtest.state_bound(dataclasses.replace(sc, straggler={"rank": 3, "slow": 4}))
    assert slow.lossless[0] > 3.5 * clean.lossless[0]  # every host at the slowed one's rate
    shallow = simtest.state_bound(dataclasses.replace(sc, queue=2, oversubscription=8))
    assert not shallow.in_domain and shallow.window < 16 and shallow.rtos[0] >= 2  # the window converges
    killed = simtest.state_bound(dataclasses.replace(sc, kill={"rank": 1, "job": 0, "at": 0.5}))
    assert killed.fault_at == pytest.approx(0.5 * clean.lossless[0])
    assert killed.fault_by == pytest.approx(killed.fault_at + killed.seconds + killed.deadline)
    assert killed.deadline == simtest.DEADLINE_FLOOR


def test_each_end_is_judged_by_what_the_docs_promise_for_its_scenario():
    """A sum is promised everywhere but beside a fault: a refusal there is inexact, a timeout over the bound; beside a
    killed worker a survivor may time out, by the fault's deadline; beside a restart it may also be refused."""
    sc = simtest.Scenario(seed=1, fabric="star", workers=3, gbps=10, queue=None, mtu=9000, slots=8, delay_us=1,
                          jobs=(("lstm", (4,)),))
    bound = simtest.state_bound(sc)

    def judged(scenario, *ends):
        workers = [ns3sim.WorkerEnd(0, rank, outcome, at, exact, [], 0, 0, 0)
                   for rank, (outcome, at, exact) in enumerate(ends)]
        b = simtest.state_bound(scenario)
        return simtest.judge(scenario, b, ns3sim.Ns3Run(0, 0, [], 0, 0, 0, 0, 0, 0, 0, workers=workers))

    fine = ("sum", bound.seconds / 2, True)
    assert judged(sc, fine, fine, fine) == ([], [])
    inexact, over = judged(sc, fine, ("sum", bound.seconds / 2, False), ("refused", 0.01, True))
    assert len(inexact) == 2 and "1 of 3 workers got a RESULT or a result that was not numpy's sum" in inexact[0]
    assert "refused their run" in inexact[1] and over == []
    inexact, over = judged(sc, fine, ("timeout", 0.3, True), ("sum", 2 * bound.seconds, True))
    assert inexact == [] and "timed out" in over[0] and "summed past the bound" in over[1]
    killed = dataclasses.replace(sc, kill={"rank": 2, "job": 0, "at": 0.5})
    kb = simtest.state_bound(killed)
    assert judged(killed, fine, ("timeout", kb.fault_by - 1e-6, True), ("killed", kb.fault_at, None)) == ([], [])
    inexact, over = judged(killed, ("timeout", kb.fault_by + 1e-3, True), ("refused", 0.1, True),
                           ("killed", kb.fault_at, None))
    assert "refused" in inexact[0] and "past" in over[0]
    restarted = dataclasses.replace(sc, restart={"switch": "l1", "at": 0.5, "down_us": 0.0, "reinstall": False})
    assert judged(restarted, fine, ("refused", 0.1, True), ("timeout", 0.2, True)) == ([], [])


@needs_ns3
def test_a_scenario_replays_to_the_same_outcome_alone_or_after_another():
    first, other = 1353597072, 1121306954  # lossy links and a spread start; then a restart with a slow straggler
    assert simtest.draw(first).impair and simtest.draw(first).start_spread_us
    alone, _ = simtest.run(simtest.draw(first))
    simtest.run(simtest.draw(other))
    again, _ = simtest.run(simtest.draw(first))
    assert same(again) == same(alone)
    assert alone["lost"] > 0 and alone["duplicated"] > 0 and alone["held"] > 0 and alone["exact"]


@needs_ns3
def test_a_campaign_in_several_processes_gives_each_run_s_record_in_the_seeds_order(monkeypatch, tmp_path):
    """--jobs 2 runs the scenarios in two processes of their own, and every record is the one the campaign makes in
    its own process alone, in the same order."""
    run = simtest.run

    def where(sc, trace=None):  # forked, this patch holds in the pool's processes too
        record, result = run(sc, trace)
        return {**record, "pid": os.getpid()}, result

    monkeypatch.setattr(simtest, "run", where)
    records = {}
    for jobs in (1, 2):
        simtest.main(["--runs", "6", "--seed", "7", "--jobs", str(jobs), "--out", str(tmp_path / f"{jobs}.json")])
        records[jobs] = json.loads((tmp_path / f"{jobs}.json").read_text())["runs"]
    assert {r["pid"] for r in records[1]} == {os.getpid()}
    assert len({r["pid"] for r in records[2]}) == 2 and os.getpid() not in {r["pid"] for r in records[2]}
    alike = [[{k: v for k, v in same(r).items() if k != "pid"} for r in records[jobs]] for jobs in (1, 2)]
    assert alike[0] == alike[1] and [r["seed"] for r in records[2]] == simtest.seeds(7, 6)


@needs_ns3
def test_a_small_campaign_is_exact_and_over_its_bound_only_where_a_kept_regression_is(tmp_path, capsys):
    """CI's campaign (`tools/campaign.py`'s step simtest-ci): one JSON line per run, the summary last; no run inexact,
    and every run over its bound one that tests/sim/simtest_regressions.json keeps as still over it."""
    argv = shlex.split(campaign.SIMTEST_CI)
    runs = int(argv[argv.index("--runs") + 1])
    code = simtest.main([*argv, "--json", "--out", str(tmp_path / "ci.json")])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    records, total = lines[:-1], lines[-1]
    assert len(records) == runs and total["runs"] == runs
    assert [r["seed"] for r in records] == simtest.seeds(int(argv[argv.index("--seed") + 1]), runs)
    assert total["inexact"] == 0 and all(r["exact"] for r in records)
    kept = {entry["seed"] for entry in REGRESSIONS.values() if entry.get("still_over")}
    assert {f["seed"] for f in total["failures"]} <= kept
    assert code == (1 if total["failures"] else 0)
    written = json.loads((tmp_path / "ci.json").read_text())
    assert written["summary"] == total and written["meta"]["command"].startswith("python benchmarks/simtest.py")
    assert written["constants"]["model_slack"] == simtest.MODEL_SLACK
    assert all(r["checked_results"] > 0 for r in records if r["ends"].get("sum"))


def test_the_distribution_counts_every_summed_run_once_by_its_time_over_bound(tmp_path, capsys):
    records = [{"ratio": ratio, "inexact": False, "over_bound": ratio is None or ratio > 1, "ends": ends}
               for ratio, ends in [(0.05, {"sum": 4}), (0.1, {"sum": 8}), (0.3, {"sum": 8}), (0.9, {"sum": 2}),
                                   (1.2, {"sum": 4}), (None, {"timeout": 3, "killed": 1})]]
    (tmp_path / "c.json").write_text(json.dumps({"runs": records}))
    assert simtest.main(["--table", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("6 runs: 0 inexact, 2 over their bound; runs where a worker ended so: sum 5, timeout 1, "
                          "killed 1")
    assert ["| up to 0.1 | 2 | 40.0% |", "| 0.1 to 0.25 | 0 | 0.0% |", "| 0.25 to 0.5 | 1 | 20.0% |",
            "| 0.5 to 0.75 | 0 | 0.0% |", "| 0.75 to 1 | 1 | 20.0% |", "| over 1 | 1 | 20.0% |"] == [
        line for line in out.splitlines() if line.startswith("| ") and "runs" not in line]
    assert "5 runs summed: time / bound median 0.30" in out and "most 1.20" in out


def _run(seed: int, ratio: float | None, *, over: bool | None = None, inexact: bool = False, timeouts: int = 0,
         retransmissions: int = 0) -> dict:
    """A run as a result file holds it, with what `--table` and `--compare` read."""
    return {"seed": seed, "ratio": ratio, "inexact": inexact, "over_bound": ratio is not None and ratio > 1
            if over is None else over, "ends": {"sum": 4}, "timeouts": timeouts,
            "retransmissions": retransmissions, "scenario": {"fabric": "fat_tree", "workers": 4}}


def test_compare_matches_runs_by_seed_and_names_every_run_that_crossed_its_bound(tmp_path, capsys):
    base = [_run(1, 0.5, timeouts=3, retransmissions=10), _run(2, 1.5, timeouts=5), _run(3, 0.9),
            _run(4, 0.6), _run(5, 0.7), _run(6, None, over=False)]
    new = [_run(5, 0.2), _run(4, 0.61), _run(3, 1.2, retransmissions=4), _run(2, 0.8, timeouts=1),
           _run(1, 0.5, inexact=True), _run(7, 3.0)]  # listed in another order; 7 is not in the base
    (tmp_path / "base.json").write_text(json.dumps({"runs": base}))
    (tmp_path / "new.json").write_text(json.dumps({"runs": new}))
    assert simtest.main(["--compare", str(tmp_path / "base.json"), str(tmp_path / "new.json")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "5 runs in both (base 6, new 6)"
    assert ["| inexact | 0 | 1 |", "| over their bound | 1 | 1 |", "| excess over the bound, summed | 0.50 | 0.20 |",
            "| time / bound, median | 0.700 | 0.610 |", "| timeouts | 8 | 1 |", "| retransmissions | 10 | 4 |"] == [
        line for line in lines if line.startswith("| ") and "base" not in line]
    worse = lines.index("failed in new, not in base (or inexact, not in base): 2")
    assert [line.split(":")[0].strip() for line in lines[worse + 1 : worse + 3]] == ["seed 1", "seed 3"]
    assert "  seed 3: 0.90 -> 1.20  fat tree, 4 workers  (python benchmarks/simtest.py --replay 3)" in lines
    better = lines.index("failed in base, not in new: 1")
    assert lines[better + 1].startswith("  seed 2: 1.50 -> 0.80")
    moved = lines.index("the largest other changes of time over bound: 2")
    assert [line.split(":")[0].strip() for line in lines[moved + 1 :]] == ["seed 5", "seed 4"]
    # only better: nothing that the base passed fails, so the exit status says so
    (tmp_path / "better.json").write_text(json.dumps({"runs": [_run(2, 0.8), *base[2:]]}))
    assert simtest.main(["--compare", str(tmp_path / "base.json"), str(tmp_path / "better.json")]) == 0
    # a run over its bound in both, but inexact in the new one: worse
    (tmp_path / "inexact.json").write_text(json.dumps({"runs": [_run(2, 1.5, inexact=True), *base[2:]]}))
    assert simtest.main(["--compare", str(tmp_path / "base.json"), str(tmp_path / "inexact.json")]) == 1
    assert "  seed 2: 1.50 -> 1.50" in capsys.readouterr().out


@pytest.mark.parametrize("text, argv, says", [
    ("{}", ["--table", "{f}"], "--table {f}: not a result file of simtest.py"),
    ("not json", ["--compare", "{f}", "{f}"], "--compare {f}: not a result file of simtest.py"),
    ('{"runs": [{"seed": 1, "ratio": 0.5}]}', ["--compare", "{f}", "{f}"], "--compare {f}: not a result file"),
])
def test_a_file_that_is_not_a_result_file_is_one_line_and_status_2(tmp_path, capsys, text, argv, says):
    f = tmp_path / "r.json"
    f.write_text(text)
    with pytest.raises(SystemExit) as exited:
        simtest.main([a.format(f=f) for a in argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says.format(f=f) in err


def test_compare_refuses_two_campaigns_with_no_seed_in_common(tmp_path, capsys):
    (tmp_path / "a.json").write_text(json.dumps({"runs": [_run(1, 0.5)]}))
    (tmp_path / "b.json").write_text(json.dumps({"runs": [_run(2, 0.5)]}))
    with pytest.raises(SystemExit) as exited:
        simtest.main(["--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert exited.value.code == 2 and "no run seed in both" in capsys.readouterr().err


class _Corrupting(ns3sim.Pipeline):
    """A switch whose first RESULT multicast to more than one port carries a wrong last word."""

    def update(self, data, source, length=None):
        emit = super().update(data, source, length)
        if emit is None or len(emit.dests) < 2 or getattr(self, "spoiled", False):
            return emit
        self.spoiled = True
        frame = bytearray(emit.frame)
        frame[-1] ^= 1
        return type(emit)(emit.dests, bytes(frame))


@needs_ns3
def test_a_corrupting_switch_makes_a_run_inexact_and_its_seed_replays_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(ns3sim, "Pipeline", _Corrupting)
    assert simtest.main(["--runs", "2", "--seed", "7", "--json", "--out", str(tmp_path / "bad.json")]) == 1
    *records, total = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert total["inexact"] == 2 and [f["seed"] for f in total["failures"]] == simtest.seeds(7, 2)
    seed = total["failures"][0]["seed"]
    assert total["failures"][0]["replay"] == f"python benchmarks/simtest.py --replay {seed}"
    assert "not numpy's sum" in total["failures"][0]["what"] and records[0]["exact"] is False
    assert simtest.main(["--replay", str(seed)]) == 1
    said = capsys.readouterr().out
    assert f"seed {seed}: INEXACT" in said and "NOT numpy's sum" in said
    monkeypatch.undo()
    assert simtest.main(["--replay", str(seed)]) == 0  # the switch, not the scenario


@needs_ns3
def test_a_run_past_its_bound_is_reported_over_bound(monkeypatch, capsys, tmp_path):
    """The first run of seed 7 is lossless and takes the scale model's time, so with no slack over the model but
    0.8 of it, it is a quarter over its bound."""
    monkeypatch.setattr(simtest, "MODEL_SLACK", 0.8)
    assert simtest.main(["--runs", "1", "--seed", "7", "--json", "--out", str(tmp_path / "slow.json")]) == 1
    record, total = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert total["inexact"] == 0 and total["over_bound"] == 1 and record["exact"]
    assert 1.2 < record["ratio"] < 1.3 and record["bound"]["rtos"] == [0]
    assert "summed past the bound" in total["failures"][0]["what"]


@pytest.mark.parametrize("argv, says", [(["--runs", "0"], "--runs: must be an integer from 1"),
                                        (["--runs", "many"], "--runs: expected an integer"),
                                        (["--seed", "-1"], "--seed: must be at least 0"),
                                        (["--jobs", "0"], "--jobs: must be an integer from 1 to 1024"),
                                        (["--replay", "x"], "--replay: expected an integer"),
                                        (["--frobnicate"], "unrecognized arguments"),
                                        (["--trace", "3"], "--trace goes with --replay SEED"),
                                        (["--chunk", "3"], "--chunk goes with --replay SEED"),
                                        (["--replay", "7", "--between", "1", "2"],
                                         "--between goes with --trace or --chunk"),
                                        (["--replay", "7", "--trace", "1", "--between", "2", "1"],
                                         "--between 2 1: T0 from 0 up to T1 wanted"),
                                        (["--replay", "1897926286", "--trace", "30"],
                                         "--trace 30: seed 1897926286 draws 30 hosts (ranks 0 to 29)")])
def test_bad_arguments_are_one_line_and_exit_2(argv, says):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simtest.py"), *argv], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


@needs_ns3
def test_a_trace_read_only_in_part_ends_quietly():
    """`--trace ... | head`: the reader closes the pipe after a few lines, and the replay ends without a traceback."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "simtest.py"), "--replay", "7", "--trace", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = [proc.stdout.readline() for _ in range(3)]
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 1 and all(" rank   0 " in line for line in first)
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_the_committed_campaign_is_a_step_of_tools_campaign():
    steps = {s.name: s for s in campaign.steps()}
    assert steps["simtest"].outputs == (f"{campaign.R}/simtest.json",)
    assert "--runs 2000" in " ".join(steps["simtest"].args)
    assert steps["simtest-ci"].args[1:-2] == tuple(shlex.split(campaign.SIMTEST_CI))
