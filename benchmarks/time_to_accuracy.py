"""Time to accuracy: a word-level language model trained with DDP to a held-out loss, through the switch and not.

hina's promise has two halves: the sum is exact, so a model trains as it
would with a dense allreduce, and the sum is cheaper, so it gets there
sooner.  This benchmark trains one model on a real data set (NumPy 2.1.3's
documentation sources, from the exact archive on PyPI: `hina.host.corpus`)
with N ranks, once per system, from the same initial parameters and on the
same data (each rank its shard of each seeded global
batch), until the held-out loss reaches --target or the step budget
(--steps) runs out:

    hina        DDP + host.ddp's hook, auto mode (exact)
    hina-dense  the same hook in dense mode, SwitchML-style (exact: the same fixed-point sum)
    hina-blocks the same hook in blocks mode, OmniReduce-style: only the non-zero blocks (exact: the same sum)
    gloo        DDP's own float32 allreduce over gloo
    topk        Ok-Topk's top-k allreduce over gloo, with error feedback (lossy)
    int8        8-bit quantization with a shared per-bucket scale over gloo, with error feedback (lossy)

(the last three, and any other, are the DDP hooks of hina.baselines.registry).

The model: an embedding table, an LSTM, and a sampled-softmax output layer
(as capture_torch.lstm_model; its candidates corrected by their log
inclusion probability), so both tables' gradients are a batch's rows;
Adagrad.  Every --eval-every steps rank 0 computes the held-out loss with
the full softmax over the vocabulary on a fixed held-out sample (not counted
in the training time) and the distance of the parameters from the exact
reference run's (hina's, else hina-dense's, else gloo's; it runs first and
leaves its parameters at every evaluation in a scratch folder).  Every step
of every rank records its seconds, bytes, the buckets' overlap with
backward and a parameter digest.

--env loopback runs the emulator as a UDP server on 127.0.0.1 (rows
labelled loopback: the CPU, not the links, sets the time); --env mininet
(root) runs one rank per Mininet host at --bw Mbit/s, hina through the
emulator's star, gloo, topk and int8 through a Linux bridge with the same
links (train_ddp.py's machinery), with the fidelity monitor's verdict for
every run.  Writes a JSON and a PNG beside it to --out and prints a table.

    make install        # the torch and plot extras, and the corpus (make corpus)
    python benchmarks/time_to_accuracy.py --workers 4 [--systems hina,gloo,topk] [--env mininet --bw 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from hina.baselines import registry
from hina.benchmarks import train_ddp
from hina.control.fabric import TARGETS
from hina.host.job import DEFAULT_SLOTS, DEFAULT_WORDS

THROUGH_SWITCH = tuple(train_ddp.MODE_OF)  # hina, hina-dense, hina-blocks: the baselines go over gloo
SAME_SUM = ("hina-dense", "hina-blocks")  # the switch's fixed-point sum as hina's: bit-identical parameters
REFERENCE_ORDER = ("hina", "hina-dense", "gloo")  # the exact trajectory the others are measured against
HINA_LABEL = {"hina": "hina (auto)", "hina-dense": "hina dense (SwitchML-style)",
              "hina-blocks": "blocks (OmniReduce-style)"}
# the default target and budget (docs/ddp.md, "Time to accuracy"): the exact systems at 4 ranks reach 4.25 at the
# evaluation of step 100, where gloo's curve has flattened (4.31 at step 75, 4.20 at 100, 3.98 at 150)
DEFAULT_TARGET = 4.25
DEFAULT_STEPS = 300  # 3x that: room for a lossy system's extra steps
HELDOUT_SEED = 0x4E41  # the held-out sample does not depend on --seed: every run is scored on the same tokens


def systems() -> tuple[str, ...]:
    """Every system a run may train with, in table order: hina's through the switch, then each baseline's DDP
    hook (hina.baselines.registry)."""
    return (*THROUGH_SWITCH, *(b.name for b in registry.trained()))


def label_of(system: str) -> str:
    return HINA_LABEL[system] if system in HINA_LABEL else registry.get(system).label


@dataclass(frozen=True)
class TtaConfig:
    """One system's training run.  Field names shared with train_ddp.RunConfig are what its launchers set."""

    model: str = "lm"
    backend: str = "hina"  # the system
    workers: int = 4
    steps: int = DEFAULT_STEPS  # the step budget
    target: float = DEFAULT_TARGET  # held-out loss (nats per token) that ends the run
    keep_going: bool = False  # train to the budget even after the target (the time to it is still recorded)
    seed: int = 0
    lr: float = 0.1  # Adagrad
    adagrad_init: float = 1e-6  # Adagrad's initial accumulator (docs/ddp.md: why not 0)
    clip: float = 1.0  # the averaged gradient's global L2 norm is clipped to this (0: not clipped)
    vocab: int = 20_000
    emb: int = 128
    hidden: int = 128
    batch: int = 32  # sequences per rank and step
    seq: int = 35  # tokens predicted per sequence
    samples: int = 1024  # sampled-softmax draws per rank and step; 0: the full softmax (dense output gradients)
    eval_every: int = 25
    eval_seqs: int = 128  # held-out sequences (of seq predicted tokens) scored at every evaluation
    topk_density: float = 0.01  # topk: k = density x bucket elements
    reference: str | None = None  # the scratch folder of the exact reference's parameters
    writes_reference: bool = False  # this run is the reference: it leaves its parameters there
    bucket_mb: float = 25.0
    deadline: float = 30.0
    job_id: int = 1
    words: int = DEFAULT_WORDS
    slots: int = DEFAULT_SLOTS
    link_gbps: float = 10.0
    threads: int = 1
    switch: tuple[str, int] | None = None
    control: tuple[str, int] | None = None
    store: tuple[str, int] | None = None
    transport: str = "auto"
    switch_mac: str | None = None
    hosts: tuple[dict, ...] | None = None

    def __post_init__(self) -> None:
        if self.backend not in systems():
            raise ValueError(f"system must be one of {', '.join(systems())}, got {self.backend!r}")
        if not 1 <= self.workers <= 32:
            raise ValueError(f"workers must be 1..32, got {self.workers}")
        if self.samples < 0:
            raise ValueError(f"samples must be at least 0 (0: the full softmax), got {self.samples}")
        for name in ("steps", "eval_every", "eval_seqs", "batch", "seq", "emb", "hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.vocab < 16:
            raise ValueError(f"vocab must be at least 16, got {self.vocab}")
        if not 0 < self.topk_density <= 1:
            raise ValueError(f"topk-density must be within (0, 1], got {self.topk_density}")

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> TtaConfig:
        return cls(**train_ddp.tuples_again(cfg, ("switch", "control", "store", "hosts")))


# -- the model and its data --------------------------------------------------------------------------------

def word_lm(vocab: int, emb: int, hidden: int):
    """capture_torch.lstm_model's shape (embedding, LSTM, projection, output vectors + bias), with the
    sampled softmax's logits corrected by log Q (each candidate's inclusion probability) and a full-softmax
    loss for evaluation."""
    import torch
    from torch import nn

    class WordLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, emb)
            self.lstm = nn.LSTM(emb, hidden, batch_first=True)
            self.proj = nn.Linear(hidden, emb)
            self.softmax = nn.Embedding(vocab, emb + 1)  # output word vectors + bias
            with torch.no_grad():
                self.embedding.weight.uniform_(-0.1, 0.1)
                self.softmax.weight.uniform_(-0.1, 0.1)
                self.softmax.weight[:, -1] = 0.0

        def features(self, tokens):
            h, _ = self.lstm(self.embedding(tokens[:, :-1]))
            return self.proj(h)  # (B, T, emb)

        def forward(self, tokens, candidates, logq):
            out = self.features(tokens)
            w = self.softmax(candidates)  # (C, emb + 1): the batch's targets and the sampled candidates
            logits = out @ w[:, :-1].T + (w[:, -1] - logq)
            target_pos = torch.searchsorted(candidates, tokens[:, 1:].contiguous())
            return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target_pos.reshape(-1))

        @torch.no_grad()
        def full_loss(self, tokens, chunk: int = 16) -> float:
            """Mean cross-entropy over every predicted token, with the softmax over the whole vocabulary."""
            w = self.softmax.weight
            total, count = 0.0, 0
            for i in range(0, tokens.shape[0], chunk):
                part = tokens[i : i + chunk]
                logits = self.features(part) @ w[:, :-1].T + w[:, -1]
                total += float(nn.functional.cross_entropy(logits.reshape(-1, vocab), part[:, 1:].reshape(-1),
                                                           reduction="sum"))
                count += part[:, 1:].numel()
            return total / count

    return WordLM()


