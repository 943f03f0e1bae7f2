"""A model of p4/tna/hina.p4, control by control, for the packet vectors where no Tofino runs.

The TNA program differs from the BMv2 one in HOW it keeps a slot (each register is read and written
once per pass, in one stage; a completed copy, a resend and a stored total take a second pass through
the recirculation port), not in what it does with a frame.  This model does what the P4 source does,
in its order and with its registers (`copy_state`, `run_tags`, `bitmap`, the value pairs), so that the
packet vectors check that design where Intel's tofino-model cannot be built (docs/tofino.md).  It is
a transliteration checked by review against p4/tna/*.p4, except for the two tables that decide most:
`checks` (frame_checks.p4) and `verdict` (slot_rules.p4) are the P4 source's own constant entries, read
from it and matched here in their priority order (`const_entries`), so the model runs the entries the
compiler compiles (test_tofino.py checks them against the compiled program's context.json).

Driven by the controller's own entries (`control.controller.p4_entries`), as the switch would be.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import ipaddress
import re
import struct
from collections.abc import Iterable
from pathlib import Path

from hina.control.controller import p4_entries
from hina.control.topology import Topology
from hina.wire.headers import HEADER_BYTES, UDP_PORT, Drop, Flags, MsgType, Op

MASK32 = 0xFFFFFFFF
INT32_MIN = 0x80000000
UPDATE, RESULT = int(MsgType.UPDATE), int(MsgType.RESULT)
ADD, OR, MAX = int(Op.ADD), int(Op.OR), int(Op.MAX)
FLAG_RESEND, FLAG_STALE_RUN = int(Flags.RESEND), int(Flags.STALE_RUN)
# p4/tna/configuration.p4
PASS_NONE, PASS_COMPLETE, PASS_RESEND, PASS_TOTAL = 0, 1, 2, 3
FREE, OPEN, DONE, TOTAL = 0, 1, 3, 7
VALUE_NONE, VALUE_WRITE, VALUE_ADD, VALUE_OR, VALUE_MAX, VALUE_READ_HI, VALUE_READ_LO = range(7)
SLOTS, RECIRC_PORT = 4096, 68
TNA = Path(__file__).resolve().parents[1] / "p4" / "tna"


@functools.cache
def constants() -> dict[str, int]:
    """Every `const T NAME = value;` of p4/tna/*.p4."""
    out = {}
    for path in sorted(TNA.glob("*.p4")):
        for name, value in re.findall(r"^\s*const\s+[\w<>]+\s+(\w+)\s*=\s*(-?(?:0x[0-9a-fA-F]+|\d+))\s*;",
                                      path.read_text(), re.M):
            out[name] = int(value, 0)
    return out


@dataclasses.dataclass(frozen=True)
class Entry:
    """One constant entry: (value, mask) per key (mask 0 for `_`, None for "every bit"), its action and
    its arguments."""

    keys: tuple[tuple[int, int | None], ...]
    action: str
    args: tuple[int, ...]

    def matches(self, values: tuple[int, ...]) -> bool:
        return all((v & m) == (want & m) if m is not None else v == want
                   for v, (want, m) in zip(values, self.keys, strict=True))


def _value(text: str) -> int:
    text = text.strip()
    if text in ("true", "false"):
        return int(text == "true")
    if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", text):
        return int(text, 0)
    return constants()[text]


@functools.cache
def const_entries(file: str, table: str) -> tuple[list[Entry], tuple[str, tuple[int, ...]]]:
    """`table`'s constant entries in p4/tna/`file`, in their order (the first has the highest priority),
    and its default action."""
    text = re.sub(r"/\*.*?\*/", "", (TNA / file).read_text(), flags=re.S)
    body = re.search(r"\btable\s+" + table + r"\s*\{(.*?)\n    \}", text, re.S)
    assert body, f"no table {table} in p4/tna/{file}"
    block = re.search(r"const entries\s*=\s*\{(.*?)\n\s*\}", body.group(1), re.S).group(1)
    entries = []
    for keys, action, args in re.findall(r"\(([^()]*)\)\s*:\s*(\w+)\(([^()]*)\)\s*;", block):
        parsed = []
        for key in keys.split(","):
            key = key.strip()
            if key == "_":
                parsed.append((0, 0))
            elif "&&&" in key:
                value, mask = key.split("&&&")
                parsed.append((_value(value), _value(mask)))
            else:
                parsed.append((_value(key), None))
        entries.append(Entry(tuple(parsed), action, tuple(_value(a) for a in args.split(",") if a.strip())))
    action, args = re.search(r"default_action\s*=\s*(\w+)\(([^()]*)\)", body.group(1)).groups()
    return entries, (action, tuple(_value(a) for a in args.split(",") if a.strip()))


