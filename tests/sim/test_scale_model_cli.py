"""benchmarks/scale_model.py, the scale model's command line: its flags, the result it writes, the Mininet runs
it models, the names tools/tables.py imports from it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from hina.benchmarks import scale_model as sm
from hina.control import Fabric
from hina.sim import scale
from hina.wire.headers import FRAME_OVERHEAD

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bad_flags_are_one_line_and_status_2():
    for flag in (["--workers", "0"], ["--gbps", "-1"], ["--topologies", "ring"], ["--validate", "/nonexistent"],
                 ["--scale", "2"]):
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scale_model.py"), *flag],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (flag, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.slow
def test_cli_projects_and_writes_provenance(tmp_path):
    out = tmp_path / "sm.json"
    assert sm.main(["--presets", "deeplight", "--workers", "8,16", "--gbps", "100", "--topologies", "star",
                    "--scale", "0.002", "--cap", "256", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"command", "date", "machine", "commit"} <= set(data["meta"])
    rows = data["projection"]
    assert [r["workers"] for r in rows] == [8, 16]
    for r in rows:
        assert r["dense_ina"]["encoding"] == "dense" and r["hina_auto"]["encoding"] != "dense"
        assert r["speedup_vs_dense"] > 1
        assert math.isclose(r["dense_ina"]["words_per_worker"], r["length"] + sum(scale.first_round()))


def test_a_mininet_run_is_modelled_with_its_own_gradients_and_verdict(tmp_path):
    cfg = {"workers": 4, "switch": "emulator", "bw": 100.0, "delay": 0.0, "loss": 0.0, "length": 1 << 16,
           "density": 0.01, "mtu": 9000, "slots": 64, "seed": 0, "workload": None, "scale": 0.02}
    runs = [{"mode": mode, "seconds": 0.5, "phase_seconds": {"a": 0.3, "b": 0.1}, "compute_seconds": {"encode": 0.05},
             "fidelity": {"verdict": "network-bound", "detail": "s1-eth1 at 97%"}} for mode in ("dense", "aligned")]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"config": cfg, "runs": runs, "command": "mininet/run.py ..."}))
    dense, aligned = sm.mininet_case(path)
    assert dense["payload_bytes_model"] == 4 * (sum(scale.first_round()) + (1 << 16))
    assert aligned["encoding"] == "aligned" and aligned["payload_bytes_model"] < dense["payload_bytes_model"] / 10
    net = scale.Setup(Fabric.star(4, rate=100), overhead=FRAME_OVERHEAD)
    assert dense["model_network_seconds"] > net.line_rate_seconds(1 + -(-(1 << 16) // net.words))
    assert dense["model_seconds"] == pytest.approx(dense["model_network_seconds"] + 0.05)
    assert dense["ratio"] == pytest.approx(0.5 / dense["model_seconds"])
    assert dense["verdict"] == "network-bound (s1-eth1 at 97%)"
    cfg["loss"] = 1.0
    path.write_text(json.dumps({"config": cfg, "runs": runs}))
    with pytest.raises(ValueError, match="lossless"):
        sm.mininet_case(path)


def test_the_names_tools_tables_imports_are_here_and_render():
    # tools/tables.py renders docs/scale_model.md with these, from this module
    row = {"workers": 4, "mbps": 100.0, "workload": "uniform 0.01", "mode": "auto", "encoding": "aligned",
           "measured_seconds": 0.5, "model_seconds": 0.45, "ratio": 0.5 / 0.45, "measured_network_seconds": 0.4,
           "model_network_seconds": 0.4, "verdict": "network-bound (s1-eth1 at 97%)"}
    val = sm.validation_table({"validation": [row]})
    assert len(val) == 3 and "| 4 | 100 | uniform 0.01 | auto | aligned | 0.500 | 0.450 | 1.11 " in val[2]
    assert val[2].endswith("| network-bound (s1-eth1 at 97%) |")
    assert sm.projection_table({}) == [] and sm.tables({}) == ""
    assert sm.tables({"validation": [row]}) == "\n".join(val)


def test_a_point_outside_the_domain_says_so_and_names_its_ns3_run(tmp_path):
    """With 25 Gbit/s uplinks under racks at 100 and ports of 16 packets, the trees' uplinks would drop: their
    rows are outside the model's domain, the log names the ns-3 command for each, the table marks them; the
    star (no uplink) stays in."""
    said = []
    rows = sm.project(["deeplight"], [8], [100.0], [1, 2], scale=0.01, seed=0, cap=256, host_alpha=0.0,
                      uplink_gbps=25.0, queue=16, log=said.append)
    star, tree = rows
    assert star["in_domain"] and "ns3_command" not in star
    assert not tree["in_domain"] and tree["hina_auto"]["outside"].startswith("l1 up to s1 would queue")
    assert tree["ns3_command"] == ("python benchmarks/ns3_scale.py --workers 8 --fabrics tree --depth 2 --presets "
                                   "deeplight --modes dense,auto --gbps 100 --uplink-gbps 25 --queue 16 --mtu 9000 "
                                   "--slots 64 --cap 0")
    assert [line for line in said if "outside the scale model's domain" in line] == [
        f"deeplight tree2 8 workers at 100 Gbit/s: outside the scale model's domain ({tree['dense_ina']['outside']}"
        f"); ns-3 runs it: {tree['ns3_command']}"]
    table = sm.projection_table({"projection": rows})
    assert "| deeplight | tree2 3x3 * |" in table[3] and table[-1].startswith("\\* outside the model's domain")
    assert sm.ns3_command({**star, "workers": 64}, uplink_gbps=None, queue=16, mtu=9000, slots=64).startswith("none")
