"""The switch emulator: the P4 program's data plane in Python, its ingress rules compiled with numba.

`Pipeline` is the sans-I/O data plane (its registers in `registers`, the P4
controls it runs in `controls`, a whole batch at once in `batch`); `UdpSwitch`
serves it on UDP (loopback or any address); `RawSwitch` on raw Ethernet
interfaces (Mininet); `InProcessSwitch` wires it to in-process workers.
`python -m hina.emulator` starts one; `--pipes P` (`UdpSwitch(pipes=P)`) runs
its data plane as P processes steered by slot (`pipes`).
"""

from .frames import FrameSwitch
from .impair import Impairment, ImpairmentConfig
from .inproc import InProcessPort, InProcessSwitch
from .pipeline import Emit, Pipeline
from .udp import UdpSwitch

__all__ = ["Emit", "FrameSwitch", "Impairment", "ImpairmentConfig", "InProcessPort", "InProcessSwitch", "Pipeline",
           "UdpSwitch"]
