"""benchmarks/time_to_accuracy.py: its pieces on made-up numbers, and one tiny run of every system on loopback.

The tiny run (2 ranks, a 2,000-word vocabulary, 4 steps) checks what the
benchmark promises to record: hina's parameters equal hina-dense's bit for
bit after every step, gloo's are within rounding of hina's, the lossy
systems' distances from hina are recorded at every evaluation, and the JSON
holds every field the table, the plots and the docs read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import torch_missing

from hina.baselines import registry
from hina.benchmarks import time_to_accuracy as tta
from hina.benchmarks import train_ddp
from hina.host import corpus
from hina.wire.sockio import free_tcp_ports

ROOT = Path(__file__).resolve().parents[2]
CORPUS_MISSING = corpus.missing()


def test_overlap_splits_communication_into_hidden_and_exposed():
    buckets = [{"index": 0, "submitted": 1.0, "started": 1.0, "done": 2.0},
               {"index": 1, "submitted": 1.5, "started": 2.0, "done": 2.5},
               {"index": 2, "submitted": 3.0, "started": 3.0, "done": 3.5}]
    o = tta.overlap(buckets, backward_end=3.6)
    assert o["busy"] == pytest.approx(2.0)  # [1, 2.5] and [3, 3.5]
    assert o["hidden"] == pytest.approx(1.5)  # everything before the last hand-over at 3.0
    assert o["exposed"] == pytest.approx(0.6)
    assert tta.overlap([], 1.0) == {"busy": 0.0, "hidden": 0.0, "exposed": 0.0}


@pytest.mark.parametrize("module,config", [(tta, "TtaConfig"), (train_ddp, "RunConfig")])
def test_a_mininet_ranks_bad_spec_is_one_json_error_from_its_own_config(module, config, tmp_path, capsys):
    """Both benchmarks' Mininet ranks run through train_ddp.rank_main, each reading its own config class."""
    spec = tmp_path / "spec.json"
    spec.write_text('{"no_such_setting": 1}')
    assert module.rank_main(spec, 0) == 1
    said = json.loads(capsys.readouterr().out)
    assert said == {"error": f"TypeError: {config}.__init__() got an unexpected keyword argument 'no_such_setting'"}


def test_distance_is_zero_only_for_the_same_bits():
    ref = np.array([1.0, -2.0, 0.5], np.float32)
    assert tta.distance(ref.copy(), ref) == {"identical": True, "rel_l2": 0.0, "max_rel": 0.0}
    d = tta.distance(ref + np.float32(0.02), ref)
    assert not d["identical"] and d["max_rel"] == pytest.approx(0.01, rel=1e-3)
    assert d["rel_l2"] == pytest.approx(np.sqrt(3 * 0.02**2) / np.sqrt(5.25), rel=1e-3)


def test_the_reference_runs_first_and_each_network_once():
    assert tta.run_order(["topk", "gloo", "hina-dense", "hina"]) == ["hina", "hina-dense", "topk", "gloo"]
    assert tta.run_order(["int8", "gloo", "hina-dense"]) == ["hina-dense", "int8", "gloo"]
    assert tta.run_order(["int8", "gloo"]) == ["gloo", "int8"]
    assert tta.reference_system(["int8", "topk"]) is None


def test_log_inclusion_is_the_candidate_samplers_and_falls_with_rank():
    logq = tta.log_inclusion(1000, 64)
    assert logq.shape == (1000,) and np.all(np.diff(logq) <= 0) and logq[0] < 0
    p0 = np.log(2) / np.log(1001)
    assert np.exp(logq[0]) == pytest.approx(1 - (1 - p0) ** 64, rel=1e-5)


def _run(evals: list[tuple[int, float]], seconds: float = 0.5, nbytes: int = 1000, ranks: int = 2) -> dict:
    steps = [{"step": s, "loss": 5.0, "seconds": seconds, "bytes": nbytes, "comm": 0.1, "busy": 0.1, "hidden": 0.05,
              "exposed": 0.05, "buckets": 2, "digest": f"d{s}"} for s in range(evals[-1][0])]
    rank0 = {"steps": steps, "evals": [{"step": s, "heldout_loss": x} for s, x in evals]}
    return {"config": {}, "errors": [], "ranks": [rank0] + [{"steps": steps, "evals": []}] * (ranks - 1)}


