"""hina.baselines.registry is the one list of baselines: a baseline registered there (a toy, here, never
committed) is offered, labelled, run and judged by every caller, and one not registered is refused by each."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest
import reproduce  # tools/, on the path by tests/conftest.py
import result_files
import tables

from hina.baselines import launch, registry, worker
from hina.benchmarks import compare, train_ddp
from hina.benchmarks import time_to_accuracy as tta

TOY = registry.Baseline(
    "toy", "toy allreduce", lossy=True, detail="toy allreduce: every gradient doubled",
    allreduce=lambda comm, grad, params: 2 * grad,
    hook=lambda rank, world, params: {"rank": rank, "world": world, "workers": params["workers"]},
    describe=lambda notes, params, length: f"doubled {length:,} elements", color="C9")


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(registry.BASELINES, TOY.name, TOY)
    return TOY


def test_every_entry_runs_somewhere_and_names_are_unique():
    assert len({b.name for b in registry.BASELINES.values()}) == len(registry.BASELINES)
    assert all(name == b.name for name, b in registry.BASELINES.items())
    assert {b.name for b in registry.compared()} == {"ring", "sparcml", "oktopk", "oktopk_topk", "zen"}
    assert {b.name for b in registry.trained()} == {"gloo", "topk", "int8"}
    with pytest.raises(ValueError, match="neither an allreduce nor a DDP hook"):
        registry.Baseline("idle", "idle", lossy=False)
    with pytest.raises(ValueError, match=r"no baseline named 'toy' \(baselines: ring, sparcml"):
        registry.get("toy")


def test_the_workers_run_it_and_the_launcher_summarizes_it(toy):
    grad = np.arange(5, dtype=np.float32)
    assert np.array_equal(worker.run_one("toy", None, grad, {}), 2 * grad)
    spec = {"baselines": ["toy"], "world": 2, "seeds": [7]}
    launch.validate(spec)
    line = {"baseline": "toy", "round": 0, "seed": 7, "seconds": 0.5, "start": 1.0, "delay": 0.0, "tx_bytes": None,
            "sent": {"index": 0, "values": 40, "dense": 0, "meta": 16}, "notes": {}, "crc": 3, "length": 5}
    run, = launch.summarize([[{**line, "rank": 0, "check": {"within_bound": False}}], [{**line, "rank": 1}]], spec)
    assert (run["mode"], run["lossy"], run["exact"], run["encoding"]) == ("toy", True, False, "doubled 5 elements")


def test_compare_offers_it_labels_it_and_counts_it_a_baseline(toy):
    assert "toy" in compare.parse_args(["--mininet", "off"]).baselines
    assert compare.parse_args(["--systems", "auto", "toy", "--mininet", "off"]).systems == ["auto", "toy"]
    assert compare.label("toy") == TOY.detail
    r = {"seconds": 0.1, "bytes_per_worker": 10, "retransmissions": None, "exact": False, "encoding": "doubled"}
    assert compare.row("loopback", "lstm", "toy", 100, {"per_worker": 0.1, "union": 0.2}, r)["system"] == "baseline"


def test_the_tables_and_the_claims_list_it_and_never_count_a_lossy_one_as_lossless(toy):
    assert ("toy", "toy allreduce") in tables.systems() and tables.systems() == result_files.systems()
    assert tables.label("toy") == TOY.detail
    rows = {("lstm", "toy"): {"system": "baseline", "seconds": 0.01},  # fastest, but lossy
            ("lstm", "zen"): {"system": "baseline", "seconds": 0.2},
            ("lstm", "auto"): {"system": "hina", "seconds": 0.1}}
    assert reproduce.fastest_lossless(rows, "lstm") is rows["lstm", "zen"]


def test_the_training_benchmarks_offer_it_colour_it_and_make_its_hook(toy):
    pytest.importorskip("torch")  # the hook function lives beside the torch hooks
    assert "toy" in tta.systems() and "toy" in train_ddp.backends()
    assert tta.label_of("toy") == "toy allreduce" and train_ddp.color_of("toy") == "C9"
    cfg = tta.TtaConfig(backend="toy", workers=3)
    state, fn, transport = train_ddp.make_hook(cfg, rank=2)
    assert state == {"rank": 2, "world": 3, "workers": 3} and transport is None
    assert fn.__name__ == "lossy_allreduce_hook"
    assert train_ddp.RunConfig(backend="toy").backend == "toy"
    assert asdict(cfg)["backend"] == "toy"


def test_without_it_every_caller_refuses_it():
    assert "toy" not in tta.systems() and "toy" not in train_ddp.backends()
    assert "toy" not in dict(tables.systems())
    with pytest.raises(ValueError, match="system must be one of"):
        tta.TtaConfig(backend="toy")
    with pytest.raises(ValueError, match="unknown baselines"):
        launch.validate({"baselines": ["toy"], "world": 2})
    with pytest.raises(SystemExit):
        compare.parse_args(["--baselines", "toy", "--mininet", "off"])
