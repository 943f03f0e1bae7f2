"""The emulator on raw Ethernet frames, as `p4/hina.p4` sees them: no I/O.

`FrameSwitch.process(ingress_port, frame)` returns the (egress_port, frame)
pairs to transmit.  It parses Ethernet / IPv4 (no options) / UDP as the P4
parser does; UDP to port 0x4E41 is hina and goes through the `Pipeline`
(with the UDP length as the claimed hina length and the ingress port as the
source), every RESULT replica is rewritten for its egress port
(`egress_rewrite`: switch address as source, the port's host as
destination, UDP ports 0x4E41, UDP checksum 0, IPv4 checksum recomputed),
and everything else is forwarded on its destination MAC (`mac_forward`),
broadcasts flooded to every other port.  Bytes past the parsed headers ride
along unchanged, as the P4 deparser leaves them.  `frame` may be a view of
a receive buffer (the raw backend's): nothing here keeps it past the call.
"""

from __future__ import annotations

import struct

import numpy as np

from hina.control.topology import Topology
from hina.wire.frames import ETH, IP_END, UDP_END, ip_bytes, ipv4_checksum, mac_bytes
from hina.wire.headers import HEADER_BYTES, UDP_PORT, Drop

from .pipeline import Pipeline

_UDP_PORTS = struct.pack("!HH", UDP_PORT, UDP_PORT)
# what the parser looks at, in one unpack: ethertype, IPv4 version+IHL, protocol, UDP dport, UDP length
_PARSE = struct.Struct("!12xHB8xB12xHH")


class FrameSwitch:
    def __init__(self, topology: Topology | None = None, pipeline: Pipeline | None = None):
        self.pipeline = pipeline or Pipeline()
        self.forwarded = 0
        self._tx: dict[int, bytearray] = {}  # per egress port, when the pipeline reuses its buffers
        self.topology: Topology | None = None
        self._rewrite: dict[int, tuple[bytes, bytes]] = {}
        self.rewrite_table = np.zeros((0, 21), np.uint8)
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
        for job in topology.jobs:
            self.pipeline.add_job(job)

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
        emit = self.pipeline.update(memoryview(frame)[UDP_END:], ingress_port, length=claimed)
        if emit is None:
            return []
        hina = emit.frame
        return [(port, self._egress_rewrite(port, frame, hina)) for port in emit.dests]

    def _egress_rewrite(self, port: int, frame: bytes, hina: bytes) -> bytearray:
        """The frame's headers (rewritten for `port`), the RESULT, then the bytes that followed the
        UPDATE past its hina frame (they ride along), in one buffer per egress port."""
        end = UDP_END + len(hina)
        size = len(frame)
        out = self._tx.get(port) if self.pipeline.reuse_buffers else None
        if out is None or len(out) != size:
            out = bytearray(size)
            if self.pipeline.reuse_buffers:
                self._tx[port] = out
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
