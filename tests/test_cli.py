"""The command lines: `hina demo`, `hina roundtrip`, `python -m switch_emulator`."""

import json
import subprocess
import sys

import numpy as np

from switch_emulator import ControlClient, JobConfig

DEMO_KEYS = {"exact", "mode", "encoding", "group", "workers", "length", "density", "bytes_per_worker",
             "dense_bytes_per_worker", "seconds", "first_seconds", "round_seconds", "goodput_gbps", "retransmissions",
             "switch_drops"}


def run(*args, timeout=300):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout)


def test_demo_json_is_exact_with_loss():
    out = run("-m", "host.cli", "demo", "--workers", "3", "--length", "200000", "--density", "0.02",
              "--drop", "0.02", "--words", "256", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert DEMO_KEYS <= summary.keys()
    assert summary["exact"] is True and summary["workers"] == 3 and summary["mode"] == "auto"
    assert summary["encoding"] in ("aligned", "sketch", "blocks")  # 2% of 200,000: never dense
    assert summary["retransmissions"] > 0
    assert 0 < summary["bytes_per_worker"] < summary["dense_bytes_per_worker"]


def test_demo_dense_mode_prints_a_summary():
    out = run("-m", "host.cli", "demo", "--workers", "2", "--length", "50000", "--mode", "dense")
    assert out.returncode == 0, out.stderr
    assert "exact:            yes" in out.stdout and "ran dense" in out.stdout


def test_demo_repeated_rounds_report_the_steady_state():
    out = run("-m", "host.cli", "demo", "--workers", "2", "--length", "50000", "--rounds", "3", "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["exact"] is True and len(s["round_seconds"]) == 3
    assert s["first_seconds"] == s["round_seconds"][0] and s["seconds"] == min(s["round_seconds"][1:])


def test_demo_refuses_bad_parameters():
    out = run("-m", "host.cli", "demo", "--workers", "40")
    assert out.returncode == 2 and "workers must be between 1 and 32" in out.stderr
    out = run("-m", "host.cli", "demo", "--group", "3")
    assert out.returncode == 2 and "group must be 0 (chosen per tensor) or a power of two" in out.stderr


def test_roundtrip_on_npy_files(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for w in range(3):
        g = np.where(rng.random(200_000) < 0.01, rng.standard_normal(200_000), 0).astype(np.float32)
        paths.append(str(tmp_path / f"g{w}.npy"))
        np.save(paths[-1], g)
    out = run("-m", "host.cli", "roundtrip", *paths, "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["exact"] is True and s["workers"] == 3 and s["bytes_per_worker"]["total"] < 4 * 200_000 / 4
    assert s["encoding"] != "dense"
    dense = json.loads(run("-m", "host.cli", "roundtrip", *paths, "--json", "--mode", "dense").stdout)
    assert dense["exact"] is True and dense["encoding"] == "dense" and "dense" in dense["bytes_per_worker"]
    bad = run("-m", "host.cli", "roundtrip", paths[0], str(tmp_path / "missing.npy"))
    assert bad.returncode == 2 and "missing.npy" in bad.stderr


def test_switch_emulator_cli_with_flags_and_control():
    proc = subprocess.Popen([sys.executable, "-m", "switch_emulator", "--job", "4:2:32:0:8",
                             "--member", "4:0:127.0.0.1:6000", "--member", "4:1:127.0.0.1:6001", "--drop", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        with ControlClient(tuple(ready["control"])) as ctl:
            counters = ctl.counters()
            assert counters["jobs"] == {4: {"updates": 0, "results": 0, "resends": 0, "drops": {}}}
            ctl.add_job(JobConfig(5, 1, 16, 8, 4))
            assert 5 in ctl.counters()["jobs"]
            try:
                ctl.add_job(JobConfig(6, 1, 16, 0, 4))
            except RuntimeError as exc:
                assert "overlap" in str(exc)
            else:
                raise AssertionError("overlapping slots were accepted")
            ctl.shutdown()
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()


def test_switch_emulator_cli_rejects_a_bad_member():
    out = run("-m", "switch_emulator", "--member", "4:0:127.0.0.1:6000")
    assert out.returncode == 2 and "names job 4" in out.stderr
