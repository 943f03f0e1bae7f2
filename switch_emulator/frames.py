"""The emulator on raw Ethernet frames, as `p4/hina.p4` sees them: no I/O.

`FrameSwitch.process(ingress_port, frame)` returns the (egress_port, frame)
pairs to transmit.  It parses Ethernet / IPv4 (no options) / UDP as the P4
parser does; UDP to port 0x4E41 is hina and goes through the `Pipeline`
(with the UDP length as the claimed hina length, and as the source the
ingress port with the frame's IPv4 and UDP source: a `PortAddress`), every
RESULT replica is rewritten for where it goes (`egress_rewrite`: switch
address as source, UDP source port 0x4E41, UDP checksum 0, IPv4 checksum
recomputed; as destination the member's MAC, IPv4 address and UDP port for a
member named by its address, the sender's for a RESULT sent back to it, else
the port's host at UDP port 0x4E41),
and everything else is forwarded on its destination MAC (`mac_forward`),
broadcasts flooded to every other port.  Bytes past the parsed headers ride
along unchanged, as the P4 deparser leaves them.  `frame` may be a view of
a receive buffer (the raw backend's): nothing here keeps it past the call.
"""

from __future__ import annotations

import dataclasses
import socket
import struct

import numpy as np

from hina.control.config import PortAddress
from hina.control.topology import Topology
from hina.wire.frames import ETH, IP_END, UDP_END, ip_bytes, ipv4_checksum, mac_bytes
from hina.wire.headers import HEADER_BYTES, UDP_PORT, Drop

from .pipeline import Pipeline

_UDP_PORTS = struct.pack("!HH", UDP_PORT, UDP_PORT)
# what the parser looks at, in one unpack: ethertype, IPv4 version+IHL, protocol, UDP dport, UDP length
_PARSE = struct.Struct("!12xHB8xB12xHH")


