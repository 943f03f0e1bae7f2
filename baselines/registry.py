"""Every baseline hina is measured against, one entry each: what it is called, how tables label it, how it runs.

A baseline runs in one of two places, or both:

- `allreduce(comm, grad, params)`: a host-based allreduce of one dense
  float32 gradient over `comm.Comm` (gloo), returning the sum on every rank.
  benchmarks/compare.py runs these beside hina's modes, one process per rank
  (`worker`, started by `launch` or by mininet/plain_star.py).
- `hook(rank, world, params)`: the state of a PyTorch DDP communication hook
  (`lossy_hooks`: `submit(bucket)`, `pop_step()`, `close()`), registered
  with `lossy_hooks.lossy_allreduce_hook`.  benchmarks/train_ddp.py and
  benchmarks/time_to_accuracy.py train through these beside hina's hook.

`params` is the run's settings as a mapping (a baseline worker's spec, a
training run's config): each baseline reads what it needs (`topk_density`,
`link_gbps`) and leaves the rest.  Every caller reads its names, labels and
lists from here (`compared()`, `trained()`, `get(name)`), so a new baseline
is its module beside the others and one `Baseline(...)` in `_ENTRIES` below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from . import oktopk, ring, sparcml, zen
from .comm import Comm

Params = Mapping[str, Any]


def _says_nothing(notes: dict, params: Params, length: int) -> str:
    return ""


@dataclasses.dataclass(frozen=True)
class Baseline:
    """One baseline.  `name`: on command lines and in result files (a row's "mode", a run's "system");
    `label`: its row in the summary tables and plots; `detail`: the label with how it works, for the
    tables that list every run (compare.py's); `lossy`: its sum is not the exact one (so its error is
    reported, never checked against the float32 rounding bound); `describe(notes, params, length)`: what
    it decided in one round, in a few words, from the notes its allreduce left in `comm.notes`;
    `prepare(length, world)`: set-up every rank runs once before the first round; `offered`: False for
    a variant only tests ask for by name, which no command line lists; `color`: its line in a plot."""

    name: str
    label: str
    lossy: bool
    detail: str = ""
    allreduce: Callable[[Comm, np.ndarray, Params], np.ndarray] | None = None
    hook: Callable[[int, int, Params], Any] | None = None
    describe: Callable[[dict, Params, int], str] = _says_nothing
    prepare: Callable[[int, int], None] | None = None
    offered: bool = True
    color: str | None = None

    def __post_init__(self) -> None:
        if self.allreduce is None and self.hook is None:
            raise ValueError(f"baseline {self.name!r}: neither an allreduce nor a DDP hook")
        if not self.detail:
            object.__setattr__(self, "detail", self.label)


# -- how each one runs ---------------------------------------------------------------------------------------

def topk_k(params: Params, length: int) -> int:
    """Ok-Topk's k for a gradient of `length` elements: `topk_density` of them, at least one."""
    return max(1, round(params.get("topk_density", 0.01) * length))


def _ring(comm: Comm, grad: np.ndarray, params: Params) -> np.ndarray:
    return ring.allreduce(comm, grad)


def _sparcml(comm: Comm, grad: np.ndarray, params: Params) -> np.ndarray:
    return sparcml.allreduce(comm, grad, link_gbps=params.get("link_gbps", 10.0))


def _sparcml_forced(algorithm: str) -> Callable[[Comm, np.ndarray, Params], np.ndarray]:
    def run(comm: Comm, grad: np.ndarray, params: Params) -> np.ndarray:
        return sparcml.allreduce(comm, grad, algorithm=algorithm)
    return run


def _sparcml_decided(notes: dict, params: Params, length: int) -> str:
    if notes.get("algorithm") == "split_allgather":
        return f"split-allgather, {notes.get('dense_partitions', 0)} dense partitions"
    return "recursive doubling" + (", ended dense" if notes.get("final_dense") else "")


