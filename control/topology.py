"""One description of a switch's world, for every target: hosts on ports, jobs, groups.

The same `Topology` configures the emulator's raw-frame data plane (through
its control port) and BMv2 (through P4Runtime): the controller derives all
table entries and multicast groups from it (`entries()`), so a user changes
targets with one flag and nothing else.

    {"switch": {"mac": "02:00:00:00:00:fe", "ip": "10.0.0.254"},
     "hosts": [{"port": 1, "mac": "02:00:00:00:00:01", "ip": "10.0.0.1"}, ...],
     "jobs": [{"job_id": 1, "workers": 2, "words": 32, "slot_base": 0, "slots": 8,
               "members": [{"worker_id": 0, "port": 1}, {"worker_id": 1, "port": 2, "udp_port": 40001,
                            "ip": "10.0.0.2"}]}]}

A member behind a port may name its IPv4 address and UDP port (and MAC): several workers then share a
host and a port, each receiving its own replica of every RESULT (`replicas`); unnamed, they are the
host's on that port and UDP port 0x4E41.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hina.wire.frames import ip_bytes, mac_bytes
from hina.wire.headers import UDP_PORT

from .config import JobConfig, Member, PortAddress

FLOOD_GROUP = 1  # multicast group of all host ports, for broadcasts (ARP)
BROADCAST_MAC = "ff:ff:ff:ff:ff:ff"


def job_group(job_id: int) -> int:
    """The multicast group of a job's RESULTs: job_id + 2 (1 is the flood group, 0 means none)."""
    return job_id + 2


@dataclasses.dataclass(frozen=True)
class Host:
    """The host behind a switch port: where RESULTs for that port are addressed.  In a tree a
    neighbouring switch is a host too (`switch`: its address is where partials up, or RESULTs down,
    go), but broadcasts are not flooded to it: between switches they would loop.  Behind a plain
    switch (several workers on one port) the host is the broadcast MAC and IP: one RESULT reaches
    them all, as the plain switch floods it."""

    port: int
    mac: str
    ip: str
    switch: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.port < 511:
            raise ValueError(f"port must be 0..510 (511 is BMv2's drop port), got {self.port}")
        mac_bytes(self.mac)
        ip_bytes(self.ip)