class FrameSwitch:
    """The switch on raw Ethernet frames, without I/O: `process(ingress_port, frame)` returns the (egress port,
    frame) pairs to transmit (the module's docstring says how each kind of frame is treated).

    topology: the ports' hosts and the jobs to install (`configure` changes it later); pipeline: the data
    plane (default a fresh `Pipeline`).  The raw backend (`hina.emulator.raw`) and the packet vectors drive it.
    """

    def __init__(self, topology: Topology | None = None, pipeline: Pipeline | None = None):
        self.pipeline = pipeline or Pipeline()
        self.forwarded = 0
        self._tx: dict[object, bytearray] = {}  # per egress port and replica, when the pipeline reuses buffers
        self.topology: Topology | None = None
        self._rewrite: dict[int, tuple[bytes, bytes]] = {}
        self.rewrite_table = np.zeros((0, 21), np.uint8)
        self._member_macs: dict[PortAddress, bytes] = {}
        if topology is not None:
            self.configure(topology)

    def configure(self, topology: Topology) -> None:
        """Install a whole topology: MAC table, groups, per-port rewrites, jobs (their slots start empty)."""
        self.topology = topology
        self._mac = {mac_bytes(m): action for m, action in topology.mac_table().items()}
        self._groups = topology.groups()
        self._rewrite = {h.port: (mac_bytes(h.mac) + mac_bytes(topology.switch_mac),
                                  ip_bytes(topology.switch_ip) + ip_bytes(h.ip))
                         for h in topology.hosts}
        # the same per port for compiled egress (`dataplane.raw_batch`): MACs, IPs, whether a host is there
        self.rewrite_table = np.zeros((max((h.port for h in topology.hosts), default=-1) + 1, 21), np.uint8)
        for port, (macs, ips) in self._rewrite.items():
            self.rewrite_table[port] = np.frombuffer(macs + ips + b"\x01", np.uint8)
        for job_id in list(self.pipeline.jobs):
            self.pipeline.remove_job(job_id)
        self._member_macs = {}
        for job in topology.jobs:
            members = tuple(topology.resolve(m) for m in job.members)
            self._member_macs.update((m.source, mac_bytes(m.mac)) for m in members if isinstance(m.source, PortAddress))
            self.pipeline.add_job(dataclasses.replace(job, members=members))

    def counters(self) -> dict:
        return {**self.pipeline.counters(), "forwarded": self.forwarded}

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """The frames to send, as (egress port, frame); with the pipeline's `reuse_buffers` each frame
        is a per-port buffer (or `frame` itself, forwarded), valid until the next call."""
        size = len(frame)
        if size < UDP_END:
            if size < ETH:
                self.pipeline.drop(Drop.TRUNCATED)
                return []
            return self._mac_forward(ingress_port, frame)
        ethertype, version_ihl, protocol, dport, udp_length = _PARSE.unpack_from(frame)
        if ethertype != 0x0800 or version_ihl != 0x45 or protocol != 17 or dport != UDP_PORT:
            return self._mac_forward(ingress_port, frame)
        claimed = udp_length - 8
        reason = None
        if size - UDP_END < HEADER_BYTES or claimed < HEADER_BYTES:
            reason = Drop.TRUNCATED
        elif ipv4_checksum(frame, ETH) != int.from_bytes(frame[ETH + 10 : ETH + 12], "big"):
            reason = Drop.BAD_CHECKSUM
        if reason is not None:  # the parser's and checksum unit's drops, before the pipeline proper
            self.pipeline.refuse(reason)
            return []
        source = PortAddress(ingress_port, socket.inet_ntoa(bytes(frame[ETH + 12 : ETH + 16])),
                             int.from_bytes(frame[IP_END : IP_END + 2], "big"))
        emit = self.pipeline.update(memoryview(frame)[UDP_END:], source, length=claimed)
        if emit is None:
            return []
        hina = emit.frame
        outs = []
        for dest in emit.dests:
            if isinstance(dest, PortAddress):  # a member at its own address, or the sender the RESULT goes back to
                mac = bytes(frame[6:12]) if dest == source else self._member_macs[dest]
                to = mac + ip_bytes(dest.ip) + dest.udp_port.to_bytes(2, "big")
                outs.append((dest.port, self._egress_rewrite(dest.port, frame, hina, to, key=dest)))
            else:  # a port: its host, or the neighbour switch there
                outs.append((dest, self._egress_rewrite(dest, frame, hina)))
        return outs

    def _egress_rewrite(self, port: int, frame: bytes, hina: bytes, to: bytes | None = None,
                        key: object = None) -> bytearray:
        """The frame's headers (rewritten for `port`, and with `to` for that MAC, IPv4 address and UDP
        port), the RESULT, then the bytes that followed the UPDATE past its hina frame (they ride along),
        in one buffer per egress port and destination (`key`: several ranks behind one port)."""
        end = UDP_END + len(hina)
        size = len(frame)
        key = port if key is None else key
        out = self._tx.get(key) if self.pipeline.reuse_buffers else None
        if out is None or len(out) != size:
            out = bytearray(size)
            if self.pipeline.reuse_buffers:
                self._tx[key] = out
        out[:UDP_END] = frame[:UDP_END]
        out[UDP_END:end] = hina
        out[end:] = frame[end:]
        rewrite = self._rewrite.get(port)
        if rewrite is not None:
            macs, ips = rewrite
            out[0:12] = macs
            out[ETH + 12 : IP_END] = ips
            out[IP_END : IP_END + 4] = _UDP_PORTS
            out[UDP_END - 2 : UDP_END] = b"\0\0"
            if to is not None:
                out[0:6] = to[0:6]
                out[ETH + 16 : IP_END] = to[6:10]
                out[IP_END + 2 : IP_END + 4] = to[10:12]
        out[ETH + 10 : ETH + 12] = ipv4_checksum(out, ETH).to_bytes(2, "big")
        return out

    def _mac_forward(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        action = self._mac.get(bytes(frame[0:6])) if self.topology else None
        if action is None:
            self.pipeline.drop(Drop.NO_ROUTE)
            return []
        self.forwarded += 1
        kind, arg = action
        if kind == "forward":
            return [(arg, frame)]
        return [(port, frame) for port in self._groups.get(arg, ()) if port != ingress_port]