def model_sizes(model) -> dict[str, Any]:
    """Parameters in all, in the two embedding tables, and the tables' share."""
    total = sum(p.numel() for p in model.parameters())
    tables = model.embedding.weight.numel() + model.softmax.weight.numel()
    return {"parameters": total, "embedding_parameters": tables, "embedding_share": tables / total,
            "gradient_bytes": 4 * total,
            "shapes": {n: list(p.shape) for n, p in model.named_parameters()}}


def log_inclusion(vocab: int, samples: int) -> np.ndarray:
    """log Q(c): the probability that `samples` log-uniform draws include id c (ids in frequency order)."""
    k = np.arange(vocab, dtype=np.float64)
    p = np.log((k + 2) / (k + 1)) / math.log(vocab + 1)
    return np.log(-np.expm1(samples * np.log1p(-p))).astype(np.float32)


def step_batch(cfg: TtaConfig, train: np.ndarray, rank: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's rows of the step's global batch (seeded by seed and step alone: every system sees the
    same data), and its sampled-softmax candidates (its targets and `samples` log-uniform draws, unique; with
    samples 0 the whole vocabulary: the full softmax, every output row's gradient non-zero)."""
    from hina.host import corpus, workloads

    rows = corpus.Corpus.batch(train, np.random.default_rng([cfg.seed, step]), cfg.batch * cfg.workers, cfg.seq + 1)
    mine = rows[rank * cfg.batch : (rank + 1) * cfg.batch]
    if cfg.samples == 0:
        return mine, np.arange(cfg.vocab)
    sampled = workloads.loguniform_ranks(np.random.default_rng([cfg.seed, step, rank, 1]), cfg.vocab, cfg.samples)
    return mine, np.unique(np.concatenate([mine[:, 1:].reshape(-1), sampled]))


def heldout_sample(cfg: TtaConfig, heldout: np.ndarray) -> np.ndarray:
    """The fixed held-out sample: eval_seqs windows of seq + 1 tokens, the same for every seed and system."""
    from hina.host import corpus

    return corpus.Corpus.batch(heldout, np.random.default_rng(HELDOUT_SEED), cfg.eval_seqs, cfg.seq + 1)


def flat_parameters(model) -> np.ndarray:
    import torch

    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()


def digest(model) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(memoryview(p.detach().contiguous().numpy()).cast("B"))
    return h.hexdigest()


def distance(x: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    """How far parameters x are from the reference's: bitwise equality, relative L2, max |x - r| / max |r|."""
    d = x.astype(np.float64) - ref.astype(np.float64)
    scale = float(np.linalg.norm(ref.astype(np.float64)))
    peak = float(np.max(np.abs(ref))) if ref.size else 0.0
    return {"identical": bool(np.array_equal(x.view(np.int32), ref.view(np.int32))),
            "rel_l2": float(np.linalg.norm(d)) / scale if scale else float(np.linalg.norm(d)),
            "max_rel": float(np.max(np.abs(d))) / peak if peak else float(np.max(np.abs(d), initial=0.0))}


def overlap(buckets: list[dict[str, Any]], backward_end: float) -> dict[str, float]:
    """Communication against backward, from the buckets' times (perf_counter seconds): busy (the union of
    the buckets' [started, done]), hidden (its part before the last bucket was handed over, i.e. while
    backward was still computing gradients), exposed (backward's wait after its last gradient)."""
    ok = [b for b in buckets if "error" not in b]
    if not ok:
        return {"busy": 0.0, "hidden": 0.0, "exposed": 0.0}
    last = max(b["submitted"] for b in ok)
    busy = hidden = 0.0
    cur_lo = cur_hi = None
    for lo, hi in sorted((b["started"], b["done"]) for b in ok):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                busy += cur_hi - cur_lo
                hidden += max(0.0, min(cur_hi, last) - cur_lo)
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    busy += cur_hi - cur_lo
    hidden += max(0.0, min(cur_hi, last) - cur_lo)
    return {"busy": busy, "hidden": hidden, "exposed": max(0.0, backward_end - last)}


# -- one rank ------------------------------------------------------------------------------------------------

def run_rank(cfg: TtaConfig, rank: int, store_port: int, conn) -> None:
    """One rank on loopback (train_ddp.run's target): train, send the records or the error."""
    train_ddp.run_rank(cfg, rank, store_port, conn, trainer=train)


def rank_main(spec: Path, rank: int) -> int:
    """One rank of a Mininet run (--rank-spec): train, print one JSON line: {"records": ...} or {"error": ...}."""
    return train_ddp.rank_main(spec, rank, config=TtaConfig, trainer=train)


def score(model, cfg: TtaConfig, heldout, done: int) -> dict[str, Any]:
    """An evaluation after `done` steps: the held-out loss, and the distance of the parameters from the
    reference's at the same step (or, for the reference run itself, its parameters left for the others)."""
    t0 = time.perf_counter()
    rec = {"step": done, "heldout_loss": model.full_loss(heldout)}
    if cfg.reference is not None:
        ref = Path(cfg.reference) / f"step{done:07d}.npy"
        params = flat_parameters(model)
        if cfg.writes_reference:
            np.save(ref, params)
        elif ref.exists():
            rec["reference"] = distance(params, np.load(ref))
    rec["eval_seconds"] = time.perf_counter() - t0
    return rec


def evaluate(model, cfg: TtaConfig, rank: int, heldout, done: int, trained: float, evals: list) -> bool:
    """Rank 0 scores the held-out sample (`score`, into `evals`); every rank learns whether to stop: at the
    target (unless --keep-going) or the budget."""
    import torch
    import torch.distributed as dist

    stop = torch.zeros(1, dtype=torch.int32)
    if rank == 0:
        rec = score(model, cfg, heldout, done)
        evals.append(rec)
        print(f"  [{cfg.backend}] step {done}: held-out loss {rec['heldout_loss']:.3f} after {trained:.1f} s of "
              "training" + (f", {rec['reference']['rel_l2']:.1e} from the reference" if "reference" in rec else ""),
              file=sys.stderr, flush=True)
        stop[0] = int((rec["heldout_loss"] <= cfg.target and not cfg.keep_going) or done >= cfg.steps)
    dist.broadcast(stop, src=0)
    return bool(stop[0])


def train_step(ddp, model, opt, cfg: TtaConfig, tokens, candidates, logq) -> tuple[float, list[float]]:
    """One step: forward, backward (the hook sums the buckets), clipping, Adagrad; the loss, and the clock at
    its start and after the forward pass, the backward pass and the optimizer."""
    import torch

    start = time.perf_counter()
    opt.zero_grad(set_to_none=False)
    loss = ddp(tokens, candidates, logq[candidates])
    forward = time.perf_counter()
    loss.backward()
    backward = time.perf_counter()
    if cfg.clip > 0:  # on the averaged gradient: the same bits on every rank of an exact system
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
    opt.step()
    return float(loss.detach()), [start, forward, backward, time.perf_counter()]


def step_record(step: int, loss: float, clock: list[float], rep: dict[str, Any] | None, model) -> dict[str, Any]:
    """What a rank keeps of one step: the loss, the seconds of each phase, the hook's report (bytes, the
    buckets' overlap with backward, what went on the wire) and a digest of the parameters."""
    start, forward, backward, end = clock
    rep = rep or {"bytes": 0, "span": 0.0, "buckets": [], "errors": []}
    buckets = [{**b, "started": b["submitted"] + b["queued"]} if "queued" in b else b for b in rep["buckets"]]
    rec = {"step": step, "loss": loss, "seconds": end - start, "forward": forward - start,
           "backward": backward - forward, "optimizer": end - backward, "bytes": rep["bytes"], "comm": rep["span"],
           "buckets": len(buckets), **overlap(buckets, backward), "digest": digest(model)}
    if "wire_bytes" in rep:
        rec.update(wire_bytes=rep["wire_bytes"], retransmissions=rep["retransmissions"], encodings=rep["encodings"])
    if step in (0, 1):
        rec["bucket_elements"] = [b.get("elements") for b in buckets]
    return rec


def train(cfg: TtaConfig, rank: int, store_port: int) -> dict[str, Any]:
    """Train until the target or the budget; per step: loss, seconds, bytes, overlap, digest; rank 0 also
    every evaluation (held-out loss, distance from the reference)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from hina.host import corpus

    torch.set_num_threads(cfg.threads)
    data = corpus.load(vocab_size=cfg.vocab)
    train_ddp.join_group(cfg, rank, store_port)
    hook = transport = None
    try:
        torch.manual_seed(cfg.seed)
        model = word_lm(cfg.vocab, cfg.emb, cfg.hidden)
        ddp = DistributedDataParallel(model, bucket_cap_mb=cfg.bucket_mb)
        hook, hook_fn, transport = train_ddp.make_hook(cfg, rank)
        ddp.register_comm_hook(hook, hook_fn)
        logq = torch.from_numpy(log_inclusion(cfg.vocab, cfg.samples) if cfg.samples else
                                np.zeros(cfg.vocab, np.float32))  # the full softmax: no correction
        heldout = torch.from_numpy(heldout_sample(cfg, data.heldout)) if rank == 0 else None
        opt = torch.optim.Adagrad(ddp.parameters(), lr=cfg.lr, initial_accumulator_value=cfg.adagrad_init)
        dist.barrier()  # every rank has joined the switch before any gradient is sent
        steps: list[dict[str, Any]] = []
        evals: list[dict[str, Any]] = []
        trained = 0.0  # this rank's training seconds so far (for the progress line)
        evaluate(model, cfg, rank, heldout, 0, trained, evals)
        for step in range(cfg.steps):
            tokens, candidates = (torch.from_numpy(a) for a in step_batch(cfg, data.train, rank, step))
            loss, clock = train_step(ddp, model, opt, cfg, tokens, candidates, logq)
            trained += clock[-1] - clock[0]
            steps.append(step_record(step, loss, clock, hook.pop_step(), model))
            done = step + 1
            due = done % cfg.eval_every == 0 or done == cfg.steps
            if due and evaluate(model, cfg, rank, heldout, done, trained, evals):
                break
        out = {"steps": steps, "evals": evals}
        if rank == 0:
            out["model"] = model_sizes(model)
            if registry.lossy(cfg.backend):
                out["residual_norm"] = hook.residuals.norm()
        return out
    finally:
        if hook is not None:
            hook.close()
        if transport is not None:
            transport.close()
        dist.destroy_process_group()


# -- orchestration ------------------------------------------------------------------------------------------

def reference_system(systems: list[str]) -> str | None:
    return next((s for s in REFERENCE_ORDER if s in systems), None)


def run_order(systems: list[str]) -> list[str]:
    """The reference first (it leaves the parameters the others are measured against), then the rest as given;
    on Mininet each group (through the switch, over the bridge) runs in one network, the reference's first."""
    ref = reference_system(systems)
    rest = [s for s in systems if s != ref]
    ordered = ([ref] if ref else []) + rest
    first_switch = ref in THROUGH_SWITCH if ref else True
    switch = [s for s in ordered if s in THROUGH_SWITCH]
    bridge = [s for s in ordered if s not in THROUGH_SWITCH]
    return switch + bridge if first_switch else bridge + switch


def run_all(configs: list[TtaConfig], args: argparse.Namespace, log, bar) -> list[dict[str, Any]]:
    """Every system's run, in the configs' order, on loopback or Mininet."""
    here = Path(__file__).resolve()
    if args.env == "loopback":
        return train_ddp.run_loopback(configs, args.pipes, args.timeout, log, bar, target=run_rank)
    results: list[dict[str, Any]] = []
    groups: list[list[TtaConfig]] = []
    for cfg in configs:  # consecutive runs of one kind share a network
        if groups and (groups[-1][0].backend in THROUGH_SWITCH) == (cfg.backend in THROUGH_SWITCH):
            groups[-1].append(cfg)
        else:
            groups.append([cfg])
    for group in groups:
        results += train_ddp.run_mininet(group, args, log, bar, script=here)
    return results


def summarize(result: dict[str, Any], target: float) -> dict[str, Any]:
    """One system's run: per step (slowest rank's seconds, mean bytes, identical parameters, the digest), its
    evaluations on the training clock, the time and steps to the target, medians after the first step."""
    ranks = result["ranks"]
    if result["errors"] or not ranks or any(r is None for r in ranks):
        return {"errors": result["errors"] or ["no records"]}
    n = min(len(r["steps"]) for r in ranks)
    per_step, clock, sent = [], 0.0, 0.0
    for s in range(n):
        recs = [r["steps"][s] for r in ranks]
        clock += max(r["seconds"] for r in recs)
        sent += statistics.fmean(r["bytes"] for r in recs)
        busy = statistics.fmean(r["busy"] for r in recs)
        row = {"step": s, "loss": statistics.fmean(r["loss"] for r in recs),
               "seconds": max(r["seconds"] for r in recs), "clock": clock, "bytes": statistics.fmean(r["bytes"]
                                                                                                    for r in recs),
               "comm": max(r["comm"] for r in recs), "busy": busy,
               "hidden": statistics.fmean(r["hidden"] for r in recs),
               "exposed": max(r["exposed"] for r in recs), "buckets": recs[0]["buckets"],
               "identical": len({r["digest"] for r in recs}) == 1, "digest": recs[0]["digest"]}
        if "wire_bytes" in recs[0]:
            row["wire_bytes"] = statistics.fmean(r["wire_bytes"] for r in recs)
            row["retransmissions"] = sum(r["retransmissions"] for r in recs)
            row["encodings"] = recs[0]["encodings"]
        per_step.append(row)
    clock_at = {0: 0.0, **{r["step"] + 1: r["clock"] for r in per_step}}
    bytes_at = {0: 0.0}
    total = 0.0
    for r in per_step:
        total += r["bytes"]
        bytes_at[r["step"] + 1] = total
    evals = [{**e, "seconds": clock_at.get(e["step"]), "bytes": bytes_at.get(e["step"])} for e in ranks[0]["evals"]]
    hit = next((e for e in evals if e["heldout_loss"] <= target), None)
    crossing = interpolated_crossing(evals, target)
    steady = per_step[1:] or per_step  # step 0 pays first-use costs (buffers, DDP's bucket rebuild)
    busy = sum(r["busy"] for r in steady)
    out = {"steps_run": n, "steps": per_step, "evals": evals,
           "reached": hit is not None, "steps_to_target": hit["step"] if hit else None,
           "seconds_to_target": hit["seconds"] if hit else None, "bytes_to_target": hit["bytes"] if hit else None,
           "steps_to_target_interp": crossing[0] if crossing else None,
           "seconds_to_target_interp": crossing[1] if crossing else None,
           "final_heldout_loss": evals[-1]["heldout_loss"] if evals else None,
           "best_heldout_loss": min(e["heldout_loss"] for e in evals) if evals else None,
           "training_seconds": clock,
           "seconds_per_step": statistics.median(r["seconds"] for r in steady),
           "bytes_per_step": statistics.median(r["bytes"] for r in steady),
           "comm_seconds": statistics.median(r["comm"] for r in steady),
           "exposed_seconds": statistics.median(r["exposed"] for r in steady),
           "overlap": sum(r["hidden"] for r in steady) / busy if busy > 0 else None,
           "buckets": steady[-1]["buckets"],
           "identical_every_step": all(r["identical"] for r in per_step), "errors": []}
    if "wire_bytes" in per_step[0]:
        out["wire_bytes_per_step"] = statistics.median(r["wire_bytes"] for r in steady)
        out["encodings"] = sorted({e for r in steady for e in r["encodings"]})
    if "residual_norm" in ranks[0]:
        out["residual_norm"] = ranks[0]["residual_norm"]
    return out


def interpolated_crossing(evals: list[dict[str, Any]], target: float) -> tuple[float, float] | None:
    """(step, training seconds) where the held-out loss crosses `target`, linear between the last evaluation
    above it and the first at or below it (the evaluation itself only says "by then", a whole interval late);
    None if it never does."""
    before = None
    for e in evals:
        if e["seconds"] is None:
            continue
        if e["heldout_loss"] <= target:
            if before is None or before["heldout_loss"] == e["heldout_loss"]:
                return float(e["step"]), e["seconds"]
            f = (before["heldout_loss"] - target) / (before["heldout_loss"] - e["heldout_loss"])
            return (before["step"] + f * (e["step"] - before["step"]),
                    before["seconds"] + f * (e["seconds"] - before["seconds"]))
        before = e
    return None


def exactness(systems: dict[str, dict[str, Any]], reference: str | None) -> dict[str, Any]:
    """hina against hina-dense and hina-blocks bit for bit at every step (digests); hina (the reference)
    against gloo at every evaluation; each lossy system's distance from the reference at every evaluation both
    reached."""
    out: dict[str, Any] = {"reference": reference}
    ok = {k: v for k, v in systems.items() if not v["errors"]}
    for other in SAME_SUM:
        if "hina" in ok and other in ok:
            a, b = ok["hina"]["steps"], ok[other]["steps"]
            common = min(len(a), len(b))
            differ = [s for s in range(common) if a[s]["digest"] != b[s]["digest"]]
            out[f"hina_vs_{other.removeprefix('hina-')}"] = {
                "steps_compared": common, "same_steps_run": len(a) == len(b),
                "identical_every_step": not differ and len(a) == len(b),
                "first_difference": differ[0] if differ else None}
    for name, s in ok.items():
        if name == reference:
            continue
        points = [{"step": e["step"], **e["reference"]} for e in s["evals"] if "reference" in e]
        if not points:
            continue
        out[name] = {"evaluations_compared": len(points), "points": points,
                     "identical_at_every_evaluation": all(p["identical"] for p in points),
                     "max_rel_l2": max(p["rel_l2"] for p in points), "max_rel": max(p["max_rel"] for p in points)}
    return out


def table(result: dict[str, Any], env_label: str | None = None) -> list[dict[str, Any]]:
    """One row per system of a run (one seed's): time and steps to the target, bytes and seconds per step,
    overlap, exactness, verdict."""
    rows = []
    ex = result["exactness"]
    for s in result["systems"]:
        row: dict[str, Any] = {"system": s["system"], "env": env_label or result["env_label"]}
        summ = s["summary"]
        if summ["errors"]:
            rows.append({**row, "error": summ["errors"]})
            continue
        row.update({k: summ.get(k) for k in ("reached", "seconds_to_target", "steps_to_target", "steps_run",
                                             "bytes_per_step", "seconds_per_step", "overlap", "final_heldout_loss",
                                             "identical_every_step", "seconds_to_target_interp",
                                             "steps_to_target_interp")})
        row["fidelity"] = s["fidelity"]["verdict"] if s.get("fidelity") else None
        if s["system"] == ex.get("reference"):
            row["vs_exact"] = "reference"
        elif s["system"] in ex:
            e = ex[s["system"]]
            row["vs_exact"] = ("bit-identical" if e["identical_at_every_evaluation"]
                               else f"rel L2 <= {e['max_rel_l2']:.1e}")
        same = f"hina_vs_{s['system'].removeprefix('hina-')}"
        if s["system"] in SAME_SUM and same in ex:
            row["digests_equal_hina"] = ex[same]["identical_every_step"]
        rows.append(row)
    return rows


def runs_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A result's runs, one per seed: {seed, systems, exactness, table} (a one-seed result written before
    --seeds keeps them at its top)."""
    if "runs" in result:
        return result["runs"]
    target = result["config"]["target"]
    table = []
    for row, entry in zip(result["table"], result["systems"]):  # the crossings those results did not keep
        crossing = interpolated_crossing(entry["summary"].get("evals", []), target) if "error" not in row else None
        table.append({**row, "steps_to_target_interp": crossing[0] if crossing else None,
                      "seconds_to_target_interp": crossing[1] if crossing else None} if "error" not in row else row)
    return [{"seed": result.get("config", {}).get("seed", 0), "systems": result["systems"],
             "exactness": result["exactness"], "table": table}]


def _stats(values: list[float]) -> dict[str, Any] | None:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values), "values": values} \
        if values else None


def spread(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per system over the seeds: how many reached the target, the seconds and steps to it (at the evaluation
    and at the interpolated crossing), seconds and bytes per step, each as mean, min, max and the values."""
    out = {}
    for system in [e["system"] for e in runs[0]["systems"]]:
        rows = [r for run in runs for r in run["table"] if r["system"] == system and "error" not in r]
        hit = [r for r in rows if r.get("reached")]
        out[system] = {"seeds": len(runs), "ran": len(rows), "reached": len(hit),
                       **{k: _stats([r[k] for r in hit if r.get(k) is not None])
                          for k in ("seconds_to_target", "seconds_to_target_interp", "steps_to_target",
                                    "steps_to_target_interp")},
                       **{k: _stats([r[k] for r in rows]) for k in ("seconds_per_step", "bytes_per_step")}}
    return out


def _mean_range(stats: dict[str, Any] | None, fmt: str = ".1f") -> str:
    if not stats:
        return "-"
    if len(stats["values"]) == 1:
        return f"{stats['mean']:{fmt}}"
    return f"{stats['mean']:{fmt}} ({stats['min']:{fmt}}-{stats['max']:{fmt}})"


def _verdicts(entries: list[dict[str, Any]]) -> str:
    """The fidelity monitor's verdicts of a system's runs, one per run: "network-bound", "neither x2, ..."."""
    found = [short_verdict((e.get("fidelity") or {}).get("verdict")) for e in entries]
    counts = {v: found.count(v) for v in dict.fromkeys(found)}
    return ", ".join(v if n == 1 and len(found) == 1 else f"{v} x{n}" for v, n in counts.items())


def markdown(result: dict[str, Any]) -> str:
    """The result's table in markdown (for docs; tools/tables.py may render it): per system, over the seeds,
    the mean with the range in brackets where there are several."""
    runs = runs_of(result)
    by = result.get("spread") or spread(runs)
    seeds = len(runs)
    lines = [f"Target held-out loss {result['config']['target']:g} (nats per token), {result['config']['workers']} "
             f"workers, {result['env_label']}"
             + (f"; {seeds} seeds ({', '.join(str(r['seed']) for r in runs)}): the mean, the range in brackets."
                if seeds > 1 else "."), "",
             "| system | seconds to target (at the evaluation) | seconds to target (interpolated) | steps to target | "
             "bytes per step (per rank) | seconds per step | comm hidden in backward | parameters vs exact | "
             "fidelity |", "|---" * 9 + "|"]
    for system in [e["system"] for e in runs[0]["systems"]]:
        entries = [e for run in runs for e in run["systems"] if e["system"] == system]
        rows = [r for run in runs for r in run["table"] if r["system"] == system]
        errors = [e for r in rows for e in r.get("error", [])]
        s = by[system]
        if errors and not s["ran"]:
            lines.append(f"| {label_of(system)} | failed: {'; '.join(errors)} | | | | | | | |")
            continue
        ok = [r for r in rows if "error" not in r]
        missed = f"missed within {max(r['steps_run'] for r in ok)} steps" if s["reached"] < len(ok) else ""
        to_target = _mean_range(s["seconds_to_target"]) if s["reached"] else missed
        if s["reached"] and missed:
            to_target += f"; {len(ok) - s['reached']} {missed}"
        hidden = ok[0].get("overlap")
        vs = ok[0].get("vs_exact", "")
        same = [r.get("digests_equal_hina") for r in ok if r.get("digests_equal_hina") is not None]
        if same:
            vs = ("bit-identical to hina at every step" if all(same) else "DIFFERS from hina")
        elif vs.startswith("rel L2"):
            worst = max(float(r["vs_exact"].split("<= ")[1]) for r in ok if str(r.get("vs_exact", "")).startswith(
                "rel L2"))
            vs = f"rel L2 <= {worst:.1e}"
        lines.append(f"| {label_of(system)} | {to_target} | {_mean_range(s['seconds_to_target_interp'])} | "
                     f"{_mean_range(s['steps_to_target'], '.0f')} | "
                     f"{s['bytes_per_step']['mean'] / 1e6:.3f} MB | {_mean_range(s['seconds_per_step'], '.3f')} | "
                     f"{f'{hidden:.0%}' if hidden is not None else ''} | {vs} | {_verdicts(entries)} |")
    return "\n".join(lines)


def short_verdict(verdict: str | None) -> str:
    """The fidelity monitor's verdict without its evidence: network-bound, CPU-bound or neither."""
    if verdict is None:
        return "n/a (loopback)"
    return verdict.split(":")[0].split(" (")[0]


def plot(result: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    target = result["config"]["target"]
    runs = runs_of(result)
    for i, run in enumerate(runs):  # every seed's curves, the first labelled, the others fainter
        for s in run["systems"]:
            summ = s["summary"]
            if summ["errors"]:
                continue
            ev = summ["evals"]
            style = {"color": train_ddp.color_of(s["system"]), "label": label_of(s["system"]) if i == 0 else None,
                     "linestyle": "--" if registry.lossy(s["system"]) else "-", "marker": "." if i == 0 else None,
                     "alpha": 1.0 if i == 0 else 0.45}
            axes[0].plot([e["seconds"] for e in ev], [e["heldout_loss"] for e in ev], **style)
            axes[1].plot([e["step"] for e in ev], [e["heldout_loss"] for e in ev], **style)
            pts = run["exactness"].get(s["system"], {}).get("points", [])
            if pts:
                axes[2].plot([p["step"] for p in pts], [max(p["rel_l2"], 1e-12) for p in pts], **style)
    for ax in axes[:2]:
        ax.axhline(target, color="grey", linewidth=0.8, linestyle=":")
        ax.set_ylabel("held-out loss (nats per token, full softmax)")
        ax.legend()
    axes[0].set(title="held-out loss against training time", xlabel="seconds (training)")
    axes[1].set(title="held-out loss against steps", xlabel="step")
    axes[2].set(title=f"distance from the exact trajectory ({runs[0]['exactness'].get('reference')}; 0 drawn at 1e-12)",
                xlabel="step", ylabel="||theta - theta_exact|| / ||theta_exact||", yscale="log")
    if axes[2].lines:
        axes[2].legend()
    cfg = result["config"]
    seeds = f"; {len(runs)} seeds (the first drawn solid)" if len(runs) > 1 else ""
    fig.suptitle(f"{cfg['workers']} ranks, {result['env_label']}; target {target:g} nats per token (dotted){seeds}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def replot(path: Path) -> int:
    """--replot: an earlier result's table, and its PNG drawn again."""
    try:
        report = json.loads(path.read_text())
        runs_of(report)[0]["exactness"]  # noqa: B018 (a result of this script, not some other JSON)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"time_to_accuracy.py: --replot {path}: not a result of this script ({e})", file=sys.stderr)
        return 2
    print(markdown(report))
    png = path.with_suffix(".png")
    if not plot(report, png):
        print("no PNG: matplotlib is missing, pip install -e '.[plot]'", file=sys.stderr)
        return 2
    print(f"wrote {png}", file=sys.stderr)
    return 0


def csv(choices):
    def parse(text: str) -> list[str]:
        items = [t for t in text.split(",") if t]
        bad = [t for t in items if t not in choices]
        if bad or not items or len(set(items)) != len(items):
            raise argparse.ArgumentTypeError(f"choose each of {', '.join(choices)} at most once, got {text!r}")
        return items

    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from hina.cliargs import OneLineParser

    ap = OneLineParser(prog="time_to_accuracy.py", description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _run_flags(ap.add_argument_group("the run"))
    _model_flags(ap.add_argument_group("the model and its training"))
    _switch_flags(ap.add_argument_group("the network and the switch"))
    _output_flags(ap.add_argument_group("where it goes (and a Mininet rank's own flags)"))
    return ap.parse_args(argv)


def _run_flags(ap) -> None:
    from hina.cliargs import between, positive

    ap.add_argument("--workers", type=between(1, 32), default=4, help="ranks (Mininet: one per host)")
    ap.add_argument("--steps", type=between(1), default=DEFAULT_STEPS, help="the step budget per system")
    ap.add_argument("--target", type=positive, default=DEFAULT_TARGET,
                    help="held-out loss (nats per token, full softmax) that ends a run")
    ap.add_argument("--keep-going", action="store_true",
                    help="train every system to the budget (the time to the target is still the first crossing)")
    ap.add_argument("--systems", type=csv(systems()), default=",".join(systems()),
                    help="comma-separated: " + ", ".join(systems()))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0],
                    help="initial parameters and data order: every system trains once per seed, and the table gives "
                         "the mean with the spread")
    ap.add_argument("--eval-every", type=between(1), default=25, help="steps between held-out evaluations")
    ap.add_argument("--eval-seqs", type=between(1), default=128, help="held-out sequences scored per evaluation")
    ap.add_argument("--threads", type=between(1), default=1, help="torch threads per rank")
    ap.add_argument("--timeout", type=positive, default=14400.0, help="seconds one system's run may take")


def _model_flags(ap) -> None:
    from hina.cliargs import between, non_negative, positive

    ap.add_argument("--bucket-mb", type=positive, default=25.0, help="DDP's bucket_cap_mb (small: several buckets)")
    ap.add_argument("--vocab", type=between(16), default=20_000, help="vocabulary (most frequent training tokens)")
    ap.add_argument("--emb", type=between(1), default=128, help="embedding width")
    ap.add_argument("--hidden", type=between(1), default=128, help="LSTM width")
    ap.add_argument("--batch", type=between(1), default=32, help="sequences per rank and step")
    ap.add_argument("--seq", type=between(1), default=35, help="tokens predicted per sequence")
    ap.add_argument("--samples", type=between(0), default=1024,
                    help="sampled-softmax draws per rank and step; 0: the full softmax (a model whose gradients are "
                         "dense, with a small --vocab)")
    ap.add_argument("--lr", type=positive, default=0.1, help="Adagrad's learning rate")
    ap.add_argument("--adagrad-init", type=non_negative, default=1e-6,
                    help="Adagrad's initial accumulator: its square root bounds how much a tiny gradient is magnified")
    ap.add_argument("--clip", type=non_negative, default=1.0,
                    help="clip the averaged gradient's global L2 norm to this (0: no clipping)")
    ap.add_argument("--topk-density", type=positive, default=0.01, help="topk: k = density x bucket elements")


def _switch_flags(ap) -> None:
    from hina.cliargs import between, non_negative, positive

    ap.add_argument("--env", choices=("loopback", "mininet"), default="loopback",
                    help="loopback: the emulator as a UDP server on 127.0.0.1; mininet (root): a star of hosts")
    ap.add_argument("--bw", type=non_negative, default=1000.0,
                    help="Mbit/s per Mininet link, 0: unshaped (--env mininet)")
    ap.add_argument("--switch", choices=TARGETS, default="emulator",
                    help="the Mininet star's switch for hina and hina-dense: the Python emulator, BMv2 or the XDP "
                         "switch (--env mininet)")
    ap.add_argument("--transport", choices=("auto", "udp", "raw"), default="auto",
                    help="hina's transport on Mininet hosts: UDP when routed (auto), or raw frames")
    ap.add_argument("--deadline", type=positive, default=30.0, help="seconds one bucket may take through the switch")
    ap.add_argument("--words", type=between(1), default=DEFAULT_WORDS,
                    help="words per packet K on loopback (Mininet: the star's)")
    ap.add_argument("--slots", type=between(1), default=DEFAULT_SLOTS, help="packets in flight per worker W")
    ap.add_argument("--link-gbps", type=positive, default=10.0,
                    help="the link rate auto's cost model assumes on loopback (Mininet: --bw)")
    ap.add_argument("--pipes", type=between(1, 64), default=1, help="the loopback emulator's data plane processes")


def _output_flags(ap) -> None:
    from hina.provenance import OUT_RULE, default_out, out_path

    ap.add_argument("--scratch", type=Path, default=None,
                    help="keep the reference's parameters (one .npy per evaluation) in this folder "
                         "(default: a temporary folder, removed at the end)")
    ap.add_argument("--out", type=out_path, default=default_out("time_to_accuracy.json"),
                    help=f"the JSON written, the PNG beside it (same stem); when not given, time_to_accuracy.json "
                         f"in {OUT_RULE} (benchmarks/results/, the committed figures, only when named here)")
    ap.add_argument("--replot", type=Path, metavar="JSON",
                    help="train nothing: print the table of an earlier result and draw its PNG beside it again")
    ap.add_argument("--rank-spec", type=Path, help="internal: run one rank of a Mininet run from this spec file")
    ap.add_argument("--rank", type=int, default=0, help="internal: the rank --rank-spec runs")


def cannot_run(args: argparse.Namespace, data) -> str | None:
    """Why this run cannot start here (one line), or None."""
    if args.env == "mininet" and os.geteuid() != 0:
        return "--env mininet needs root"
    if len(set(args.seeds)) != len(args.seeds):
        return f"--seeds: each seed once, got {' '.join(map(str, args.seeds))}"
    if data.heldout.size < args.seq + 1 or data.train.size < args.seq + 1:
        return f"--seq {args.seq} is longer than the corpus"
    return None


def base_config(args: argparse.Namespace) -> TtaConfig:
    """The settings every system's run shares (the flags'); each run then sets its system and seed."""
    return TtaConfig(workers=args.workers, steps=args.steps, target=args.target, keep_going=args.keep_going,
                     seed=args.seeds[0], lr=args.lr, adagrad_init=args.adagrad_init, clip=args.clip, vocab=args.vocab,
                     emb=args.emb, hidden=args.hidden, batch=args.batch, seq=args.seq, samples=args.samples,
                     eval_every=args.eval_every, eval_seqs=args.eval_seqs, topk_density=args.topk_density,
                     bucket_mb=args.bucket_mb, deadline=args.deadline, words=args.words, slots=args.slots,
                     link_gbps=args.link_gbps, threads=args.threads, transport=args.transport)


def plan(base: TtaConfig, systems_: list[str], seeds: list[int], scratch: Path) -> list[TtaConfig]:
    """Every run in order: every seed's runs through the switch, then every seed's over the bridge (on Mininet
    each kind is one network), the kind of the reference first; within a seed the reference first
    (`run_order`), leaving its parameters in the seed's folder of `scratch`."""
    order, ref = run_order(systems_), reference_system(systems_)
    for seed in seeds:
        (scratch / f"seed{seed}").mkdir(parents=True, exist_ok=True)
    return [replace(base, backend=s, seed=seed, reference=str(scratch / f"seed{seed}"), writes_reference=s == ref)
            for kind in (True, False) for seed in seeds for s in order
            if (s in THROUGH_SWITCH) == (kind == (order[0] in THROUGH_SWITCH))]


def gather(configs: list[TtaConfig], results: list[dict[str, Any]], args: argparse.Namespace,
           env_label: str) -> tuple[list[dict[str, Any]], bool]:
    """Each seed's run: its systems' summaries, their exactness against the reference, its table; and whether
    any system failed."""
    entries: dict[tuple[int, str], dict[str, Any]] = {}
    for cfg, res in zip(configs, results):
        entries[cfg.seed, cfg.backend] = {"system": cfg.backend, "seed": cfg.seed, "config": res["config"],
                                          "summary": summarize(res, args.target),
                                          **({"fidelity": res["fidelity"]} if "fidelity" in res else {})}
    runs = []
    for seed in args.seeds:
        run = {"seed": seed, "systems": [entries[seed, s] for s in args.systems]}
        run["exactness"] = exactness({e["system"]: e["summary"] for e in run["systems"]},
                                     reference_system(args.systems))
        run["table"] = table(run, env_label)
        runs.append(run)
    return runs, any(e["summary"]["errors"] for e in entries.values())


def shared_config(base: TtaConfig, args: argparse.Namespace) -> dict[str, Any]:
    """The result's config: what every run shared (not its system, seed or addresses), the systems and seeds."""
    per_run = ("backend", "reference", "writes_reference", "switch", "control", "store", "switch_mac", "hosts",
               "job_id", "seed")
    return ({k: v for k, v in asdict(base).items() if k not in per_run}
            | {"systems": args.systems, "run_order": run_order(args.systems), "seeds": args.seeds})


def print_exactness(report: dict[str, Any]) -> None:
    """Per seed: hina against the systems that sum as it does, bit for bit, and every other system's distance
    from the reference."""
    for run in report["runs"]:
        ex = run["exactness"]
        for other in SAME_SUM:
            same = ex.get(f"hina_vs_{other.removeprefix('hina-')}")
            if same:
                print(f"seed {run['seed']}: hina vs {other}: parameters bit-identical at every step: "
                      f"{same['identical_every_step']} ({same['steps_compared']} steps)")
        for name in report["config"]["systems"]:
            if name in ex and name != ex["reference"]:
                e = ex[name]
                print(f"seed {run['seed']}: {name} vs {ex['reference']}: max relative L2 {e['max_rel_l2']:.3e}, "
                      f"max |diff| / max |theta| {e['max_rel']:.3e} over {e['evaluations_compared']} evaluations")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rank_spec is not None:
        return rank_main(args.rank_spec, args.rank)
    if args.replot is not None:
        return replot(args.replot)
    try:
        import torch
    except ImportError:
        print("time_to_accuracy.py needs PyTorch: pip install -e '.[torch]' (CPU build)", file=sys.stderr)
        return 2
    from hina.host import corpus

    why = corpus.missing()
    data = corpus.load(vocab_size=args.vocab) if why is None else None
    why = why or cannot_run(args, data)
    if why:
        print(f"time_to_accuracy.py: {why}", file=sys.stderr)
        return 2
    from hina.progress import Progress
    from hina.provenance import command_line, write_result

    base = base_config(args)
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="hina-tta-"))
    configs = plan(base, args.systems, args.seeds, scratch)
    env_label = "loopback" if args.env == "loopback" else (
        f"mininet at {args.bw or 'unshaped'} Mbit/s: hina through the {args.switch}, the others through a Linux bridge")
    try:
        with Progress(len(configs), "time_to_accuracy") as bar:
            results = run_all(configs, args, bar.print, bar)
    finally:
        if args.scratch is None:
            shutil.rmtree(scratch, ignore_errors=True)
    runs, failed = gather(configs, results, args, env_label)
    sizes = next((r["model"] for res in results for r in (res["ranks"] or [])[:1] if r and "model" in r), None)
    result = {"env": args.env, "env_label": env_label, "bw_mbit": args.bw if args.env == "mininet" else None,
              "config": shared_config(base, args), "corpus": data.describe(), "model": sizes, "runs": runs,
              "spread": spread(runs)}
    report = write_result(args.out, result, command_line("benchmarks/time_to_accuracy.py", argv),
                          torch=torch.__version__)
    print(markdown(report))
    print_exactness(report)
    png = args.out.with_suffix(".png")
    with contextlib.suppress(Exception):
        if plot(report, png):
            print(f"wrote {args.out} and {png}", file=sys.stderr)
        else:
            print(f"wrote {args.out} (no PNG: matplotlib is missing, pip install -e '.[plot]')", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
