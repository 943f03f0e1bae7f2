"""hina's switch emulator: the P4 program's data plane in Python, its ingress rules compiled with numba.

`Pipeline` is the sans-I/O data plane (DESIGN.md section 2; the rules in `dataplane.py`); `UdpSwitch`
serves it on loopback; `InProcessSwitch` wires it to in-process workers;
`ControlClient` talks to a running emulator.  `python -m switch_emulator`
starts one; `--pipes P` (`UdpSwitch(pipes=P)`) runs its data plane as P
processes steered by slot (`pipes.py`).  The scapy layer for the wire format is `scapy_hina.Hina`.
"""

from .config import JobConfig, Member
from .control import ControlClient, ControlError
from .headers import UDP_PORT, Flags, HinaHeader, MsgType, max_words
from .impair import Impairment, ImpairmentConfig
from .pipeline import Drop, Emit, Pipeline
from .udp import UdpSwitch

__all__ = [
    "UDP_PORT",
    "ControlClient",
    "ControlError",
    "Drop",
    "Emit",
    "Flags",
    "HinaHeader",
    "Impairment",
    "ImpairmentConfig",
    "JobConfig",
    "Member",
    "MsgType",
    "Pipeline",
    "UdpSwitch",
    "max_words",
]