def test_summary_times_the_target_on_the_training_clock_and_says_when_it_was_missed():
    hit = tta.summarize(_run([(0, 9.0), (10, 6.0), (20, 4.0), (30, 3.0)]), target=4.5)
    assert hit["reached"] and hit["steps_to_target"] == 20 and hit["seconds_to_target"] == pytest.approx(10.0)
    # the crossing between the evaluations at 10 (6.0) and 20 (4.0): three quarters of the way, 17.5 steps in
    assert hit["steps_to_target_interp"] == pytest.approx(17.5)
    assert hit["seconds_to_target_interp"] == pytest.approx(8.75)
    assert hit["bytes_to_target"] == 20_000 and hit["overlap"] == pytest.approx(0.5)
    assert hit["identical_every_step"] and hit["seconds_per_step"] == 0.5
    miss = tta.summarize(_run([(0, 9.0), (10, 6.0)]), target=4.5)
    assert not miss["reached"] and miss["seconds_to_target"] is None and miss["steps_run"] == 10
    result = {"env_label": "loopback", "config": {"steps": 10, "target": 4.5, "workers": 2},
              "exactness": {"reference": "hina"},
              "systems": [{"system": "hina", "summary": hit}, {"system": "int8", "summary": miss},
                          {"system": "topk", "summary": {"errors": ["rank 1: boom"]}}]}
    result["table"] = tta.table(result)
    md = tta.markdown(result)
    assert "| hina (auto) | 10.0 | 8.8 | 20 |" in md and "missed within 10 steps" in md and "failed: rank 1: boom" in md
    assert "n/a (loopback)" in md and md.count("\n|") == 5  # the header, its rule, a row per system


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.skipif(CORPUS_MISSING is not None, reason=f"the corpus: {CORPUS_MISSING}")
@pytest.mark.skipif(torch_missing() is not None, reason=f"torch: {torch_missing()}")
def test_a_tiny_run_of_every_system_on_loopback(tmp_path):
    out = tmp_path / "tta.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "time_to_accuracy.py"), "--workers", "2", "--steps", "4",
           "--eval-every", "2", "--vocab", "2000", "--emb", "16", "--hidden", "16", "--batch", "4", "--seq", "12",
           "--samples", "64", "--eval-seqs", "4", "--bucket-mb", "0.05", "--target", "0.5", "--seeds", "0", "1",
           "--out", str(out)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(out.read_text())
    assert r["meta"]["command"].startswith("python benchmarks/time_to_accuracy.py")
    assert r["env"] == "loopback" and r["env_label"] == "loopback"
    assert r["corpus"]["files"]["heldout"] > 0 and r["corpus"]["vocab"] == 2000 and r["corpus"]["license"]
    assert r["model"]["parameters"] > r["model"]["embedding_parameters"] > 0.5 * r["model"]["parameters"]
    assert [run["seed"] for run in r["runs"]] == [0, 1] and r["config"]["seeds"] == [0, 1]
    assert [s["system"] for s in r["runs"][0]["systems"]] == list(tta.systems())
    # the two seeds start from other parameters and data: other digests, the same shape of record
    assert r["runs"][0]["systems"][0]["summary"]["steps"][0]["digest"] != \
        r["runs"][1]["systems"][0]["summary"]["steps"][0]["digest"]
    assert r["spread"]["hina"]["seeds"] == 2 and r["spread"]["hina"]["ran"] == 2
    assert len(r["spread"]["gloo"]["seconds_per_step"]["values"]) == 2
    for s in (s for run in r["runs"] for s in run["systems"]):
        summ = s["summary"]
        assert not summ["errors"] and summ["steps_run"] == 4 and not summ["reached"]
        assert summ["identical_every_step"]  # every rank of every system holds the same parameters
        assert [e["step"] for e in summ["evals"]] == [0, 2, 4]
        for e in summ["evals"]:
            assert {"heldout_loss", "seconds", "bytes", "eval_seconds"} <= set(e)
        for key in ("seconds_per_step", "bytes_per_step", "comm_seconds", "exposed_seconds", "overlap",
                    "training_seconds", "buckets", "final_heldout_loss"):
            assert summ[key] is not None, (s["system"], key)
        assert summ["bytes_per_step"] > 0 and len(summ["steps"]) == 4
        assert all(len(st["digest"]) == 64 for st in summ["steps"])
    by = {s["system"]: s["summary"] for s in r["runs"][0]["systems"]}
    # exact: hina, hina-dense and hina-blocks the same bits at every step; gloo within rounding of them
    ex = r["runs"][0]["exactness"]
    assert ex["reference"] == "hina"
    for same in ("dense", "blocks"):
        assert ex[f"hina_vs_{same}"]["identical_every_step"] and ex[f"hina_vs_{same}"]["steps_compared"] == 4
        assert [st["digest"] for st in by["hina"]["steps"]] == [st["digest"] for st in by[f"hina-{same}"]["steps"]]
        assert ex[f"hina-{same}"]["identical_at_every_evaluation"]
    assert r["runs"][1]["exactness"]["hina_vs_blocks"]["identical_every_step"]
    assert 0 < ex["gloo"]["max_rel_l2"] < 1e-5
    # lossy: their distance from hina at every evaluation, far beyond rounding
    for name in (s for s in tta.systems() if registry.lossy(s)):
        assert [p["step"] for p in ex[name]["points"]] == [0, 2, 4]
        assert ex[name]["max_rel_l2"] > 100 * ex["gloo"]["max_rel_l2"]
        assert by[name]["residual_norm"] > 0
    assert by["topk"]["bytes_per_step"] < by["gloo"]["bytes_per_step"]
    assert by["int8"]["bytes_per_step"] < by["gloo"]["bytes_per_step"]
    assert by["hina"]["encodings"] and by["hina"]["wire_bytes_per_step"] >= by["hina"]["bytes_per_step"]
    assert by["hina"]["buckets"] >= 2  # --bucket-mb 0.05: several buckets a step
    assert len(r["runs"][0]["table"]) == 6 and all(row["fidelity"] is None for row in r["runs"][0]["table"])
    assert "missed within 4 steps" in tta.markdown(r) and "loopback" in proc.stdout
    assert out.with_suffix(".png").exists() or "no PNG" in proc.stderr


