"""Real gradients from small real models (CPU PyTorch), against the workload generators' densities.

Two small models train a few steps on data generated here, one batch per
"worker": an LSTM language model (Zipf-distributed tokens, like words) and
an NCF-style matrix factorisation (log-uniform user and item ids, like
ranked ids).  Their autograd gradients are flattened exactly as a DDP hook
would see them; the script prints per-worker and union densities, and the
same for the matching `workloads.Embedding`/`Dense` layout with the same
shapes and lookups, so the generators' sparsity model (touched rows are
non-zero as whole rows, dense layers dense) is checked against real
backpropagation.  With --aggregate it also runs the real gradients through
the codec (numpy as the switch) and checks the sum exact.

    pip install -e '.[torch]'          # CPU PyTorch 2.13 (the wheel on this machine)
    python benchmarks/capture_torch.py [--workers 8 --steps 3 --aggregate]
Writes capture_torch.json (--out: the file; default: in $HINA_RESULTS, else hina-results/).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from hina.host import workloads
from hina.provenance import command_line, default_out, out_help, out_path, write_result

try:
    import torch
    from torch import nn
except ImportError:  # pragma: no cover - the optional extra
    torch = None


def lstm_model(vocab: int, emb: int, hidden: int):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, emb)
            self.lstm = nn.LSTM(emb, hidden, batch_first=True)
            self.proj = nn.Linear(hidden, emb)
            self.softmax = nn.Embedding(vocab, emb + 1)  # output word vectors + bias, as sampled softmax keeps

        def forward(self, tokens, candidates):
            h, _ = self.lstm(self.embedding(tokens[:, :-1]))
            out = self.proj(h)  # (B, T, emb)
            w = self.softmax(candidates)  # (C, emb + 1): the batch's targets and the sampled candidates
            logits = out @ w[:, :-1].T + w[:, -1]
            target_pos = torch.searchsorted(candidates, tokens[:, 1:].contiguous())
            return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target_pos.reshape(-1))

    return LM()


def ncf_model(users: int, items: int, dim: int):
    class MF(nn.Module):
        def __init__(self):
            super().__init__()
            self.user = nn.Embedding(users, dim)
            self.item = nn.Embedding(items, dim)
            self.mlp = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 1))

        def forward(self, u, i, y):
            x = torch.cat([self.user(u), self.item(i)], dim=1)
            return nn.functional.binary_cross_entropy_with_logits(self.mlp(x).squeeze(1), y)

    return MF()


def flat_grad(model) -> np.ndarray:
    return np.concatenate([p.grad.detach().numpy().reshape(-1) for p in model.parameters()]).astype(np.float32)


def last_step_gradients(model, loss, workers: int, steps: int) -> list[np.ndarray]:
    """Train `steps` SGD steps, each on one batch per worker; return the last step's per-worker gradients."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    grads = []
    for _ in range(steps):
        grads = []
        for _ in range(workers):
            model.zero_grad()
            loss().backward()
            grads.append(flat_grad(model))
        opt.step()
    return grads


def lstm_case(workers: int, steps: int, seed: int) -> dict:
    vocab, emb, hidden, batch, seq, samples = 50_000, 64, 128, 32, 21, 2048
    torch.manual_seed(seed)
    model = lstm_model(vocab, emb, hidden)
    rng = np.random.default_rng(seed)

    def loss():  # one worker's batch: Zipf tokens, their targets plus log-uniform sampled candidates
        ranks = (rng.zipf(1.05, size=batch * seq) - 1) % vocab
        sampled = workloads.loguniform_ranks(rng, vocab, samples)
        candidates = torch.from_numpy(np.unique(np.concatenate([ranks, sampled])))
        return model(torch.from_numpy(ranks.reshape(batch, seq)), candidates)

    grads = last_step_gradients(model, loss, workers, steps)
    lstm_size = sum(p.numel() for p in model.lstm.parameters()) + sum(p.numel() for p in model.proj.parameters())
    shaped = workloads.Workload("lstm-like", (
        workloads.Embedding("embedding", vocab, emb, batch * (seq - 1), "zipf", 1.05),
        workloads.Dense("lstm+proj", lstm_size),
        workloads.Embedding("softmax", vocab, emb + 1, batch * (seq - 1) + samples, "zipf", 1.05)))
    return {"model": f"LSTM LM, vocab {vocab:,}, emb {emb}, hidden {hidden}, {batch}x{seq} tokens, {samples} sampled",
            "real": workloads.densities(grads), "generated": workloads.densities(shaped.gradients(workers, seed)),
            "size": int(grads[0].size), "grads": grads}


def ncf_case(workers: int, steps: int, seed: int) -> dict:
    users, items, dim, batch = 20_000, 10_000, 32, 8_192
    torch.manual_seed(seed)
    model = ncf_model(users, items, dim)
    rng = np.random.default_rng(seed)

    def loss():  # one worker's batch: log-uniform user and item ids, random labels
        u, i = workloads.loguniform_ranks(rng, users, batch), workloads.loguniform_ranks(rng, items, batch)
        y = torch.from_numpy((rng.random(batch) < 0.5).astype(np.float32))
        return model(torch.from_numpy(u), torch.from_numpy(i), y)

    grads = last_step_gradients(model, loss, workers, steps)
    mlp = sum(p.numel() for p in model.mlp.parameters())
    shaped = workloads.Workload("ncf-like", (
        workloads.Embedding("user", users, dim, batch, "loguniform"),
        workloads.Embedding("item", items, dim, batch, "loguniform"),
        workloads.Dense("mlp", mlp)))
    return {"model": f"NCF-style MF, {users:,} users, {items:,} items, dim {dim}, batch {batch:,}",
            "real": workloads.densities(grads), "generated": workloads.densities(shaped.gradients(workers, seed)),
            "size": int(grads[0].size), "grads": grads}


def main(argv: list[str] | None = None) -> int:
    if torch is None:
        print("capture_torch.py needs PyTorch: pip install -e '.[torch]' (CPU build)", file=sys.stderr)
        return 2
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--aggregate", action="store_true", help="also run the real gradients through the codec")
    ap.add_argument("--out", type=out_path, default=default_out("capture_torch.json"),
                    help=out_help("capture_torch.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = []
    for case in (lstm_case, ncf_case):
        c = case(args.workers, args.steps, args.seed)
        line = (f"{c['model']}: real per-worker {c['real']['per_worker']:.2%}, union {c['real']['union']:.2%}; "
                f"generator per-worker {c['generated']['per_worker']:.2%}, union {c['generated']['union']:.2%}")
        if args.aggregate:
            from hina import codec

            r = codec.simulate_allreduce(c["grads"])
            exact = sum(codec.quantize(g, r.shift).astype(np.int64) for g in c["grads"]).astype(np.int32)
            c["codec"] = {"exact": bool(np.array_equal(r.fixed, exact)), "bytes_per_worker": r.bytes_per_worker,
                          "dense_bytes": 4 * c["size"], "encoding": r.encoding, "group": r.group}
            line += f"; codec exact={c['codec']['exact']}, {r.bytes_per_worker['total']:,} B vs dense {4 * c['size']:,}"
        print(line)
        del c["grads"]
        out.append(c)
    write_result(args.out, {"cases": out}, command_line("benchmarks/capture_torch.py", argv), torch=torch.__version__)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
