"""A model of p4/tna/hina.p4, for the packet vectors where no Tofino runs: the P4 source itself, run.

The TNA program differs from the BMv2 one in HOW it keeps a slot (each register is read and written
once per pass, in one stage; a completed copy, a resend and a stored total take a second pass through
the recirculation port), not in what it does with a frame.  This model runs that design where Intel's
tofino-model cannot be built (docs/tofino.md): `p4_source` reads p4/tna/*.p4 and runs it statement by
statement: the ingress parser (`HinaIngressParser`: its states, extracts and selects, the bridge header
made or taken off, the IPv4 checksum verified by its Checksum unit), ingress (`HinaIngress` and every
control it applies: the checks, the slot's registers and their RegisterActions, the value plan, the
verdict, the K/2 value processors), the ingress deparser, then per frame that leaves the egress parser,
`HinaEgress` (`EgressRewrite`) and the egress deparser (its IPv4 checksum).  Every table of constant
entries is matched by its entries as the source declares them (test_tofino.py holds `checks` and `verdict`
to the compiled program's context.json), the control plane's tables by the controller's own entries
(`control.controller.p4_entries`), as the switch would be configured.  So a change to the P4 changes what
the model does (tests/p4/test_tna_mutations.py makes such changes on purpose and sees the model's tests
fail).

Written here by hand, because they are the hardware's, not the program's: the bytes the parsers find
before the frame (the intrinsic metadata, and on ingress the port metadata the parser skips), the parser
error a short frame raises (tna.p4's PARSER_ERROR_PARTIAL_HDR in parser_err), and the traffic manager:
drop_ctl, multicast replication by the controller's groups, unicast (none where ingress named no port, or
one past a pipe's 72), and the recirculation port's second pass (egress bypassed: the ingress deparser's
bytes, bridge header first, come back in on that port).
"""

from __future__ import annotations

import ipaddress
import os
import struct
from collections.abc import Iterable
from pathlib import Path

import p4_source
from p4_source import TNA, Header, P4Unsupported, Struct, const_entries  # noqa: F401 (const_entries: for test_tofino.py)

from hina.control.controller import p4_entries
from hina.control.topology import Topology
from hina.wire.headers import UDP_PORT, Drop

# A Tofino pipe's ports: a unicast to a port number whose low 7 bits (the port within its pipe) are this or
# more goes to no port, and the traffic manager drops it (p4testgen's Tofino target drops port 511 so)
PIPE_PORTS = 72
# The unicast port of a frame ingress gave none (no ucast_egress_port written, no multicast group): no
# port, so dropped, as the chip's deparser sends such a frame nowhere
NO_PORT = 511

# P4's parser errors as tna.p4 names them in parser_err
PARSER_ERRORS = {"PacketTooShort": "PARSER_ERROR_PARTIAL_HDR", "NoMatch": "PARSER_ERROR_NO_MATCH"}

# The P4 source the model runs by default: p4/tna/, or the folder HINA_TNA_P4 names (tests/p4/
# test_tna_mutations.py runs the model's tests so on mutated copies of it).
P4 = Path(os.environ.get("HINA_TNA_P4", TNA))


def _mac(text: str) -> bytes:
    return bytes(int(b, 16) for b in text.split(":"))


