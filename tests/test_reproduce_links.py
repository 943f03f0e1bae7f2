"""tools/reproduce.py knows its machine: each Mininet claim's link rate, read from its campaign steps, is checked
against the rate this machine holds for that experiment (mininet/run.py's calibration cache, a quick calibration
where the cache cannot say) before anything runs, and a claim above it is refused in one line; --cpu-quota runs
it all under a CPU quota (tools/cpu_quota.py), whose command lines, cgroups and checks are here too.

Most of it needs Debian's Mininet package importable (the experiments' keys come from hina.mininet) but no root
and no network; the quota's cgroups need root; one slow test calibrates a 2-worker star on Mininet."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import campaign  # tools/, on the path by tests/conftest.py
import cpu_quota
import pytest
import reproduce
from helpers import FakeMachine

from hina import provenance
from hina.progress import Progress


def _mininet_package() -> str | None:
    try:
        from hina.mininet import hina_net  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


needs_mininet_package = pytest.mark.skipif(_mininet_package() is not None, reason=f"{_mininet_package()}")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """mininet/run.py's calibration cache in a fresh XDG_CACHE_HOME (subprocesses see it too)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "hina" / "calibrate.json"


def run_module():
    from hina.mininet import run

    return run


def entry(highest: float | None, not_at: float | None, low: float = 10.0) -> dict:
    """A cache entry as record_calibration writes it (the fields reproduce.py reads)."""
    run = run_module()
    return {"highest_network_bound_mbps": highest, "not_network_bound_mbps": not_at,
            "faithful_mbps": run.faithful_rate(highest), "searched_mbps": [low, 1000.0],
            "date": "2026-11-30T09:15:00+0000", "load_before": [0.4, 0.3, 0.2]}


def record(key: dict, highest: float | None, not_at: float | None) -> None:
    run = run_module()
    found = {**entry(highest, not_at), "config": {"bw": 1000.0}, "summary": "calibrate: a stand-in",
             "quick": True}
    run.record_calibration(found, key)


# -- the rates the claims run their links at -----------------------------------------------------------------------

@needs_mininet_package
def test_each_mininet_claim_with_timed_figures_needs_its_steps_rate_in_its_experiment():
    run = run_module()
    needs = {name: reproduce.link_needs(c) for name, c in reproduce.CLAIMS.items()}
    star8 = run.rate_key(8)
    tree = run.rate_key(8, "leafspine:2,1,4", 4.0)
    plain = run.rate_key(8, "leafspine:2,1,4", 4.0, leaves="plain")
    assert [(n.key, n.mbps) for n in needs["compare-lstm"]] == [(star8, float(campaign.STAR_MBPS))]
    assert [(n.key, n.mbps) for n in needs["tree-leaves"]] == [(tree, float(campaign.TREE_MBPS)),
                                                               (plain, float(campaign.TREE_MBPS))]
    assert [(n.key, n.mbps) for n in needs["tta"]] == [(run.rate_key(4), float(campaign.STAR4_MBPS))]
    assert [(n.key, n.mbps) for n in needs["cross-traffic-share"]] == [(run.rate_key(4), 200.0)]  # the highest
    # exactness holds at any rate; switch-bench names none (its figures are the switches' CPU); no Mininet at all
    for name in ("exact-trees", "exact-bmv2-trees", "switch-vs-bmv2", "demo", "scale-deeplight"):
        assert needs[name] == [], name
    # every claim whose figures carry Mininet verdicts but the switch bench is checked
    timed = {name for name, c in reproduce.CLAIMS.items() if any(f.verdicts for f in reproduce.committed_figures(c))}
    assert {name for name, ns in needs.items() if ns} == timed - {"switch-vs-bmv2"}