def lookup(file: str, table: str, values: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    """The action and arguments of the highest-priority entry of `table` that matches `values`, else its
    default action's."""
    entries, default = const_entries(file, table)
    for entry in entries:
        if entry.matches(values):
            return entry.action, entry.args
    return default


def _signed(x: int) -> int:
    return x - (1 << 32) if x & 0x80000000 else x


def _mac(text: str) -> bytes:
    return bytes(int(b, 16) for b in text.split(":"))


def _ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def _ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack("!10H", header[:10] + b"\0\0" + header[12:20]))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@dataclasses.dataclass
class Bridge:
    """headers.p4's bridge_t."""

    pass_: int = PASS_NONE
    is_result: int = 0
    to_sender: int = 0
    by_address: int = 0
    is_flood: int = 0
    to_parent: int = 0
    read_lo: int = 0
    ingress_port: int = 0


class Frame:
    """The parsed headers (parser.p4): each header's bytes, or None where the parser stopped before it."""

    def __init__(self, data: bytes, words: int):
        self.data = bytearray(data)
        n, half = len(data), 4 * (words // 2)
        self.eth = n >= 14
        ipv4 = self.eth and data[12:14] == b"\x08\x00" and n >= 34
        self.ipv4 = ipv4
        self.udp = ipv4 and data[14] == 0x45 and data[23] == 17 and n >= 42
        hina_port = self.udp and struct.unpack_from("!H", data, 36)[0] == UDP_PORT
        self.hina = hina_port and n >= 42 + HEADER_BYTES
        self.lo = self.hina and n >= 58 + half
        self.hi = self.hina and n >= 58 + 2 * half
        self.checksum_error = ipv4 and _ipv4_checksum(bytes(data[14:34])) != struct.unpack_from("!H", data, 24)[0]
        self.half = words // 2

    # header fields, read and written in place
    def u8(self, at: int) -> int:
        return self.data[at]

    def u16(self, at: int) -> int:
        return struct.unpack_from("!H", self.data, at)[0]

    def u32(self, at: int) -> int:
        return struct.unpack_from("!I", self.data, at)[0]

    def set8(self, at: int, v: int) -> None:
        self.data[at] = v

    def set16(self, at: int, v: int) -> None:
        struct.pack_into("!H", self.data, at, v)

    def set32(self, at: int, v: int) -> None:
        struct.pack_into("!I", self.data, at, v & MASK32)

    # the hina header
    msg_type = property(lambda s: s.u8(42))
    op = property(lambda s: s.u8(43))
    job_id = property(lambda s: s.u16(44))
    worker_id = property(lambda s: s.u8(46))
    flags = property(lambda s: s.u8(47))
    version = property(lambda s: s.u8(48) >> 7)
    slot = property(lambda s: s.u16(48) & 0x7FFF)
    offset = property(lambda s: s.u32(50))
    count = property(lambda s: s.u16(54))
    phase = property(lambda s: s.u16(56))
    udp_len = property(lambda s: s.u16(38))

    def word(self, i: int) -> int:
        return self.u32(58 + 4 * i)

    def set_word(self, i: int, v: int) -> None:
        self.set32(58 + 4 * i, v)


@dataclasses.dataclass
class Meta:
    """headers.p4's metadata_t (the fields this model needs)."""

    job_hit: bool = False
    workers: int = 0
    full_mask: int = 0
    group: int = 0
    slot_count: int = 0
    parents: int = 0
    slot_rel: int = 0
    slot_over: int = 0
    worker_over: int = 0
    has_parent: int = 0
    parent_port: int = 0
    parent_diff: int = 0
    member: int = 0
    worker_bit: int = 0
    allowed_port: int = 0
    allowed_address: int = 0
    need: int = 0
    copy: int = 0
    state: int = 0
    state_arg: int = 0
    tags_ok: int = 0
    bitmap_arg: int = 0
    claim: int = 0
    seen: int = 0
    mine: int = 0
    rest: int = 0
    value_op: int = VALUE_NONE
    guard: int = 0
    drop_reason: int = 0


class TnaModel:
    """The TNA program's ingress, its second pass and its egress, with its tables and registers."""

    def __init__(self, topo: Topology, words: int = 32):
        self.words, self.half = words, words // 2
        entries, groups = p4_entries(topo)
        self.tables: dict[str, dict] = {t: {} for t in ("jobs", "workers", "worker_addresses", "parents",
                                                        "mac_forward", "hosts", "replicas")}
        for e in entries:
            self.tables[e.table][self._key(e.match)] = (e.action, e.params)
        self.groups = {g: list(reps) for g, reps in groups.items()}
        # the registers, zero where never written: copy_state (16 bits per slot: copy 0's state, copy 1's << 8),
        # run_tags (offset, phase per copy), bitmap ([copy 0, copy 1] per slot), values ((lo, hi) pairs per copy)
        self.copy_state: dict[int, int] = collections.defaultdict(int)
        self.run_tags: dict[int, tuple[int, int]] = collections.defaultdict(lambda: (0, 0))
        self.bitmap: dict[int, list[int]] = collections.defaultdict(lambda: [0, 0])
        self.values: dict[int, list[list[int]]] = collections.defaultdict(
            lambda: [[0, 0] for _ in range(self.half)])
        self.drops = [0] * 16
        self.passes = 0

    @staticmethod
    def _key(match: dict[str, str]) -> tuple:
        out = []
        for _, v in sorted(match.items()):
            if ":" in v:
                out.append(int.from_bytes(_mac(v), "big"))
            elif "." in v:
                out.append(_ip(v))
            else:
                out.append(int(v))
        return tuple(out)

    # -- the switch ------------------------------------------------------------------------------
    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """Every frame that leaves for `port`'s frame, as (egress port, bytes)."""
        out: list[tuple[int, bytes]] = []
        pending = [(port, bytes(data), None)]
        while pending:
            in_port, frame_bytes, bridge = pending.pop(0)
            self.passes += 1
            for kind, arg, frame, br in self.ingress(in_port, frame_bytes, bridge):
                if kind == "recirculate":
                    pending.append((RECIRC_PORT, frame, br))
                elif kind == "unicast":
                    out += self.egress(arg, 0, frame, br)
                else:  # multicast
                    for p, rid in self.groups.get(arg, []):
                        out += self.egress(p, rid, frame, br)
        return out

    def counters(self) -> dict:
        return {"drops": {Drop(i).name.lower(): n for i, n in enumerate(self.drops) if i and n}}

    # -- ingress (hina.p4's HinaIngress) ---------------------------------------------------------
    def ingress(self, port: int, data: bytes, bridge: Bridge | None):
        f = Frame(data, self.words)
        if bridge is None:
            bridge = Bridge(ingress_port=port)
        m = Meta()
        m.copy = ((f.slot & (SLOTS - 1)) << 1 | f.version) if f.hina else 0
        emitted = []
        if not f.eth:
            m.drop_reason = int(Drop.TRUNCATED)
        elif not f.udp or f.u16(36) != UDP_PORT:
            emitted = self.forwarding(f, m, bridge)
        else:
            self.job_config(f, m)
            self.tree_parent(f, m, bridge)
            self.copy_state_arg(f, m, bridge)
            if bridge.pass_ == PASS_NONE:
                self.worker_auth(f, m, bridge, port)
                self.frame_checks(f, m)
            if m.drop_reason == 0:
                self.copy_state_update(f, m, bridge)
                if bridge.pass_ == PASS_NONE:
                    self.run_tags_update(f, m)
                    if f.msg_type == UPDATE and m.tags_ok == 1:
                        self.arrival_bitmap(f, m)
                self.value_plan(f, m, bridge)
                self.arrived(m)
            if m.value_op != VALUE_NONE and (m.guard == 0 or m.mine == 0):
                self.value_processors(f, m)
            emitted = self.deliver(f, m, bridge)
        if m.drop_reason:
            self.drops[m.drop_reason] += 1
        return emitted

    def forwarding(self, f: Frame, m: Meta, bridge: Bridge):
        hit = self.tables["mac_forward"].get((int.from_bytes(f.data[0:6], "big"),))
        if hit is None:
            m.drop_reason = int(Drop.NO_ROUTE)
            return []
        action, params = hit
        if action == "forward":
            return [("unicast", int(params["port"]), bytes(f.data), bridge)]
        bridge.is_flood = 1
        return [("multicast", int(params["group"]), bytes(f.data), bridge)]

    def job_config(self, f: Frame, m: Meta) -> None:
        hit = self.tables["jobs"].get((f.job_id,)) if f.hina else None
        if hit:
            p = {k: int(v) for k, v in hit[1].items()}
            m.job_hit, m.workers, m.full_mask, m.group = True, p["workers"], p["full_mask"], p["group"]
            m.slot_count, m.parents = p["slot_count"], p["parents"]
            m.slot_rel = (f.slot - p["slot_base"]) & MASK32
            m.worker_over = (f.worker_id - p["workers"]) & 0xFF

    def tree_parent(self, f: Frame, m: Meta, bridge: Bridge) -> None:
        hit = self.tables["parents"].get((f.job_id, f.slot)) if f.hina else None
        if hit:
            port, member = int(hit[1]["port"]), int(hit[1]["member"])
            m.parent_port, m.member, m.has_parent = port, member, 1
            m.parent_diff = bridge.ingress_port ^ port if bridge.pass_ == PASS_NONE else 0

    def worker_auth(self, f: Frame, m: Meta, bridge: Bridge, port: int) -> None:
        src_ip, sport = f.u32(26), f.u16(34)
        # keys sorted by name: hdr.hina.job_id, hdr.hina.worker_id, hdr.ipv4.src_addr, hdr.udp.src_port, port
        by_address = self.tables["worker_addresses"].get((f.job_id, f.worker_id, src_ip, sport, port))
        by_port = self.tables["workers"].get((f.job_id, f.worker_id, port))
        address_bit = int(by_address[1]["worker_bit"]) if by_address else 0
        port_bit = int(by_port[1]["worker_bit"]) if by_port else 0
        if by_address:
            bridge.by_address = 1
        m.allowed_port, m.allowed_address = int(by_port is not None), int(by_address is not None)
        m.worker_bit = address_bit | port_bit
        m.need = m.full_mask ^ m.worker_bit  # sender_need

    def copy_state_arg(self, f: Frame, m: Meta, bridge: Bridge) -> None:
        shift = 8 * f.version if f.hina else 0
        if bridge.pass_ == PASS_NONE and f.hina and f.msg_type == UPDATE:
            m.state_arg = OPEN << shift
        elif bridge.pass_ == PASS_COMPLETE and f.msg_type == UPDATE:
            m.state_arg = DONE << shift
        elif bridge.pass_ == PASS_TOTAL and f.msg_type == RESULT:
            m.state_arg = (TOTAL ^ DONE) << shift
        else:
            m.state_arg = 0

    def frame_checks(self, f: Frame, m: Meta) -> None:
        if m.job_hit:
            m.slot_over = (m.slot_rel - m.slot_count) & MASK32
        expected = 8 + HEADER_BYTES + 4 * self.words
        # the first-stage tables: udp_length, word_count, message_kind, operator
        length = (0 if f.udp_len < 8 + HEADER_BYTES else 1 if f.udp_len < expected else 2 if f.udp_len == expected
                  else 3)
        kind = {UPDATE: constants()["KIND_UPDATE"], RESULT: constants()["KIND_RESULT"]}.get(
            f.msg_type if f.hina else None, constants()["KIND_BAD"])
        op_bad = int(f.op > MAX) if f.hina else 1
        keys = (int(f.hina), length, int(f.checksum_error), kind, op_bad, int(m.job_hit), m.parents, int(f.hi),
                0,  # parser_err: this model's parser stops at a short header, as Tofino's, and names no error
                f.worker_id >> 7 if f.hina else 0, m.worker_over >> 7, m.allowed_port, m.allowed_address,
                int(f.count > self.words) if f.hina else 0, m.slot_rel >> 31, m.slot_over >> 31, m.has_parent,
                m.parent_diff)
        action, args = lookup("frame_checks.p4", "checks", keys)
        m.drop_reason = args[0] if action == "reason" else 0

    # -- the slot's registers, in stage order ---------------------------------------------------
    def copy_state_update(self, f: Frame, m: Meta, bridge: Bridge) -> None:
        i = f.slot & (SLOTS - 1)
        old = self.copy_state[i]
        if bridge.pass_ in (PASS_NONE, PASS_TOTAL):  # merge0 / merge1: the frame's copy's byte comes back
            self.copy_state[i] = old | m.state_arg
            m.state = (old >> (8 * f.version)) & 0xFF
        elif bridge.pass_ == PASS_COMPLETE:  # assign (copy 0's byte comes back, unread)
            self.copy_state[i] = m.state_arg
            m.state = old & 0xFF

    def run_tags_update(self, f: Frame, m: Meta) -> None:
        if f.msg_type == UPDATE and m.state == FREE:  # take_copy
            self.run_tags[m.copy] = (f.offset, f.phase)
            m.tags_ok, m.claim, m.bitmap_arg = 1, 1, m.worker_bit
            return
        m.tags_ok = int(self.run_tags[m.copy] == (f.offset, f.phase))
        m.bitmap_arg = m.worker_bit if f.msg_type == UPDATE and m.state == OPEN else 0  # arrive / read

    def arrival_bitmap(self, f: Frame, m: Meta) -> None:
        pair = self.bitmap[f.slot & (SLOTS - 1)]
        v = f.version
        m.seen = pair[v]
        pair[v] = m.bitmap_arg if m.claim == 1 else pair[v] | m.bitmap_arg
        pair[1 - v] &= ~m.bitmap_arg & MASK32

    # -- slot_rules.p4 --------------------------------------------------------------------------
    def value_plan(self, f: Frame, m: Meta, bridge: Bridge) -> None:
        m.guard, m.value_op = 0, VALUE_NONE
        if bridge.pass_ == PASS_COMPLETE and bridge.read_lo == 0:  # read_hi
            m.value_op = VALUE_READ_HI
            for i in range(self.half, self.words):
                f.set_word(i, 0)
        elif bridge.pass_ in (PASS_COMPLETE, PASS_RESEND):
            m.value_op = VALUE_READ_LO  # read_lo
            for i in range(self.half):
                f.set_word(i, INT32_MIN)
        elif bridge.pass_ == PASS_TOTAL:
            pass
        elif f.msg_type == UPDATE:
            if m.tags_ok == 0:
                pass
            elif m.state == FREE:
                m.value_op = VALUE_WRITE
            elif m.state == OPEN:
                m.value_op, m.guard = {ADD: VALUE_ADD, OR: VALUE_OR, MAX: VALUE_MAX}[f.op], 1
            elif m.state in (DONE, TOTAL):  # read_both
                m.value_op = VALUE_READ_HI
                for i in range(self.words):
                    f.set_word(i, 0)
        elif not f.flags & FLAG_STALE_RUN and m.state == DONE and m.tags_ok == 1:
            m.value_op = VALUE_WRITE

    def arrived(self, m: Meta) -> None:
        """slot_rules.p4's Arrived (sender_arrived: fresh where the frame claimed the copy, else arrived)."""
        m.mine = m.seen & m.worker_bit
        m.rest = m.need if m.claim == 1 else m.seen ^ m.need

    def value_processors(self, f: Frame, m: Meta) -> None:
        """value_processor.p4, one pair per SALU: the four RegisterActions, each handing back one word."""
        for i, pair in enumerate(self.values[m.copy]):
            lo, hi = f.word(i), f.word(self.half + i)
            if m.value_op == VALUE_WRITE:
                pair[0], pair[1] = lo, hi
                f.set_word(i, pair[0])
            elif m.value_op == VALUE_ADD:
                pair[0], pair[1] = (pair[0] + lo) & MASK32, (pair[1] + hi) & MASK32
                f.set_word(i, pair[0])
            elif m.value_op in (VALUE_OR, VALUE_READ_HI):  # READ_HI: OR, the words prepared by value_plan
                pair[0], pair[1] = pair[0] | lo, pair[1] | hi
                f.set_word(self.half + i, pair[1])
            else:  # MAX, signed (and READ_LO: MAX, the words prepared by value_plan)
                if _signed(lo) > _signed(pair[0]):
                    pair[0] = lo
                if _signed(hi) > _signed(pair[1]):
                    pair[1] = hi
                f.set_word(i, pair[0])

    def deliver(self, f: Frame, m: Meta, bridge: Bridge):
        """slot_rules.p4's Deliver: the `verdict` table's entries, each action its delivery."""
        if m.drop_reason:
            return []
        keys = (bridge.pass_, bridge.to_parent, bridge.by_address, f.msg_type, f.flags, m.state, m.tags_ok, m.mine,
                m.rest, m.has_parent, m.value_op)
        action, args = lookup("slot_rules.p4", "verdict", keys)

        def out(kind, arg):
            return [(kind, arg, bytes(f.data), dataclasses.replace(bridge))]

        if action == "drop_as":
            m.drop_reason = args[0]
            return []
        if action.startswith("recirculate_"):
            bridge.pass_ = {"complete": PASS_COMPLETE, "resend": PASS_RESEND, "total": PASS_TOTAL}[action[12:]]
            if action == "recirculate_complete":
                bridge.to_parent, bridge.read_lo = args
            elif action == "recirculate_resend":
                bridge.to_parent, bridge.read_lo = args[0], 1
            return out("recirculate", None)
        bridge.is_result = 1
        if action == "refuse_stale_run":
            f.set8(42, RESULT)
            f.set8(47, FLAG_STALE_RUN)
            m.drop_reason = int(Drop.STALE_RUN)
            return out("multicast", m.group)
        if action == "stale_down":
            m.drop_reason = int(Drop.STALE_RUN)
            return out("multicast", m.group)
        # the second pass
        bridge.pass_ = PASS_NONE
        if action == "send_up":
            f.set8(42, UPDATE)
            f.set8(46, m.member)
            f.set8(47, 0)
            return out("unicast", m.parent_port)
        if action == "result_down":
            f.set8(42, RESULT)
            f.set8(47, 0)
            return out("multicast", m.group)
        if action == "resend_back":
            f.set8(42, RESULT)
            f.set8(47, FLAG_RESEND)
            bridge.to_sender = args[0]
            return out("unicast", bridge.ingress_port)
        assert action == "total_down", action
        f.set8(47, 0)
        return out("multicast", m.group)

    # -- egress (forwarding.p4's EgressRewrite) -------------------------------------------------
    def egress(self, port: int, rid: int, data: bytes, bridge: Bridge) -> list[tuple[int, bytes]]:
        if bridge.is_flood and port == bridge.ingress_port:
            return []
        if not bridge.is_result:
            return [(port, data)]
        f = Frame(data, self.words)
        sender = (bytes(f.data[6:12]), f.u32(26), f.u16(34))
        host = self.tables["hosts"].get((port,))
        if host:
            p = host[1]
            f.data[6:12], f.data[0:6] = _mac(p["switch_mac"]), _mac(p["host_mac"])
            f.set32(26, _ip(p["switch_ip"]))
            f.set32(30, _ip(p["host_ip"]))
            f.set16(34, UDP_PORT)
            f.set16(36, UDP_PORT)
            f.set16(40, 0)
        if rid:
            member = self.tables["replicas"].get((rid,))
            if member:
                p = member[1]
                f.data[0:6] = _mac(p["host_mac"])
                f.set32(30, _ip(p["host_ip"]))
                f.set16(36, int(p["host_port"]))
        elif bridge.to_sender:
            f.data[0:6] = sender[0]
            f.set32(30, sender[1])
            f.set16(36, sender[2])
        f.set16(24, _ipv4_checksum(bytes(f.data[14:34])))
        return [(port, bytes(f.data))]


def run(topology: dict, packets: Iterable[tuple[int, bytes]], words: int = 32):
    """Frames out and drop counters for `packets` on a fresh model configured with `topology`."""
    model = TnaModel(Topology.from_config(topology), words)
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

    def __init__(self, topology: dict, ports: dict, words: int = 32):
        from hina.emulator.pipeline import Emit

        self._emit = Emit
        self.ports = ports
        self.sources = {port: source for source, port in ports.items()}
        self.hosts = {h["port"]: h for h in topology["hosts"]}
        self.switch = topology["switch"]
        self.model = TnaModel(Topology.from_config(topology), words)

    def update(self, frame: bytes, source):
        port = self.ports[source]
        host = self.hosts[port]
        ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(frame), 0, 0, 64, 17, 0,
                                   ipaddress.IPv4Address(host["ip"]).packed,
                                   ipaddress.IPv4Address(self.switch["ip"]).packed))
        struct.pack_into("!H", ip, 10, _ipv4_checksum(bytes(ip)))
        eth = _mac(self.switch["mac"]) + _mac(host["mac"]) + b"\x08\x00"
        udp = struct.pack("!HHHH", 40000 + port, UDP_PORT, 8 + len(frame), 0)
        out = self.model.process(port, eth + bytes(ip) + udp + bytes(frame))
        if not out:
            return None
        frames = {data[42:] for _, data in out}
        assert len(frames) == 1, "one frame, the same words for every destination"
        return self._emit(tuple(self.sources[p] for p, _ in out), frames.pop())