class TnaModel:
    """The TNA program's pipe: its parsers, controls and deparsers (run from the P4 source in `p4`), its
    registers and counters, and the traffic manager between them."""

    def __init__(self, topo: Topology | None, words: int = 32, p4: Path = P4, *, entries=(), defaults=None):
        """Configured as the controller configures a switch for `topo`; or (topo None) with the table
        `entries` and `defaults` (p4_source.Pipe's) alone, and no multicast group."""
        self.words = words
        self.program = p4_source.program(Path(p4), words)
        groups = {}
        if topo is not None:
            entries, groups = p4_entries(topo)
        self.pipe = p4_source.Pipe(self.program, entries, defaults)
        self.groups = {g: list(reps) for g, reps in groups.items()}
        self.recirc_port = self.program.value("HINA_RECIRC_PORT")
        self.recirculate = True  # False: a frame sent to the recirculation port leaves there (one pass)
        self.passes = 0

    # -- the switch ------------------------------------------------------------------------------
    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """Every frame that leaves for `port`'s frame, as (egress port, bytes)."""
        out: list[tuple[int, bytes]] = []
        pending = [(port, bytes(data))]
        while pending:
            in_port, packet = pending.pop(0)
            self.passes += 1
            for egress_port, rid, bridged in self.ingress(in_port, packet):
                if rid is None and not self.recirculate:
                    out.append((egress_port, bridged))
                elif rid is None:  # the recirculation port, egress bypassed: the second pass
                    pending.append((egress_port, bridged))
                else:
                    out += self.egress(egress_port, rid, bridged)
        return out

    def counters(self) -> dict:
        drops = self.pipe.counters["ingress.drops"]
        return {"drops": {Drop(i).name.lower(): n for i, n in sorted(drops.items()) if i and n}}

    # -- ingress ---------------------------------------------------------------------------------
    def ingress(self, port: int, packet: bytes) -> list[tuple[int, int | None, bytes]]:
        """One pass: what the traffic manager sends on, as (port, replica id or None for the recirculation
        port, the bridge header and the frame)."""
        new = self.program.new
        hdr, meta, md, frame = self.parse(port, packet)
        dprsr = new("ingress_intrinsic_metadata_for_deparser_t")
        tm = new("ingress_intrinsic_metadata_for_tm_t", ucast_egress_port=NO_PORT)
        self.pipe.apply("HinaIngress", "ingress", hdr=hdr, meta=meta, standard_metadata=md,
                        ig_prsr_md=new("ingress_intrinsic_metadata_from_parser_t",
                                       parser_err=self._parser_error(frame)),
                        ig_dprsr_md=dprsr, ig_tm_md=tm)
        if dprsr.drop_ctl:
            return []
        bridged = self.deparse(hdr, meta, dprsr) + frame.rest()  # the bytes past the parsed headers ride along
        if tm.mcast_grp_a:
            return [(p, rid, bridged) for p, rid in self.groups.get(tm.mcast_grp_a, [])]
        if tm.bypass_egress:
            if tm.ucast_egress_port & 0x7F != self.recirc_port:
                raise P4Unsupported(f"egress bypassed to port {tm.ucast_egress_port}, not the recirculation port")
            return [(tm.ucast_egress_port, None, bridged)]
        if tm.ucast_egress_port & 0x7F >= PIPE_PORTS:
            return []
        return [(tm.ucast_egress_port, 0, bridged)]

    def parse(self, port: int, packet: bytes) -> tuple[Struct, Struct, Header, p4_source.PacketIn]:
        """HinaIngressParser on `packet` in from `port`: the headers, the metadata and the intrinsic metadata
        it leaves, and what it read (the error that stopped it, the bytes it did not extract)."""
        new = self.program.new
        intrinsic = bytes(new("ingress_intrinsic_metadata_t", ingress_port=port))
        frame = p4_source.PacketIn(intrinsic + bytes(self.program.value("PORT_METADATA_SIZE") // 8) + packet)
        hdr, meta, md = new("headers_t"), new("metadata_t"), new("ingress_intrinsic_metadata_t")
        self.pipe.apply("HinaIngressParser", "ingress_parser", packet=frame, hdr=hdr, meta=meta, standard_metadata=md)
        return hdr, meta, md, frame

    def deparse(self, hdr: Struct, meta: Struct, dprsr: Struct) -> bytes:
        """HinaIngressDeparser: the headers it emits."""
        out = p4_source.PacketOut()
        self.pipe.apply("HinaIngressDeparser", "ingress_deparser", packet=out, hdr=hdr, meta=meta, ig_dprsr_md=dprsr)
        return bytes(out.data)

    def _parser_error(self, frame: p4_source.PacketIn) -> int:
        """parser_err as Tofino's parser sets it: a frame too short for a header is a partial header."""
        return self.program.value(PARSER_ERRORS[frame.error]) if frame.error else 0

    # -- egress ----------------------------------------------------------------------------------
    def egress(self, port: int, rid: int, bridged: bytes) -> list[tuple[int, bytes]]:
        """The frame out of `port` (replica `rid`; 0 for a unicast): HinaEgressParser, HinaEgress, then
        HinaEgressDeparser (the bridge header is not emitted: it stays behind)."""
        new = self.program.new
        frame = p4_source.PacketIn(bytes(new("egress_intrinsic_metadata_t", egress_port=port, egress_rid=rid))
                                   + bridged)
        hdr, meta, md = new("headers_t"), new("metadata_t"), new("egress_intrinsic_metadata_t")
        self.pipe.apply("HinaEgressParser", "egress_parser", packet=frame, hdr=hdr, meta=meta, standard_metadata=md)
        if frame.error:  # ingress emits the headers egress parses: never short
            raise P4Unsupported(f"the egress parser stopped with {frame.error}")
        dprsr = new("egress_intrinsic_metadata_for_deparser_t")
        self.pipe.apply("HinaEgress", "egress", hdr=hdr, meta=meta, standard_metadata=md,
                        eg_prsr_md=new("egress_intrinsic_metadata_from_parser_t"), eg_dprsr_md=dprsr,
                        eg_oport_md=new("egress_intrinsic_metadata_for_output_port_t"))
        if dprsr.drop_ctl:
            return []
        out = p4_source.PacketOut()
        self.pipe.apply("HinaEgressDeparser", "egress_deparser", packet=out, hdr=hdr, meta=meta, eg_dprsr_md=dprsr)
        return [(port, bytes(out.data) + frame.rest())]


def run(topology: dict, packets: Iterable[tuple[int, bytes]], words: int = 32, p4: Path = P4):
    """Frames out and drop counters for `packets` on a fresh model (of the P4 source in `p4`) configured with
    `topology`."""
    model = TnaModel(Topology.from_config(topology), words, p4)
    out = []
    for port, frame in packets:
        out += model.process(port, frame)
    return out, model.counters()["drops"]


class ModelPipeline:
    """The model behind `hina.sim.netsim`'s interface (`update(frame, source) -> Emit | None`), so that the
    real workers' windows (and other switches) drive the TNA design.  `ports` maps each source the
    network names (("w", 3), ("spine", 0), ...) to the switch port it is on; `topology` (a Topology's
    config) puts hosts, jobs and parents on those ports.  Datagrams are wrapped in Ethernet / IPv4 / UDP
    from the port's host on the way in and unwrapped on the way out."""

    def __init__(self, topology: dict, ports: dict, words: int = 32, p4: Path = P4):
        from hina.emulator.pipeline import Emit

        self._emit = Emit
        self.ports = ports
        self.sources = {port: source for source, port in ports.items()}
        self.hosts = {h["port"]: h for h in topology["hosts"]}
        self.switch = topology["switch"]
        self.model = TnaModel(Topology.from_config(topology), words, p4)

    def update(self, frame: bytes, source):
        port = self.ports[source]
        host = self.hosts[port]
        ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(frame), 0, 0, 64, 17, 0,
                                   ipaddress.IPv4Address(host["ip"]).packed,
                                   ipaddress.IPv4Address(self.switch["ip"]).packed))
        struct.pack_into("!H", ip, 10, p4_source.Checksum.update(bytes(ip)))
        eth = _mac(self.switch["mac"]) + _mac(host["mac"]) + b"\x08\x00"
        udp = struct.pack("!HHHH", 40000 + port, UDP_PORT, 8 + len(frame), 0)
        out = self.model.process(port, eth + bytes(ip) + udp + bytes(frame))
        if not out:
            return None
        frames = {data[42:] for _, data in out}
        assert len(frames) == 1, "one frame, the same words for every destination"
        return self._emit(tuple(self.sources[p] for p, _ in out), frames.pop())


