"""What the control plane tells the switch about a job.

A job owns a range of slots, has N workers and one multicast group: its
members.  A member is a worker_id and the *source* its UPDATEs must come
from, which is also where its RESULTs go: a UDP address (host, port) in
loopback mode, an ingress port number on raw interfaces (Mininet, BMv2).
Anything that does not match is dropped by the data plane.

In an aggregation tree (docs/design.md, "Aggregation trees"; docs/trees.md) a switch holds
only its share of a job: `mask`, the bits of its children (the worker_ids
its copies must collect; by default all N), and optionally its `parents`,
the switches above it, each a `Member` too: the member id this switch has
in the parent's job and the port or address the parent is behind (where
complete copies go up, and the only source a RESULT is taken from).  With
several parents (spines), slot s goes up to parents[s mod len(parents)].
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from collections.abc import Hashable
from typing import Any, NamedTuple

from hina.wire.headers import HEADER_BYTES, MAX_FRAME_BYTES, MAX_SLOTS, MAX_WORKERS, UDP_PORT, WORD_BYTES

MAX_PARENTS = 8  # spines a job's slots may spread over (the emulator's registers hold their addresses)


class PortAddress(NamedTuple):
    """A worker behind a switch port, as the raw-frame data plane names a source: the port, and the IPv4
    address and UDP port its UPDATEs come from (where its RESULTs go back)."""

    port: int
    ip: str
    udp_port: int


@dataclasses.dataclass(frozen=True)
class Member:
    """A worker (or, in a tree, a switch below) and where it is.

    On UDP (the emulator as a server) `source` is the worker's (host, port): its UPDATEs must come from
    there and its RESULTs go there.  On raw frames (Mininet, BMv2, a P4 switch) `source` is the switch
    port the worker is behind, and `address` is the worker's (IPv4, UDP port) behind it, `mac` its
    Ethernet address: several workers (ranks) can share a host and a port, each with its own UDP port;
    an UPDATE must come from the port, address and UDP port of its worker_id, and each member's RESULT
    is a replica of its own, addressed to it.  Unset, `address` and `mac` are the host's on that port
    (`Topology`) and UDP port 0x4E41.
    """

    worker_id: int
    source: Hashable  # (host, port) for UDP, an int port for raw interfaces
    address: tuple[str, int] | None = None  # raw interfaces: the worker's (IPv4, UDP port) behind the port
    mac: str | None = None  # raw interfaces: the worker's MAC (default: the host's on the port)

    def __post_init__(self) -> None:
        if self.address is not None:
            if isinstance(self.source, tuple):
                raise ValueError(f"worker {self.worker_id}: a UDP member's address is its source; "
                                 "`address` is for members behind a switch port")
            host, port = self.address
            ipaddress.IPv4Address(host)  # a ValueError naming it otherwise
            if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 1 << 16:
                raise ValueError(f"worker {self.worker_id}: UDP port must be 1..65535, got {port!r}")
            object.__setattr__(self, "address", (str(host), int(port)))

    def to_config(self) -> dict[str, Any]:
        if isinstance(self.source, PortAddress):  # as a raw-frame switch holds it: resolved
            cfg = {"worker_id": self.worker_id, "port": self.source.port, "ip": self.source.ip,
                   "udp_port": self.source.udp_port}
            return cfg | ({"mac": self.mac} if self.mac else {})
        if isinstance(self.source, tuple):
            return {"worker_id": self.worker_id, "address": list(self.source)}
        cfg: dict[str, Any] = {"worker_id": self.worker_id, "port": self.source}
        if self.address is not None:
            cfg["ip"], cfg["udp_port"] = self.address
        if self.mac is not None:
            cfg["mac"] = self.mac
        return cfg

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Member:
        if not isinstance(cfg, dict) or "worker_id" not in cfg:
            raise ValueError(f"a member is {{\"worker_id\": N, \"address\": [host, port]}} or "
                             f"{{\"worker_id\": N, \"port\": P, optional \"ip\", \"udp_port\", \"mac\"}}, "
                             f"got {json.dumps(cfg)}")
        unknown = set(cfg) - {"worker_id", "address", "port", "ip", "udp_port", "mac"}
        if unknown:
            raise ValueError(f"member {json.dumps(cfg)}: unknown fields {', '.join(sorted(unknown))}")
        if "address" in cfg:
            host, port = cfg["address"]
            return cls(int(cfg["worker_id"]), (str(host), int(port)))
        if "port" in cfg:
            address = None
            if "ip" in cfg or "udp_port" in cfg:
                address = (cfg.get("ip"), cfg.get("udp_port", UDP_PORT))
                if address[0] is None:
                    raise ValueError(f"member {json.dumps(cfg)}: a udp_port needs the worker's ip too")
            return cls(int(cfg["worker_id"]), int(cfg["port"]), address, cfg.get("mac"))
        raise ValueError(f"member {cfg!r} needs an 'address' [host, port] or a 'port'")


@dataclasses.dataclass(frozen=True)
class JobConfig:
    """job_id; workers N; words K per packet; slots [slot_base, slot_base + slots); members; in a tree
    the children's `mask` (default: all N workers) and the `parents` (none: this switch is the root)."""

    job_id: int
    workers: int
    words: int
    slot_base: int
    slots: int
    members: tuple[Member, ...] = ()
    mask: int | None = None
    parents: tuple[Member, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(self.members))
        object.__setattr__(self, "parents", tuple(self.parents))
        if not 0 <= self.job_id < 1 << 16:
            raise ValueError(f"job_id must fit 16 bits, got {self.job_id}")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"job {self.job_id}: workers must be 1..{MAX_WORKERS}, got {self.workers}")
        if not 1 <= self.words or HEADER_BYTES + WORD_BYTES * self.words > MAX_FRAME_BYTES:
            raise ValueError(f"job {self.job_id}: words per packet must be 1..{(MAX_FRAME_BYTES - HEADER_BYTES) // 4}, "
                             f"got {self.words}")
        if self.slots < 1 or self.slot_base < 0 or self.slot_base + self.slots > MAX_SLOTS:
            raise ValueError(f"job {self.job_id}: slots [{self.slot_base}, {self.slot_base + self.slots}) "
                             f"must lie within [0, {MAX_SLOTS})")
        ids = [m.worker_id for m in self.members]
        if len(set(ids)) != len(ids):
            raise ValueError(f"job {self.job_id}: a worker_id appears twice among the members")
        if any(not 0 <= i < self.workers for i in ids):
            raise ValueError(f"job {self.job_id}: member worker_ids must be 0..{self.workers - 1}, got {sorted(ids)}")
        every = (1 << self.workers) - 1
        if self.mask is not None:
            if isinstance(self.mask, bool) or not isinstance(self.mask, int) or not 0 < self.mask <= every \
                    or self.mask & ~every:
                raise ValueError(f"job {self.job_id}: mask must be a non-empty set of the bits of workers "
                                 f"0..{self.workers - 1}, got {self.mask!r}")
            outside = [i for i in ids if not self.mask >> i & 1]
            if outside:
                raise ValueError(f"job {self.job_id}: worker_ids {outside} are not children of this switch "
                                 f"(mask {self.mask:#x})")
        if len(self.parents) > MAX_PARENTS:
            raise ValueError(f"job {self.job_id}: at most {MAX_PARENTS} parents, got {len(self.parents)}")
        if len({m.worker_id for m in self.parents}) > 1:
            raise ValueError(f"job {self.job_id}: this switch has one member id in its parents' job, got "
                             f"{sorted({m.worker_id for m in self.parents})}")
        if self.parents and not 0 <= self.parents[0].worker_id < MAX_WORKERS:
            raise ValueError(f"job {self.job_id}: the member id in the parents' job must be "
                             f"0..{MAX_WORKERS - 1}, got {self.parents[0].worker_id}")

    def parent_of(self, slot: int) -> Member | None:
        """Where slot `slot` (absolute) goes up to; None on the root."""
        return self.parents[slot % len(self.parents)] if self.parents else None

    @property
    def full_mask(self) -> int:
        """The bits a copy must collect to be complete: the children's (all N workers by default)."""
        return (1 << self.workers) - 1 if self.mask is None else self.mask

    @property
    def children(self) -> int:
        """How many arrivals complete a copy."""
        return bin(self.full_mask).count("1")

    @property
    def frame_bytes(self) -> int:
        return HEADER_BYTES + WORD_BYTES * self.words

    def overlaps(self, other: JobConfig) -> bool:
        return self.slot_base < other.slot_base + other.slots and other.slot_base < self.slot_base + self.slots

    def to_config(self) -> dict[str, Any]:
        cfg = {"job_id": self.job_id, "workers": self.workers, "words": self.words,
               "slot_base": self.slot_base, "slots": self.slots,
               "members": [m.to_config() for m in self.members]}
        if self.mask is not None:
            cfg["mask"] = self.mask
        if self.parents:
            cfg["parents"] = [m.to_config() for m in self.parents]
        return cfg

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> JobConfig:
        """From {"job_id", "workers", "words", "slots", optional "slot_base" (0), "members", "mask" and
        "parents" ([{"worker_id": the member id in the parents' job, "port" or "address": where it is}])}."""
        if not isinstance(cfg, dict):
            raise ValueError(f"a job is a JSON object with job_id, workers, words, slots, got {json.dumps(cfg)}")
        known = {"job_id", "workers", "words", "slot_base", "slots", "members", "mask", "parents"}
        unknown = set(cfg) - known
        if unknown:
            raise ValueError(f"unknown job fields: {', '.join(sorted(unknown))} (a job has {', '.join(sorted(known))})")
        who = f"job {cfg['job_id']}" if "job_id" in cfg else "a job"
        missing = [k for k in ("job_id", "workers", "words", "slots") if k not in cfg]
        if missing:
            raise ValueError(f"{who} lacks {', '.join(repr(k) for k in missing)}")
        fields = {}
        for k in ("job_id", "workers", "words", "slot_base", "slots"):
            v = cfg.get(k, 0)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"{who}: {k} must be an integer, got {json.dumps(v)}")
            fields[k] = v
        members = cfg.get("members", [])
        if not isinstance(members, list):
            raise ValueError(f"{who}: members must be a list, got {json.dumps(members)}")
        mask = cfg.get("mask")
        if mask is not None and (isinstance(mask, bool) or not isinstance(mask, int)):
            raise ValueError(f"{who}: mask must be an integer, got {json.dumps(mask)}")
        parents = cfg.get("parents", [])
        if not isinstance(parents, list):
            raise ValueError(f"{who}: parents must be a list, got {json.dumps(parents)}")
        return cls(**fields, members=tuple(Member.from_config(m) for m in members), mask=mask,
                   parents=tuple(Member.from_config(m) for m in parents))
