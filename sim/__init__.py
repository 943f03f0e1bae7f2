"""The simulator: hina's real sender and switch rules on a virtual clock, no sockets, no sleeps.

- `clock`: the one event clock (`Clock`) everything below runs on.
- `links`: the one link model (`Link`: a rate, a propagation delay, optionally
  a drop-tail queue) and the FIFO `Server` it is built on.
- `netsim`: the virtual network: workers' `PhaseTransfer`s and `Pipeline`s
  with loss, duplication, jitter, a slow switch, bottlenecks and a Reno flow
  (the protocol tests, the loss and contest models run on it).
- `scale`: the scale model's engine: one representative path of identical
  workers up a `hina.control.Fabric` (`Setup`: the fabric and the run's
  settings), projecting to 1,024 workers, and the ring it is compared with
  (benchmarks/scale_model.py is its command line).
- `ns3sim`: the same rules on ns-3, every worker and every switch of the
  fabric (needs the `ns3` extra; imported on its own).
"""

from hina.sim.clock import Clock
from hina.sim.links import Link, Server
from hina.sim.netsim import RenoFlow, VirtualNetwork, beside_reno, run_transfers
from hina.sim.scale import (
    PathModel,
    Setup,
    UnionStats,
    aggregation_seconds,
    codec_rounds,
    preset_rounds,
    ring_for,
    union_stats,
)

__all__ = ["Clock", "Link", "PathModel", "RenoFlow", "Server", "Setup", "UnionStats", "VirtualNetwork",
           "aggregation_seconds", "beside_reno", "codec_rounds", "preset_rounds", "ring_for", "run_transfers",
           "union_stats"]
