"""Train with PyTorch DDP across machines, every gradient bucket summed by a hina switch: run it under torchrun.

One process per rank, as torchrun starts them (`--nnodes N --nproc-per-node M`: M ranks on each of N
machines).  Each rank reaches the switch from a UDP port of its own, so the ranks of a machine do not
collide; with `--control` (the emulator's control port) each joins the job there, which tells the switch
its address; without it (BMv2, a P4 switch configured by the controller) rank r sends from
`--port-base` + its local rank, the address the switch's configuration lists for it (docs/deploy.md).

    # on each of two machines, 4 ranks each; the emulator runs on 10.0.0.3
    torchrun --nnodes 2 --nproc-per-node 4 --node-rank K --master-addr 10.0.0.1 --master-port 29500 \\
        examples/ddp_torchrun.py --switch 10.0.0.3:20033 --control 10.0.0.3:CONTROL_PORT --steps 20

The model is a small recommendation model (an embedding table, whose gradients are sparse, under a dense
MLP), trained on a seeded synthetic click log; after every step every rank's parameters are compared by
digest across all ranks (a mismatch exits 1).  `--backend gloo` trains the same model from the same
initialisation with DDP's own allreduce instead, for the seconds-per-iteration comparison.  Rank 0
prints one JSON line per step and, with `--out`, writes them all.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import hina
from hina.cliargs import OneLineParser, between, positive
from hina.control.ledger import DEFAULT_WHEN_FULL, WHEN_FULL
from hina.host.ddp import register
from hina.host.job import DEFAULT_SLOTS


class Recommender(nn.Module):
    """`rows` embeddings of `dim` floats (the sparse part: a batch touches few rows) under a dense MLP."""

    def __init__(self, rows: int, dim: int):
        super().__init__()
        self.embedding = nn.Embedding(rows, dim)
        self.mlp = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([self.embedding(users), self.embedding(items)], dim=1)).squeeze(1)


def batch(step: int, rank: int, rows: int, size: int) -> tuple[torch.Tensor, ...]:
    """A seeded batch of (user, item, click): ids from a Zipf-like law, so ranks share popular rows."""
    g = torch.Generator().manual_seed(1_000_003 * step + rank)
    ranked = torch.randint(1, rows, (2, size), generator=g).float()
    ids = (rows * (ranked / rows) ** 3).long().clamp_(0, rows - 1)  # skewed towards low ids
    clicks = ((ids[0] + ids[1]) % 7 < 3).float()
    return ids[0], ids[1], clicks


def digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 1 << 16:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="examples/ddp_torchrun.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=("hina", "gloo"), default="hina",
                    help="hina: every bucket through the switch; gloo: DDP's own allreduce (default: hina)")
    ap.add_argument("--switch", type=address, help="the switch's data address HOST:PORT (hina)")
    ap.add_argument("--control", type=address, help="the emulator's control port HOST:PORT: each rank joins there")
    ap.add_argument("--port-base", type=between(1, 65535), default=None, metavar="P",
                    help="without --control: rank k of a machine sends from UDP port P + k, as the switch's "
                         "configuration lists it (default: a port of the kernel's choice, with --control)")
    ap.add_argument("--job-id", type=between(0, 65535), default=1, help="the job on the switch (default: 1)")
    ap.add_argument("--mode", choices=hina.MODES, default="auto", help="the codec's mode (default: auto)")
    ap.add_argument("--slots", type=between(1), default=DEFAULT_SLOTS,
                    help=f"slots asked of the switch (default: {DEFAULT_SLOTS})")
    ap.add_argument("--when-full", choices=WHEN_FULL, default=DEFAULT_WHEN_FULL,
                    help="a switch with too few free slots: refuse, run on fewer (at least --min-slots), or wait "
                         "in line (default: refuse)")
    ap.add_argument("--min-slots", type=between(1), default=None, help="with --when-full fewer: the fewest slots")
    ap.add_argument("--host-fallback", action="store_true",
                    help="where the switch has no slots for the job, sum the gradients on the hosts (DDP's own "
                         "allreduce) instead of failing")
    ap.add_argument("--steps", type=between(1), default=10, help="training steps (default: 10)")
    ap.add_argument("--rows", type=between(2), default=100_000, help="embedding rows (default: 100000)")
    ap.add_argument("--dim", type=between(1), default=16, help="embedding width (default: 16)")
    ap.add_argument("--batch", type=between(1), default=256, help="examples per rank and step (default: 256)")
    ap.add_argument("--lr", type=positive, default=0.05, help="SGD learning rate (default: 0.05)")
    ap.add_argument("--deadline", type=positive, default=30.0,
                    help="seconds a bucket may go without progress before the step fails (default: 30)")
    ap.add_argument("--out", type=Path, help="rank 0 writes every step's line here (JSON)")
    args = ap.parse_args(argv)
    if args.backend == "hina" and args.switch is None:
        ap.error("--backend hina needs --switch HOST:PORT")
    if "RANK" not in os.environ:
        ap.error("run it under torchrun (it reads RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous from there)")

    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # torchrun's rendezvous; DDP's own needs (broadcast, bucket order)
    rank, world, local = dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    torch.manual_seed(0)  # the same initialisation on every rank (DDP broadcasts rank 0's anyway)
    model = DistributedDataParallel(Recommender(args.rows, args.dim))
    hook = None
    if args.backend == "hina":
        bind = None if args.port_base is None else ("0.0.0.0", args.port_base + local)
        job = hina.JobSpec(job_id=args.job_id, slots=args.slots, least=args.min_slots, when_full=args.when_full)
        try:  # with --host-fallback, a switch without slots for the job leaves DDP's own allreduce in place
            hook = register(model, args.switch, control=args.control, fallback=args.host_fallback, bind=bind,
                            job=job, deadline=args.deadline, mode=args.mode,
                            log=lambda line: print(f"examples/ddp_torchrun.py: {line}", file=sys.stderr))
        except (OSError, hina.ControlError) as exc:
            print(f"examples/ddp_torchrun.py: rank {rank}: {exc}", file=sys.stderr)
            return 2
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    lines = []
    for step in range(args.steps):
        users, items, clicks = batch(step, rank, args.rows, args.batch)
        start = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(users, items), clicks)
        loss.backward()
        opt.step()
        seconds = time.perf_counter() - start
        digests: list[str] = [""] * world
        dist.all_gather_object(digests, digest(model.module))
        identical = len(set(digests)) == 1
        line = {"step": step, "rank": rank, "backend": args.backend, "loss": loss.item(), "seconds": seconds,
                "identical": identical, "world": world, "through": "switch" if hook is not None else "hosts"}
        if hook is not None:
            report = hook.pop_step()  # this step's buckets: codec bytes, encodings, seconds
            if report:
                line.update(bytes=report["bytes"], encodings=report["encodings"])
        if rank == 0:
            print(json.dumps(line), flush=True)
            lines.append(line)
        if not identical:
            print(f"examples/ddp_torchrun.py: step {step}: ranks hold different parameters: {digests}",
                  file=sys.stderr)
            return 1
    if rank == 0 and args.out:
        args.out.write_text(json.dumps(lines, indent=1))
    if hook is not None:
        hook.close()
    # every rank past its last collective before any closes its gloo connections, and DDP's reducer (which holds
    # the process group and its last work) freed while the interpreter is whole: either left to the exit, a rank's
    # gloo threads could abort its process (SIGABRT after the last step)
    dist.barrier()
    del model, opt
    gc.collect()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
