"""The control plane: what a switch is told about jobs, and the clients that tell it.

`JobConfig` and `Member` describe a job on one switch; `Placement` what a
job asks of the slots a switch hands out (`ledger`); `Topology` a switch's
hosts, ports and jobs; `Fabric` several switches and the tree a job is
summed over.  `ControlClient` speaks to a running emulator's control port;
`controller` configures the emulator or BMv2 (through P4Runtime, `p4rt`)
from one `Topology`.  The control plane configures the switches and is part
of neither.
"""

from .client import ControlClient, ControlError, SwitchFull
from .config import JobConfig, Member
from .fabric import Fabric, TreeJob
from .ledger import Placement
from .topology import Host, Topology

__all__ = ["ControlClient", "ControlError", "Fabric", "Host", "JobConfig", "Member", "Placement", "SwitchFull",
           "Topology", "TreeJob"]