def _oktopk(comm: Comm, grad: np.ndarray, params: Params) -> np.ndarray:
    return oktopk.allreduce(comm, grad)


def _oktopk_topk(comm: Comm, grad: np.ndarray, params: Params) -> np.ndarray:
    return oktopk.allreduce(comm, grad, k=topk_k(params, grad.size))


def _zen(comm: Comm, grad: np.ndarray, params: Params) -> np.ndarray:
    return zen.allreduce(comm, grad)


def _gloo_hook(rank: int, world: int, params: Params):
    from . import lossy_hooks  # imports torch: only where a hook is made

    return lossy_hooks.GlooAllreduce(rank, world)


def _topk_hook(rank: int, world: int, params: Params):
    from . import lossy_hooks

    return lossy_hooks.TopkAllreduce(rank, world, density=params.get("topk_density", 0.01))


def _int8_hook(rank: int, world: int, params: Params):
    from . import lossy_hooks

    return lossy_hooks.Int8Allreduce(rank, world)


# -- the baselines, in the order tables list them ------------------------------------------------------------

_ENTRIES = (
    Baseline("ring", "ring allreduce (gloo)", lossy=False, allreduce=_ring),
    Baseline("sparcml", "SparCML", lossy=False, detail="SparCML (SSAR/DSAR)", allreduce=_sparcml,
             describe=_sparcml_decided),
    Baseline("oktopk", "Ok-Topk", lossy=False, detail="Ok-Topk, lossless", allreduce=_oktopk),
    Baseline("oktopk_topk", "Ok-Topk top-k (lossy)", lossy=True, allreduce=_oktopk_topk,
             describe=lambda notes, params, length: f"k = {topk_k(params, length):,}"),
    Baseline("zen", "Zen", lossy=False, detail="Zen (hash partitions)", allreduce=_zen,
             describe=lambda notes, params, length: f"{notes.get('pull_bitmaps', 0)} pulls by hash bitmap",
             prepare=zen.prepare),  # Zen's hash tables exist before the first step
    # SparCML with one scheme forced, for tests: the baseline itself picks by its cost model
    Baseline("sparcml_rd", "SparCML, recursive doubling forced", lossy=False,
             allreduce=_sparcml_forced("recursive_double"), describe=_sparcml_decided, offered=False),
    Baseline("sparcml_sa", "SparCML, split-allgather forced", lossy=False,
             allreduce=_sparcml_forced("split_allgather"), describe=_sparcml_decided, offered=False),
    # DDP communication hooks: training beside hina's hook
    Baseline("gloo", "gloo allreduce", lossy=False, detail="DDP's own float32 allreduce over gloo", hook=_gloo_hook,
             color="C0"),
    Baseline("topk", "Ok-Topk top-k + EF", lossy=True,
             detail="Ok-Topk's top-k allreduce over gloo, with error feedback", hook=_topk_hook, color="C3"),
    Baseline("int8", "int8 + EF", lossy=True,
             detail="8-bit quantization with a shared per-bucket scale over gloo, with error feedback",
             hook=_int8_hook, color="C4"),
)

BASELINES: dict[str, Baseline] = {b.name: b for b in _ENTRIES}


def get(name: str) -> Baseline:
    """The baseline called `name`, or a ValueError naming every one there is."""
    try:
        return BASELINES[name]
    except KeyError:
        raise ValueError(f"no baseline named {name!r} (baselines: {', '.join(BASELINES)})") from None


def compared() -> list[Baseline]:
    """The host allreduces compare.py offers, in table order."""
    return [b for b in BASELINES.values() if b.allreduce is not None and b.offered]


def trained() -> list[Baseline]:
    """The DDP hooks train_ddp.py and time_to_accuracy.py offer, in table order."""
    return [b for b in BASELINES.values() if b.hook is not None and b.offered]


def lossy(name: str) -> bool:
    """Whether `name` is a lossy baseline (False for anything else: hina's modes are exact)."""
    b = BASELINES.get(name)
    return b is not None and b.lossy