@needs_mininet_package
def test_through_the_xdp_switch_a_claim_needs_the_rate_the_xdp_experiment_holds():
    """--switch xdp re-runs a claim's steps through the XDP switch, at its MTU: the rate checked is that experiment's,
    not the emulator's (which holds other rates on the same machine)."""
    run = run_module()
    from hina.mininet.hina_net import default_mtu

    xdp = default_mtu("xdp")
    for name, key in (("compare-lstm", run.rate_key(8, switch="xdp", mtu=xdp)),
                      ("tta", run.rate_key(4, switch="xdp", mtu=xdp))):
        assert [n.key for n in reproduce.link_needs(reproduce.CLAIMS[name], "xdp")] == [key], name
    tree = [n.key for n in reproduce.link_needs(reproduce.CLAIMS["tree-leaves"], "xdp")]
    assert tree == [run.rate_key(8, "leafspine:2,1,4", 4.0, switch="xdp", mtu=xdp),
                    run.rate_key(8, "leafspine:2,1,4", 4.0, leaves="plain", switch="xdp", mtu=xdp)]
    assert reproduce.link_needs(reproduce.CLAIMS["tta"]) == reproduce.link_needs(reproduce.CLAIMS["tta"], "emulator")


@needs_mininet_package
def test_a_steps_flags_make_the_key_mininet_run_would_record_for_them(tmp_path):
    """The calibration reproduce.py runs for a need records it under the need's own key (else the cache would
    never answer): mininet/run.py's own parser and key, on the calibration step's arguments."""
    run = run_module()
    for claim, switch in itertools.product(reproduce.CLAIMS.values(), ("emulator", "xdp")):
        for need in reproduce.link_needs(claim, switch):
            step = reproduce.calibration_step(need, tmp_path)
            assert step.args[:3] == ("mininet/run.py", "--calibrate", "--calibrate-quick")
            args = run.build_parser().parse_args(list(step.args[1:]))
            run.configure(args)
            assert run.key_of(args) == need.key, (claim.name, step.args)
            assert args.bw == need.mbps / run.FAITHFUL_SHARE and args.calibrate_low == args.bw / run.QUICK_BRACKET


@needs_mininet_package
def test_a_step_with_a_rate_but_no_workers_is_named():
    step = campaign.Step("odd", "mininet", ("mininet/run.py", "--bw", "100"), "a step")
    with pytest.raises(ValueError, match="campaign step odd names a link rate but not its workers"):
        reproduce.step_need(step)
    assert reproduce.step_need(campaign.Step("x", "loopback", ("demo.py", "--bw", "100"), "")) is None
    assert reproduce.step_need(campaign.Step("x", "mininet", ("run.py", "--workers", "8"), "")) is None
    unshaped = campaign.Step("x", "mininet", ("compare.py", "--workers", "8", "--bws", "0", "100"), "")
    assert reproduce.step_need(unshaped).mbps == 100.0


def test_every_timed_claims_committed_figures_ran_at_its_steps_rate():
    """The committed figures and the campaign's steps name one experiment and one link rate: where a step's rate
    changes (campaign.STAR_MBPS and the like), this fails until the campaign has measured the figures again."""
    for claim in reproduce.CLAIMS.values():
        assert reproduce.rate_drift(claim) == [], claim.name


