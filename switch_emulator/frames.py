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

import numpy as np

from hina.control.config import PortAddress
from hina.control.topology import Topology
from hina.wire.frames import (
    ETH_DST_AT,
    ETH_SRC_AT,
    HINA_AT,
    IP_BYTES,
    IP_CHECKSUM_AT,
    IP_DST_AT,
    IP_SRC_AT,
    IPV4_AT,
    MAC_BYTES,
    PORT_BYTES,
    U16,
    UDP_CHECKSUM_AT,
    UDP_DPORT_AT,
    UDP_SPORT_AT,
    ip_bytes,
    ipv4_checksum,
    mac_bytes,
    udp_of,
)
from hina.wire.headers import HEADER_BYTES, UDP_HEADER_BYTES, UDP_PORT, Drop

from .controls import HOST
from .pipeline import Pipeline
from .registers import NAME_IP_AT, NAME_MAC_AT, NAME_PORT_AT, raw_name


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
        self._rewrite: dict[int, tuple[bytes, bytes, bytes, bytes]] = {}  # the same per port, as bytes
        self.hosts = np.zeros(0, HOST)  # EgressRewrite's table, a row per port, for compiled egress
        self.hosts_bytes = self.hosts.view(np.uint8)
        self._member_macs: dict[PortAddress, bytes] = {}
        if topology is not None:
            self.configure(topology)

    def configure(self, topology: Topology) -> None:
        """Install a whole topology: MAC table, groups, per-port rewrites, jobs (their slots start empty)."""
        self.topology = topology
        self._mac = {mac_bytes(m): action for m, action in topology.mac_table().items()}
        self._groups = topology.groups()
        self.hosts = np.zeros(max((h.port for h in topology.hosts), default=-1) + 1, HOST)
        for h in topology.hosts:
            self.hosts[h.port] = (np.frombuffer(mac_bytes(h.mac), np.uint8),
                                  np.frombuffer(mac_bytes(topology.switch_mac), np.uint8),
                                  np.frombuffer(ip_bytes(topology.switch_ip), np.uint8),
                                  np.frombuffer(ip_bytes(h.ip), np.uint8), 1)
        self.hosts_bytes = self.hosts.view(np.uint8)  # what `batch.raw_batch` takes
        self._rewrite = {h.port: tuple(self.hosts[h.port][f].tobytes() for f in ("host_mac", "switch_mac",
                                                                                 "switch_ip", "host_ip"))
                         for h in topology.hosts}
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
        udp = udp_of(frame)  # (destination port, length) of IPv4 without options / UDP
        if udp is None or udp[0] != UDP_PORT:
            if size < IPV4_AT:
                self.pipeline.drop(Drop.TRUNCATED)
                return []
            return self._mac_forward(ingress_port, frame)
        claimed = udp[1] - UDP_HEADER_BYTES
        reason = None
        if size - HINA_AT < HEADER_BYTES or claimed < HEADER_BYTES:
            reason = Drop.TRUNCATED
        elif ipv4_checksum(frame, IPV4_AT) != U16.unpack_from(frame, IP_CHECKSUM_AT)[0]:
            reason = Drop.BAD_CHECKSUM
        if reason is not None:  # the parser's and checksum unit's drops, before the pipeline proper
            self.pipeline.refuse(reason)
            return []
        source = PortAddress(ingress_port, socket.inet_ntoa(bytes(frame[IP_SRC_AT : IP_SRC_AT + IP_BYTES])),
                             int.from_bytes(frame[UDP_SPORT_AT : UDP_SPORT_AT + PORT_BYTES], "big"))
        emit = self.pipeline.update(memoryview(frame)[HINA_AT:], source, length=claimed)
        if emit is None:
            return []
        hina = emit.frame
        outs = []
        for dest in emit.dests:
            if isinstance(dest, PortAddress):  # a member at its own address, or the sender the RESULT goes back to
                mac = bytes(frame[ETH_SRC_AT : ETH_SRC_AT + MAC_BYTES]) if dest == source else self._member_macs[dest]
                to = raw_name(mac, ip_bytes(dest.ip), dest.udp_port)
                outs.append((dest.port, self._egress_rewrite(dest.port, frame, hina, to, key=dest)))
            else:  # a port: its host, or the neighbour switch there
                outs.append((dest, self._egress_rewrite(dest, frame, hina)))
        return outs

    def _egress_rewrite(self, port: int, frame: bytes, hina: bytes, to: bytes | None = None,
                        key: object = None) -> bytearray:
        """The frame's headers (rewritten for `port`, and with `to` for that MAC, IPv4 address and UDP
        port, a `registers.RAW_NAME`), the RESULT, then the bytes that followed the UPDATE past its hina frame
        (they ride along), in one buffer per egress port and destination (`key`: several ranks behind one
        port): `controls.egress_rewrite`, for one frame in Python."""
        end = HINA_AT + len(hina)
        size = len(frame)
        key = port if key is None else key
        out = self._tx.get(key) if self.pipeline.reuse_buffers else None
        if out is None or len(out) != size:
            out = bytearray(size)
            if self.pipeline.reuse_buffers:
                self._tx[key] = out
        out[:HINA_AT] = frame[:HINA_AT]
        out[HINA_AT:end] = hina
        out[end:] = frame[end:]
        host = self._rewrite.get(port)
        if host is not None:
            host_mac, switch_mac, switch_ip, host_ip = host
            out[ETH_DST_AT : ETH_DST_AT + MAC_BYTES] = host_mac
            out[ETH_SRC_AT : ETH_SRC_AT + MAC_BYTES] = switch_mac
            out[IP_SRC_AT : IP_SRC_AT + IP_BYTES] = switch_ip
            out[IP_DST_AT : IP_DST_AT + IP_BYTES] = host_ip
            U16.pack_into(out, UDP_SPORT_AT, UDP_PORT)
            U16.pack_into(out, UDP_DPORT_AT, UDP_PORT)
            U16.pack_into(out, UDP_CHECKSUM_AT, 0)
            if to is not None:
                out[ETH_DST_AT : ETH_DST_AT + MAC_BYTES] = to[NAME_MAC_AT : NAME_MAC_AT + MAC_BYTES]
                out[IP_DST_AT : IP_DST_AT + IP_BYTES] = to[NAME_IP_AT : NAME_IP_AT + IP_BYTES]
                out[UDP_DPORT_AT : UDP_DPORT_AT + PORT_BYTES] = to[NAME_PORT_AT : NAME_PORT_AT + PORT_BYTES]
        U16.pack_into(out, IP_CHECKSUM_AT, ipv4_checksum(out, IPV4_AT))
        return out

    def _mac_forward(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        action = self._mac.get(bytes(frame[ETH_DST_AT : ETH_DST_AT + MAC_BYTES])) if self.topology else None
        if action is None:
            self.pipeline.drop(Drop.NO_ROUTE)
            return []
        self.forwarded += 1
        kind, arg = action
        if kind == "forward":
            return [(arg, frame)]
        return [(port, frame) for port in self._groups.get(arg, ()) if port != ingress_port]