def star(job_id: int, workers: int, slot_base: int, slots: int, words: int = 32, p4: Path = P4) -> ModelPipeline:
    """One switch, worker w on port w + 1."""
    ports = {("w", w): w + 1 for w in range(workers)}
    return ModelPipeline(_topology(ports, [{"job_id": job_id, "workers": workers, "words": words,
                                            "slot_base": slot_base, "slots": slots,
                                            "members": [{"worker_id": w, "port": w + 1} for w in range(workers)]}]),
                         ports, words, p4)


def _topology(ports: dict, jobs: list[dict], switches=()) -> dict:
    hosts = [{"port": p, "mac": f"02:00:00:00:{p >> 8:02x}:{p & 0xFF:02x}", "ip": f"10.0.{p >> 8}.{p & 0xFF}",
              **({"switch": True} if s[0] in switches else {})} for s, p in sorted(ports.items(), key=lambda kv: kv[1])]
    return {"switch": {"mac": "02:00:00:00:ff:fe", "ip": "10.0.255.254"}, "hosts": hosts, "jobs": jobs}


SPINE_PORT = 33  # a leaf's first uplink: a front-panel port of pipe 0, past its workers' ports


def tree(job_id: int, workers: int, per_leaf: int, spines: int, slot_base: int, slots: int,
         words: int = 32, p4: Path = P4) -> tuple[list[ModelPipeline], list[ModelPipeline]]:
    """A leaf/spine tree as tests/emulator/test_tree.py builds it of Pipelines: worker w under leaf
    w // per_leaf (on port w % per_leaf + 1), every leaf under every spine (spine s on the leaf's port
    SPINE_PORT + s; leaf i on the spine's port i + 1), slot s rooted at spine s mod `spines`."""
    n_leaves = -(-workers // per_leaf)
    leaves = []
    for i in range(n_leaves):
        children = range(i * per_leaf, min(workers, (i + 1) * per_leaf))
        ports = {("w", w): w % per_leaf + 1 for w in children} | {("spine", s): SPINE_PORT + s for s in range(spines)}
        job = {"job_id": job_id, "workers": workers, "words": words, "slot_base": slot_base, "slots": slots,
               "mask": sum(1 << w for w in children),
               "members": [{"worker_id": w, "port": ports["w", w]} for w in children],
               "parents": [{"worker_id": i, "port": SPINE_PORT + s} for s in range(spines)]}
        leaves.append(ModelPipeline(_topology(ports, [job], switches=("spine",)), ports, words, p4))
    tops = []
    for _ in range(spines):
        ports = {("leaf", i): i + 1 for i in range(n_leaves)}
        job = {"job_id": job_id, "workers": n_leaves, "words": words, "slot_base": slot_base, "slots": slots,
               "members": [{"worker_id": i, "port": i + 1} for i in range(n_leaves)]}
        tops.append(ModelPipeline(_topology(ports, [job], switches=("leaf",)), ports, words, p4))
    return leaves, tops