def test_a_claim_whose_steps_now_run_another_rate_is_refused_until_measured_again(monkeypatch, can_run, tmp_path,
                                                                                  capsys):
    half = str(int(campaign.STAR_MBPS) // 2)  # the step's --bws, halved
    steps = [dataclasses.replace(s, args=tuple(half if a == campaign.STAR_MBPS else a for a in s.args))
             if s.name == "compare-faithful" else s for s in campaign.steps()]
    monkeypatch.setattr(campaign, "steps", lambda: steps)
    (phrase,) = reproduce.rate_drift(reproduce.CLAIMS["compare-lstm"])
    assert phrase == (f"its committed figures ran at {campaign.STAR_MBPS} Mbit/s per link, its campaign steps now "
                      f"at {half} (benchmarks/results/compare_faithful.json)")
    assert reproduce.rate_drift(reproduce.CLAIMS["tree-lstm"]) == []
    assert reproduce.main(["compare-lstm", "--out", str(tmp_path / "r")]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"compare-lstm: REFUSED: {phrase}: the campaign measures it again first "
                      "(tools/campaign.py --only compare-faithful)")
    assert can_run == [], "no calibration, no step"


# -- what the cache says ---------------------------------------------------------------------------------------

@needs_mininet_package
@pytest.mark.parametrize(("highest", "not_at", "says"), [
    (500.0, None, True),  # network-bound at twice the rate: held
    (600.0, 700.0, True),
    (486.9, 562.3, None),  # network-bound below twice the rate, not far above it: not known
    (400.0, 500.0, False),  # not network-bound at twice the rate
    (None, 100.0, False),  # not even at 100
    (None, 600.0, None),  # not at 600: says nothing of 500
    (None, None, None)])
def test_a_calibration_says_held_not_held_or_nothing(highest, not_at, says):
    assert reproduce.holds(entry(highest, not_at), 250.0) is says


@needs_mininet_package
def test_the_refusal_is_one_line_naming_the_rate_what_this_machine_holds_and_how_to_go_on():
    need = reproduce.LinkNeed("leaves-lstm-hina", run_module().rate_key(8, "leafspine:2,1,4", 4.0), 200.0)
    said = f"this machine holds {reproduce.held_text(entry(243.1, 344.0))}"
    claim = reproduce.CLAIMS["tree-leaves"]
    line = reproduce.refusal(claim, [(need, False, said), (need, False, said)])
    assert line == ("tree-leaves: REFUSED: needs 200 Mbit/s per link on leafspine:2,1,4 (4:1), 8 workers, "
                    "emulator; this machine holds 121 (0.5 x the 243 Mbit/s at which dense aggregation stayed "
                    "network-bound, not at 344; calibrated 2026-11-30 09:15, load 0.4 before it); --recalibrate "
                    "to measure again, --force to run it anyway")
    assert reproduce.refusal(claim, [(need, True, said)]) is None
    forced = reproduce.refusal(claim, [(need, None, "could not calibrate here (exit 1)")], forced=True)
    assert forced.startswith("tree-leaves: runs anyway (--force): needs 200") and "--force to" not in forced
    none = reproduce.held_text(entry(None, 100.0, low=100.0))
    assert none.startswith("none (dense aggregation was not network-bound even at 100 Mbit/s, calibrated ")


# -- before a re-run: refused up front, forced, calibrated where the cache cannot say ----------------------------

@pytest.fixture
def can_run(monkeypatch):
    """Every claim runnable here (root and Mininet or not) and campaign.run_step a recorder: no step runs."""
    ran = []
    monkeypatch.setattr(reproduce, "missing", lambda claim: [])
    monkeypatch.setattr(campaign, "run_step", lambda step, bar: ran.append(step.name) or 0)
    return ran


@needs_mininet_package
def test_a_claim_above_what_this_machine_holds_is_refused_up_front(cache, can_run, tmp_path, capsys):
    run = run_module()
    record(run.rate_key(8, "leafspine:2,1,4", 4.0), 243.1, 344.0)  # summing leaves: not at 400
    record(run.rate_key(8, "leafspine:2,1,4", 4.0, leaves="plain"), 400.0, None)
    assert reproduce.main(["tree-leaves", "--out", str(tmp_path / "r")]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tree-leaves: REFUSED: needs 200 Mbit/s per link on leafspine:2,1,4 (4:1), 8 "
                             "workers, emulator; this machine holds 121 (") and "plain leaves" not in out[0]
    assert out[1] == "reproduce.py: nothing run: this machine holds less than the link rate of tree-leaves"
    assert can_run == [], "nothing ran: no calibration (the cache said) and no step"


@needs_mininet_package
def test_beside_a_refused_claim_the_others_run_and_the_summary_names_it(cache, can_run, tmp_path, capsys):
    run = run_module()
    record(run.rate_key(8, "leafspine:2,1,4", 4.0), 243.1, 344.0)
    record(run.rate_key(8, "leafspine:2,1,4", 4.0, leaves="plain"), 400.0, None)
    # demo runs (a stand-in step writes nothing: its figures cannot be read, NOT REPRODUCED)
    assert reproduce.main(["tree-leaves", "demo", "--out", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert can_run == ["demo"]
    assert "; REFUSED up front, this machine holding less than their links' rate: tree-leaves;" in out


@needs_mininet_package
def test_force_runs_a_refused_claim_saying_so(cache, can_run, tmp_path, capsys):
    run = run_module()
    record(run.rate_key(8, "leafspine:2,1,4", 4.0), 243.1, 344.0)
    record(run.rate_key(8, "leafspine:2,1,4", 4.0, leaves="plain"), 400.0, None)
    assert reproduce.main(["tree-leaves", "--force", "--out", str(tmp_path / "r")]) == 1  # its figures unread
    out = capsys.readouterr().out
    assert out.startswith("tree-leaves: runs anyway (--force): needs 200 Mbit/s") and "REFUSED" not in out
    assert can_run == list(reproduce.CLAIMS["tree-leaves"].steps)


def calibrating_step(machine: FakeMachine, ran: list):
    """campaign.run_step for a calibration step: mininet/run.py's own parser, configuration, search and cache,
    on `machine` instead of Mininet."""
    run = run_module()

    def run_step(step, bar) -> int:
        ran.append(step.name)
        args = run.build_parser().parse_args(list(step.args[1:]))
        cfg, _ = run.configure(args)
        found = run.calibrate(cfg, args.calibrate_steps, machine, log=lambda m: None, low=args.calibrate_low,
                              quick=args.calibrate_quick)
        run.record_calibration(found, run.key_of(args))
        return 0
    return run_step


@needs_mininet_package
def test_where_the_cache_cannot_say_one_quick_calibration_per_experiment_answers(cache, monkeypatch, tmp_path):
    ran, machine = [], FakeMachine(450.0)
    monkeypatch.setattr(campaign, "run_step", calibrating_step(machine, ran))
    claims = [reproduce.CLAIMS[n] for n in ("compare-lstm", "compare-deeplight", "tta")]
    answers = reproduce.check_links(claims, tmp_path)
    assert ran == ["calibrate-star-4-workers-emulator", "calibrate-star-8-workers-emulator"]  # highest rate first
    assert machine.tried[0] == 1000.0 and 500.0 in machine.tried  # each search's top first: twice the rate
    held = {name: [h for _, h, _ in a] for name, a in answers.items()}
    assert held == {"compare-lstm": [False], "compare-deeplight": [False], "tta": [False]}
    # 4 workers: not at 1000, at 250, not at 500, at 354 (two bisection steps); 8 workers: the same at 500 down
    assert answers["tta"][0][2].startswith("this machine holds 176 (0.5 x the 354 Mbit/s at which dense "
                                           "aggregation stayed network-bound, not at 500; calibrated ")
    # asked again, the cache answers: nothing runs
    ran.clear()
    assert reproduce.check_links(claims, tmp_path) == answers and ran == []
    # --recalibrate: measured again, once per experiment, on a machine that now holds more
    machine.holds = 2000.0
    again = reproduce.check_links(claims, tmp_path, recalibrate=True)
    assert len(ran) == 2 and all(h is True for a in again.values() for _, h, _ in a)


@needs_mininet_package
def test_a_failed_calibration_refuses_the_claim_saying_why(cache, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(reproduce, "missing", lambda claim: [])
    monkeypatch.setattr(campaign, "run_step", lambda step, bar: 3)
    assert reproduce.main(["compare-lstm", "--out", str(tmp_path / "r")]) == 2
    out = capsys.readouterr().out
    assert "compare-lstm: REFUSED: needs 250 Mbit/s per link on star, 8 workers, emulator; could not calibrate " \
           "here (mininet/run.py --calibrate exited 3)" in out


@needs_mininet_package
def test_dry_run_says_what_the_cache_knows_and_calibrates_nothing(cache, can_run, tmp_path, capsys):
    run = run_module()
    record(run.rate_key(8), 700.0, None)
    assert reproduce.main(["compare-lstm", "tree-lstm", "--dry-run", "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "compare-lstm: needs 250 Mbit/s per link on star, 8 workers, emulator: held: this machine holds 350 (" in out
    assert ("tree-lstm: needs 200 Mbit/s per link on leafspine:2,1,4 (4:1), 8 workers, emulator: not yet "
            "calibrated here; a re-run calibrates it first: python mininet/run.py --calibrate --calibrate-quick "
            "--topology leafspine:2,1,4 --oversubscription 4 --bw 400 ") in out
    assert can_run == [] and not (tmp_path / "r").exists()


# -- the CPU quota --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["0%", "-5%", "1", "100", "abc%", f"{100 * (os.cpu_count() or 1) + 1}%", ""])
def test_a_bad_quota_is_one_line_and_exit_2(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        reproduce.main(["demo", f"--cpu-quota={bad}"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and repr(bad) in err and "--cpu-quota" in err
    assert cpu_quota.main(["--", bad, "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cpu_quota.py: a CPU quota is a percentage") and repr(bad) in err


def test_quotas_read_as_systemd_writes_them():
    assert [cpu_quota.parse_quota(x) for x in ("100%", "50%", "12.5%", " 150% ")] == [100.0, 50.0, 12.5, 150.0]


def test_the_quota_wrappers_command_lines(tmp_path):
    argv = ["python", "tools/reproduce.py", "tree-leaves"]
    assert cpu_quota.plan(100.0, argv, systemd=True, where=None) == cpu_quota.Plan(
        ["systemd-run", "--scope", "--quiet", "-p", "CPUQuota=100%", "--", *argv])
    v1 = provenance.CpuCgroups(1, tmp_path / "cpu", tmp_path / "cpu" / "user")
    p = cpu_quota.cgroup_plan(50.0, argv, v1, "hina-quota-7")
    procs = str(tmp_path / "cpu" / "hina-quota-7" / "cgroup.procs")
    assert p.argv == ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *argv]
    assert p.folder == tmp_path / "cpu" / "hina-quota-7"  # at the top of the hierarchy, not in this process's
    assert p.limit == {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000"}
    v2 = provenance.CpuCgroups(2, tmp_path, tmp_path / "a")
    assert cpu_quota.cgroup_plan(150.0, argv, v2, "q").limit == {"cpu.max": "150000 100000"}
    with pytest.raises(ValueError, match="no cgroup hierarchy here holds the cpu controller"):
        cpu_quota.plan(100.0, argv, systemd=False, where=None)


def test_the_shell_line_puts_the_command_in_the_cgroup_then_becomes_it(tmp_path):
    """The wrapper's shell writes its own pid, which the command then has (exec), into the cgroup's procs file."""
    procs = tmp_path / "cgroup.procs"
    code = "import os; print(os.getpid())"
    out = subprocess.run(cpu_quota.cgroup_command(procs, [sys.executable, "-c", code]), capture_output=True,
                         text=True, check=True)
    assert procs.read_text().strip() == out.stdout.strip()


MOUNTINFO_HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
CGROUP_HYBRID = "2:cpuacct:/\n1:cpu:/jobs/a\n0::/\n"


def test_the_cpu_controllers_hierarchy_is_found_v1_or_v2(tmp_path):
    where = provenance.cpu_cgroups(MOUNTINFO_HYBRID, CGROUP_HYBRID)  # cpu bound to v1; v2 holds no cpu here
    assert where == provenance.CpuCgroups(1, Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu/jobs/a"))
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    v2 = f"40 23 0:38 / {tmp_path} rw - cgroup2 cgroup2 rw\n"
    assert provenance.cpu_cgroups(v2, "0::/user.slice/x.scope\n") == provenance.CpuCgroups(
        2, tmp_path, tmp_path / "user.slice" / "x.scope")
    assert provenance.cpu_cgroups(v2, "1:cpu:/\n") is None  # this process in no cgroup of that hierarchy
    assert provenance.cpu_cgroups("", CGROUP_HYBRID) is None


def test_the_quota_is_the_least_of_the_cgroup_and_those_above(tmp_path):
    own = tmp_path / "a" / "b"
    own.mkdir(parents=True)
    v2 = provenance.CpuCgroups(2, tmp_path, own)
    assert provenance.cpu_quota(v2) is None  # no cpu.max anywhere: no limit
    (own / "cpu.max").write_text("max 100000\n")
    (tmp_path / "a" / "cpu.max").write_text("150000 100000\n")
    assert provenance.cpu_quota(v2) == 1.5
    (own / "cpu.max").write_text("50000 100000\n")
    assert provenance.cpu_quota(v2) == 0.5
    (own / "cpu.cfs_quota_us").write_text("-1\n")
    (own / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "a" / "cpu.cfs_quota_us").write_text("25000\n")
    (tmp_path / "a" / "cpu.cfs_period_us").write_text("100000\n")
    assert provenance.cpu_quota(provenance.CpuCgroups(1, tmp_path, own)) == 0.25


QUOTA_PROBE = ("import json; from hina import provenance; from hina.mininet import run; "
               "print(json.dumps([provenance.cpu_quota(), run.rate_key(8)]))")


@pytest.mark.root
@needs_mininet_package
def test_under_a_real_quota_the_process_reads_it_and_its_key_is_apart():
    """tools/cpu_quota.py here (systemd's scope or a cgroup it makes and removes): the command reads the quota,
    and a calibration key made under it differs from this process's in the quota alone."""
    out = subprocess.run([sys.executable, str(reproduce.ROOT / "tools" / "cpu_quota.py"), "50%", "--",
                          sys.executable, "-c", QUOTA_PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    quota, key = json.loads(out.stdout)
    here = run_module().rate_key(8)
    assert quota == 0.5 and key == {**here, "cpu_quota": 0.5} and here["cpu_quota"] != 0.5
    where = provenance.cpu_cgroups()
    if where is not None and not cpu_quota.systemd_here():
        assert not list(where.mount.glob("hina-quota-*")), "the cgroup is removed after the command"


@pytest.mark.root
def test_reproduce_under_a_quota_runs_itself_there_and_checks_it():
    script = str(reproduce.ROOT / "tools" / "reproduce.py")
    out = subprocess.run([sys.executable, script, "--cpu-quota", "50%", "--committed-only", "demo"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("reproduce.py: under a CPU quota of 50% (this process's cgroups allow 0.5 of")
    assert "demo: README's main job" in out.stdout
    # a run told it is under the quota that is not: refused, not measured as if it were
    env = {**os.environ, reproduce.QUOTA_ENV: "50"}
    out = subprocess.run([sys.executable, script, "--cpu-quota", "50%", "--committed-only", "demo"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stderr) == (2, "reproduce.py: --cpu-quota 50%: this process runs under no CPU "
                                               "quota\n")


# -- on Mininet: a quick calibration of a tiny star, through reproduce.py ----------------------------------------

@pytest.mark.mininet
@pytest.mark.slow
def test_a_quick_calibration_of_a_tiny_star_answers_and_is_cached(cache, tmp_path):
    """reproduce.py's calibration of one need (mininet/run.py --calibrate-quick on a 2-worker star at twice
    10 Mbit/s): one trial where the machine holds it, the entry under the need's key, the same answer after."""
    run = run_module()
    need = reproduce.LinkNeed("tiny", run.rate_key(2), 10.0)
    with Progress(1, "link rates") as bar:
        found, why = reproduce.calibrate_for(need, tmp_path, bar)
    assert why == "" and found == run.cached(need.key) and found["quick"] is True
    assert found["searched_mbps"] == [5.0, 20.0]
    result = json.loads(next(tmp_path.glob("calibrate-star-2-workers-emulator.json")).read_text())
    tried = [t["mbps"] for t in result["trials"]]
    says = reproduce.holds(found, need.mbps)
    if says:
        assert tried == [20.0] and found["highest_network_bound_mbps"] == 20.0
    else:
        assert tried[0] == 20.0 and says is False and found["not_network_bound_mbps"] <= 20.0
    assert all(t["exact"] for t in result["trials"])
    assert reproduce.check_links([], tmp_path) == {}
