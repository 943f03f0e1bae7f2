"""Host-based allreduces that need no programmable switch, as baselines for hina: ring, SparCML, Ok-Topk, Zen.

One module per scheme (`ring`, `sparcml`, `oktopk`, `zen`), each an
`allreduce(comm, grad, ...)` that takes this rank's dense float32 gradient
and returns the dense sum on every rank, over torch.distributed with gloo
(TCP).  `comm.Comm` counts the payload bytes each rank sends.  `worker` is
the process one rank runs (on loopback or a Mininet host); `launch` starts N
of them on loopback and checks every result against numpy.

`BASELINES` names what compare.py can run; `oktopk_topk` is Ok-Topk with
its top-k selection (lossy, at k = `topk_density` x length elements).
"""

from __future__ import annotations

BASELINES = ("ring", "sparcml", "oktopk", "oktopk_topk", "zen")
LOSSY = frozenset({"oktopk_topk"})
# SparCML with one scheme forced, for tests: the baseline itself picks by its cost model
VARIANTS = {"sparcml_rd": "recursive_double", "sparcml_sa": "split_allgather"}
LABEL = {"ring": "ring allreduce (gloo)", "sparcml": "SparCML (SSAR/DSAR)", "oktopk": "Ok-Topk, lossless",
         "oktopk_topk": "Ok-Topk top-k (lossy)", "zen": "Zen (hash partitions)"}