@dataclasses.dataclass(frozen=True)
class Topology:
    """One switch's view of the network: its own MAC and IPv4 address, the hosts behind its ports (`Host`) and
    the jobs it serves (`JobConfig`).  The raw emulator and the BMv2 controller take it (`configure`);
    `Topology.from_config` reads the JSON form (`--topology FILE`), `to_config` writes it."""

    switch_mac: str
    switch_ip: str
    hosts: tuple[Host, ...]
    jobs: tuple[JobConfig, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "hosts", tuple(self.hosts))
        object.__setattr__(self, "jobs", tuple(self.jobs))
        mac_bytes(self.switch_mac)
        ip_bytes(self.switch_ip)
        ports = [h.port for h in self.hosts]
        if len(set(ports)) != len(ports):
            raise ValueError(f"a port appears twice among the hosts: {sorted(ports)}")
        macs = [h.mac.lower() for h in self.hosts if h.mac.lower() != BROADCAST_MAC]
        if len(set(macs)) != len(macs):
            raise ValueError("two hosts share a MAC address")
        ids = [j.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"a job_id appears twice: {sorted(ids)}")
        for i, a in enumerate(self.jobs):
            for m in a.members:
                if m.source not in ports:
                    raise ValueError(f"job {a.job_id}: worker {m.worker_id} is on port {m.source!r}, "
                                     f"which no host is attached to")
            for m in a.parents:
                if m.source not in ports:
                    raise ValueError(f"job {a.job_id}: a parent is on port {m.source!r}, which no neighbour "
                                     f"(host or switch: where frames up are addressed) is attached to")
            for b in self.jobs[i + 1:]:
                if a.overlaps(b):
                    raise ValueError(f"jobs {a.job_id} and {b.job_id} have overlapping slot ranges")

    def host_on(self, port: int) -> Host | None:
        return next((h for h in self.hosts if h.port == port), None)

    # -- what every target installs -------------------------------------------
    def mac_table(self) -> dict[str, tuple[str, int]]:
        """destination MAC -> ("forward", port) or ("flood", group)."""
        table = {h.mac.lower(): ("forward", h.port) for h in self.hosts}
        table[BROADCAST_MAC] = ("flood", FLOOD_GROUP)
        return table

    def groups(self) -> dict[int, tuple[int, ...]]:
        """multicast group -> ports: the flood group, then one group per job."""
        groups = {FLOOD_GROUP: tuple(sorted(h.port for h in self.hosts if not h.switch))}
        for job in self.jobs:
            # a port once, however many of the job's workers hang behind it
            groups[job_group(job.job_id)] = tuple(dict.fromkeys(
                m.source for m in sorted(job.members, key=lambda m: m.worker_id)))
        return groups

    def resolve(self, member: Member) -> Member:
        """A member as the raw-frame data plane holds it: one that names its address behind a port gets a
        `PortAddress` source (port, IPv4, UDP port) and its MAC (the host's on the port where it names
        none); one known by its port alone stays so (any sender on that port may speak for it, and its
        RESULTs go to the port's host at UDP port 0x4E41, as before workers had ports of their own)."""
        if isinstance(member.source, bool) or not isinstance(member.source, int) or member.address is None:
            return member
        host = self.host_on(member.source)
        mac = (member.mac or host.mac).lower()
        return Member(member.worker_id, PortAddress(member.source, *member.address), mac=mac)

    def destination(self, member: Member) -> tuple[int, str, str, int]:
        """Where member's RESULT replica goes: (port, MAC, IPv4, UDP port)."""
        m = self.resolve(member)
        if isinstance(m.source, PortAddress):
            return m.source.port, m.mac, m.source.ip, m.source.udp_port
        host = self.host_on(m.source)
        return m.source, host.mac.lower(), host.ip, UDP_PORT

    def replicas(self) -> tuple[dict[int, tuple[tuple[int, int], ...]], dict[int, tuple[str, str, int]]]:
        """Each job's RESULT group as (port, replica id) pairs, one replica per distinct destination (ranks
        sharing a port get one each; members known by their port alone share the port's), and each replica
        id's destination: (MAC, IPv4, UDP port).  Ids are unique on the switch, from 1."""
        groups: dict[int, tuple[tuple[int, int], ...]] = {}
        rewrites: dict[int, tuple[str, str, int]] = {}
        rid = 0
        for job in self.jobs:
            seen: dict[tuple, int] = {}
            for m in sorted(job.members, key=lambda m: m.worker_id):
                where = self.destination(m)
                if where not in seen:
                    rid += 1
                    seen[where] = rid
                    rewrites[rid] = where[1:]
            groups[job_group(job.job_id)] = tuple((where[0], r) for where, r in seen.items())
        return groups, rewrites

    # -- serialization ---------------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        return {"switch": {"mac": self.switch_mac, "ip": self.switch_ip},
                "hosts": [{k: v for k, v in dataclasses.asdict(h).items() if k != "switch" or v}
                          for h in self.hosts],
                "jobs": [j.to_config() for j in self.jobs]}

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Topology:
        unknown = set(cfg) - {"switch", "hosts", "jobs"}
        if unknown:
            raise ValueError(f"unknown topology fields: {', '.join(sorted(unknown))}")
        sw = cfg["switch"]
        return cls(sw["mac"], sw["ip"], tuple(Host(int(h["port"]), h["mac"], h["ip"], bool(h.get("switch", False)))
                                              for h in cfg["hosts"]),
                   tuple(JobConfig.from_config(j) for j in cfg.get("jobs", ())))