def star(job_id: int, workers: int, slot_base: int, slots: int, words: int = 32) -> ModelPipeline:
    """One switch, worker w on port w + 1."""
    ports = {("w", w): w + 1 for w in range(workers)}
    return ModelPipeline(_topology(ports, [{"job_id": job_id, "workers": workers, "words": words,
                                            "slot_base": slot_base, "slots": slots,
                                            "members": [{"worker_id": w, "port": w + 1} for w in range(workers)]}]),
                         ports, words)


def _topology(ports: dict, jobs: list[dict], switches=()) -> dict:
    hosts = [{"port": p, "mac": f"02:00:00:00:{p >> 8:02x}:{p & 0xFF:02x}", "ip": f"10.0.{p >> 8}.{p & 0xFF}",
              **({"switch": True} if s[0] in switches else {})} for s, p in sorted(ports.items(), key=lambda kv: kv[1])]
    return {"switch": {"mac": "02:00:00:00:ff:fe", "ip": "10.0.255.254"}, "hosts": hosts, "jobs": jobs}


def tree(job_id: int, workers: int, per_leaf: int, spines: int, slot_base: int, slots: int,
         words: int = 32) -> tuple[list[ModelPipeline], list[ModelPipeline]]:
    """A leaf/spine tree as tests/emulator/test_tree.py builds it of Pipelines: worker w under leaf
    w // per_leaf (on port w % per_leaf + 1), every leaf under every spine (spine s on the leaf's port
    101 + s; leaf i on the spine's port i + 1), slot s rooted at spine s mod `spines`."""
    n_leaves = -(-workers // per_leaf)
    leaves = []
    for i in range(n_leaves):
        children = range(i * per_leaf, min(workers, (i + 1) * per_leaf))
        ports = {("w", w): w % per_leaf + 1 for w in children} | {("spine", s): 101 + s for s in range(spines)}
        job = {"job_id": job_id, "workers": workers, "words": words, "slot_base": slot_base, "slots": slots,
               "mask": sum(1 << w for w in children),
               "members": [{"worker_id": w, "port": ports["w", w]} for w in children],
               "parents": [{"worker_id": i, "port": 101 + s} for s in range(spines)]}
        leaves.append(ModelPipeline(_topology(ports, [job], switches=("spine",)), ports, words))
    tops = []
    for _ in range(spines):
        ports = {("leaf", i): i + 1 for i in range(n_leaves)}
        job = {"job_id": job_id, "workers": n_leaves, "words": words, "slot_base": slot_base, "slots": slots,
               "members": [{"worker_id": i, "port": i + 1} for i in range(n_leaves)]}
        tops.append(ModelPipeline(_topology(ports, [job], switches=("leaf",)), ports, words))
    return leaves, tops
