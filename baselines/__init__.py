"""Host-based allreduces that need no programmable switch, as baselines for hina: ring, SparCML, Ok-Topk, Zen.

One module per scheme (`ring`, `sparcml`, `oktopk`, `zen`), each an
`allreduce(comm, grad, ...)` that takes this rank's dense float32 gradient
and returns the dense sum on every rank, over torch.distributed with gloo
(TCP).  `comm.Comm` counts the payload bytes each rank sends.  `worker` is
the process one rank runs (on loopback or a Mininet host); `launch` starts N
of them on loopback and checks every result against numpy.  `lossy_hooks`
holds the baselines a training run uses: DDP communication hooks (gloo's
allreduce timed, Ok-Topk's top-k and int8, with error feedback).

`registry` names every baseline once: its name, its labels, whether it is
lossy and how it runs; every benchmark and table reads them from there.
"""