@pytest.mark.torch
def test_the_model_docs_ddp_describes():
    model = tta.word_lm(20_000, 128, 128)
    sizes = tta.model_sizes(model)
    text = " ".join((ROOT / "docs" / "ddp.md").read_text().split())
    assert f"{sizes['parameters']:,} parameters, {sizes['embedding_share']:.1%} of them in the two tables" in text
    cfg = tta.TtaConfig()
    assert (cfg.vocab, cfg.emb, cfg.hidden, cfg.batch, cfg.seq + 1, cfg.samples) == (20_000, 128, 128, 32, 36, 1024)
    assert (cfg.lr, cfg.clip, cfg.eval_every, cfg.eval_seqs, cfg.topk_density) == (0.1, 1.0, 25, 128, 0.01)


def test_the_curve_and_the_default_target_docs_ddp_quote_are_the_measured_ones():
    """The default target and the loss at the steps docs/ddp.md quotes are the committed loopback curve's."""
    import re

    text = " ".join((ROOT / "docs" / "ddp.md").read_text().split())
    run = json.loads((ROOT / "benchmarks/results/time_to_accuracy/loopback_gloo_curve.json").read_text())
    loss_at = {e["step"]: e["heldout_loss"] for e in tta.runs_of(run)[0]["systems"][0]["summary"]["evals"]}
    quoted = re.search(r"loopback_gloo_curve\.json`: (.*?)\), which", text).group(1)
    pairs = re.findall(r"(\d+\.\d+) at (?:step )?(\d+)", quoted)
    assert len(pairs) == 5
    for loss, step in pairs:
        assert f"{loss_at[int(step)]:.2f}" == loss
    assert f"target, {tta.DEFAULT_TARGET:g} nats per token" in text and f"budget, {tta.DEFAULT_STEPS} steps" in text
    first = min(s for s, v in loss_at.items() if v <= tta.DEFAULT_TARGET)
    assert f"arrive after {first} steps" in text


def test_the_plan_runs_the_reference_first_and_each_kind_of_network_once(tmp_path):
    """Every seed's runs through the switch, then every seed's over the bridge (one Mininet network each), the
    reference's kind first; within a seed the reference first, the only run that leaves its parameters."""
    base = tta.TtaConfig(workers=2)
    configs = tta.plan(base, ["topk", "gloo", "hina-dense", "hina"], [0, 1], tmp_path)
    assert [(c.seed, c.backend) for c in configs] == [(0, "hina"), (0, "hina-dense"), (1, "hina"), (1, "hina-dense"),
                                                      (0, "topk"), (0, "gloo"), (1, "topk"), (1, "gloo")]
    assert [c.backend for c in configs if c.writes_reference] == ["hina", "hina"]
    assert {c.reference for c in configs if c.seed == 1} == {str(tmp_path / "seed1")} and (tmp_path / "seed1").is_dir()
    assert [c.backend for c in tta.plan(base, ["int8", "gloo"], [0], tmp_path)] == ["gloo", "int8"]


@pytest.mark.torch
def test_a_rank_whose_peers_never_join_fails_at_the_rendezvous_bound(tmp_path):
    """One rank of two, the other never there: it fails with torch's timeout after RENDEZVOUS (here 2 s), not
    after torch's 30 minutes."""
    port, = free_tcp_ports()
    code = ("import sys; from hina.benchmarks import time_to_accuracy as tta, train_ddp\n"
            "train_ddp.RENDEZVOUS = 2.0\n"
            f"train_ddp.join_group(tta.TtaConfig(workers=2, deadline=1.0), 0, {port})\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "timed out" in proc.stderr.lower(), proc.stderr[-2000:]
