"""Where results go: a script writes into the committed benchmarks/results/ only when told to (--out), by
default into $HINA_RESULTS or ./hina-results (hina.provenance.default_out); tools/campaign.py tells every
step, and each step's result files lie where its --out (and --name) put them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hina import provenance

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [*sorted(p for p in (ROOT / "benchmarks").glob("*.py") if p.name != "__init__.py"),
           ROOT / "mininet" / "run.py"]


def test_the_default_is_hina_results_in_the_current_directory_or_what_hina_results_names(monkeypatch):
    monkeypatch.delenv(provenance.RESULTS_ENV, raising=False)
    assert provenance.default_out("x.json") == Path("hina-results") / "x.json"
    assert provenance.default_out() == Path("hina-results")
    monkeypatch.setenv(provenance.RESULTS_ENV, "")  # empty: as if unset
    assert provenance.default_out() == Path("hina-results")
    monkeypatch.setenv(provenance.RESULTS_ENV, "/tmp/mine")
    assert provenance.default_out("x.json") == Path("/tmp/mine/x.json")
    assert "$HINA_RESULTS" in provenance.out_help("x.json") and "hina-results/" in provenance.out_help("x.json")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_defaults_into_the_committed_results(script):
    """No default path into benchmarks/results (or a results/ folder beside the script) in the source."""
    code = script.read_text()
    assert not re.search(r'"benchmarks"\s*/\s*"results"|parent\s*/\s*"results"|ROOT\s*/\s*"results"', code), script


def test_a_benchmark_without_out_writes_into_hina_results_here_and_leaves_the_committed_results_alone(tmp_path):
    committed = sorted((p, p.stat().st_mtime_ns) for p in (ROOT / "benchmarks" / "results").rglob("*"))
    env = {k: v for k, v in os.environ.items() if k != provenance.RESULTS_ENV}
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "loss_model.py"), "--seeds", "1", "--rounds", "1"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "wrote hina-results/loss_model.json" in out.stdout + out.stderr
    assert json.loads((tmp_path / "hina-results" / "loss_model.json").read_text())["meta"]["command"]
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "contest_model.py"), "--queues", "32", "--seeds",
                          "1"], cwd=tmp_path, env={**env, provenance.RESULTS_ENV: str(tmp_path / "mine")},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "mine" / "contest_model.json").exists()
    assert committed == sorted((p, p.stat().st_mtime_ns) for p in (ROOT / "benchmarks" / "results").rglob("*"))


def test_hina_results_is_ignored_by_git():
    assert "/hina-results/" in (ROOT / ".gitignore").read_text().split()


def test_every_campaign_step_names_its_out_in_benchmarks_results_and_its_outputs_lie_there():
    import campaign  # tools/, on the path by tests/conftest.py

    for step in campaign.steps():
        args = list(step.args)
        assert "--out" in args, f"{step.name}: no --out, so it would write to the scratch default"
        out = args[args.index("--out") + 1]
        assert out == campaign.R or out.startswith(campaign.R + "/"), f"{step.name}: --out {out}"
        name = args[args.index("--name") + 1] if "--name" in args else None
        assert step.outputs, step.name
        for written in step.outputs:
            path = Path(written)
            if out.endswith((".json", ".md")):  # a file: the JSON itself, or the markdown beside its JSON
                assert path.with_suffix("") == Path(out).with_suffix(""), f"{step.name}: {written} vs --out {out}"
            else:  # a folder (and --name the stem)
                assert path.parent == Path(out), f"{step.name}: {written} not in --out {out}"
                assert name is None or path.stem == name, f"{step.name}: {written} vs --name {name}"


def test_a_committed_figure_from_uncommitted_code_is_refused_before_the_run(monkeypatch, tmp_path):
    """Into benchmarks/results/ only from a clean commit: refused as --out is read (exit 2, one line naming
    what differs), and again by write_result; elsewhere, or with HINA_ALLOW_DIRTY=1, written."""
    monkeypatch.setattr(provenance, "changes", lambda: [" M host/window.py", "?? host/new.py"])
    monkeypatch.delenv(provenance.ALLOW_DIRTY, raising=False)
    target = provenance.COMMITTED / "never_written.json"
    why = provenance.dirty_refusal(target)
    assert why and "host/window.py, host/new.py" in why and "clean commit" in why
    with pytest.raises(Exception, match="clean commit"):
        provenance.out_path(str(target))
    with pytest.raises(SystemExit, match="not written"):
        provenance.write_result(target, {"x": 1}, "python x.py")
    assert not target.exists()
    assert provenance.dirty_refusal(tmp_path / "x.json") is None  # a scratch folder takes anything
    provenance.write_result(tmp_path / "x.json", {"x": 1}, "python x.py")
    monkeypatch.setenv(provenance.ALLOW_DIRTY, "1")
    assert provenance.dirty_refusal(target) is None
    monkeypatch.delenv(provenance.ALLOW_DIRTY)
    monkeypatch.setattr(provenance, "changes", lambda: [])
    assert provenance.dirty_refusal(target) is None and provenance.commit()[1] is False


def test_every_scripts_out_flag_refuses_a_dirty_committed_figure():
    """Each script that writes results reads --out through provenance.out_path (refused before the run)."""
    for path in [*sorted((ROOT / "benchmarks").glob("*.py")), *sorted((ROOT / "mininet").glob("*.py"))]:
        text = path.read_text()
        if '"--out"' in text:
            assert re.search(r'"--out", type=(provenance\.)?out_path', text) or "dirty_refusal(out)" in text, \
                f"{path.name}: --out is not checked by out_path"


def test_a_large_result_is_written_compact_and_reads_back_the_same(tmp_path):
    """Past INDENTED_UP_TO bytes indented, a result goes without indentation (tracked files stay small); either
    way it reads back as the value written."""
    from hina import provenance

    small, large = {"x": [1.5] * 10}, {"x": [0.25] * (provenance.INDENTED_UP_TO // 4)}
    for name, value in (("small", small), ("large", large)):
        data = provenance.write_result(tmp_path / f"{name}.json", value, "python x.py")
        text = (tmp_path / f"{name}.json").read_text()
        assert json.loads(text) == data
        assert ("\n" in text) == (name == "small")
