"""The XDP switch's tables, declared once: their C structs and the constants the program compiles in.

The program (`hina_xdp.c`) includes one generated header, `hina_xdp.h`, which `c_header()`
writes from these declarations and from `hina.wire.headers` (the hina header's byte offsets, its
codes, the drop reasons): no offset, code or struct is typed twice.  The control plane
(`hina.emulator.xdp.tables`) writes and reads the BPF maps through the same ctypes structs, so
the C and the Python side of every map value have one layout (ctypes lays a struct out as the C
compiler does; clang's BPF target aligns as x86_64 does).

The frame-size limit.  On a veth the kernel runs an XDP program without multi-buffer support only
while every frame fits one page with its headroom and the skb's shared info (the kernel refuses to
attach it when the peer's MTU is larger), and a broadcast redirect copies a frame into one fresh
page (`xdpf_clone`), which a multi-buffer frame never fits: measured on this project's kernel
(6.18), a jumbo frame broadcast with an `xdp.frags` program leaves on no port, while a unicast of
the same frame does.  So the program takes frames up to `XDP_MTU` (3506 bytes of IP packet), K up
to `MAX_WORDS` (865) words, and a job with a larger K is refused when it is installed.
"""

from __future__ import annotations

import ctypes
import enum
from ctypes import c_uint8, c_uint16, c_uint32, c_uint64

from hina.control.config import MAX_PARENTS
from hina.emulator import registers as dataplane
from hina.wire import headers
from hina.wire.headers import DROP_REASONS, ETH_HEADER_BYTES, MAX_WORKERS, Drop, Flags, MsgType, Op, max_words

# A page (4096 bytes on x86_64) less XDP's headroom (256) and the skb_shared_info that closes a
# non-multi-buffer XDP buffer (320), less the Ethernet header: the largest MTU a veth peer may have
# while an XDP program without multi-buffer support is attached (the kernel says "Peer MTU is too
# large to set XDP" above it).
PAGE_BYTES, XDP_HEADROOM, SHARED_INFO_BYTES = 4096, 256, 320
XDP_MTU = PAGE_BYTES - XDP_HEADROOM - SHARED_INFO_BYTES - ETH_HEADER_BYTES
MAX_WORDS = max_words(XDP_MTU)  # K the program takes at most: one frame of XDP_MTU
MAX_PORTS = 512  # switch ports (a Topology's hosts sit on ports 0..510, BMv2's range)
MAX_JOBS = 1024  # jobs installed at once (rows of the per-job counters)
GROUP_ENTRIES = MAX_WORKERS  # a job's RESULT replicas: one per distinct member address at most


class MetaKind(enum.IntEnum):
    """What the ingress program did with a frame, in the 16 bytes of XDP metadata before it: the egress
    program reads it to rewrite each copy, and BPF_PROG_TEST_RUN hands it back to the tests."""

    NONE = 0  # absorbed or dropped: nothing leaves
    GROUP = 1  # a RESULT (or a refusal) to every member: one copy per replica, each addressed by the egress
    SENDER = 2  # back to the sender's own address (a member that named its address)
    PORT_HOST = 3  # to the host on `port` (a member known by its port, a parent switch)
    FORWARD = 4  # not hina: out of `port` unchanged (the MAC table)
    FLOOD = 5  # not hina: a broadcast, to every host port but its own, unchanged


class SpinLock(ctypes.Structure):
    """struct bpf_spin_lock: the kernel's lock inside a map value (4 bytes the program never reads)."""

    _fields_ = [("val", c_uint32)]


class Copy(ctypes.Structure):
    """One of a slot's two copies: its arrival bitmap and counter, the chunk's offset and phase tag, whether
    it holds the total (trees), `pending`: while open, whether a PENDING for it went to every member
    already; once sent up without a total, how many more repeats are answered PENDING (plus one); and `last`
    (trees), the worker_id whose UPDATE completed it, which the total names on its way down."""

    _fields_ = [("bitmap", c_uint32), ("counter", c_uint32), ("offset", c_uint32), ("phase", c_uint16),
                ("total", c_uint8), ("pending", c_uint8), ("last", c_uint8), ("pad", c_uint8 * 3)]


class Slot(ctypes.Structure):
    """A slot: both copies and their words (host byte order) behind one lock, since an arrival in one copy
    clears the sender's bit in the other."""

    _fields_ = [("lock", SpinLock), ("pad", c_uint32), ("copies", Copy * 2), ("words", (c_uint32 * MAX_WORDS) * 2)]


class Job(ctypes.Structure):
    """The `jobs` table's entry (keyed by job_id): shape, slot range, tree share, and per worker_id (then per
    parent) the source id it must send from (`hina.emulator.registers`' ids; NO_MEMBER for none)."""

    _fields_ = [("row", c_uint32), ("workers", c_uint32), ("words", c_uint32), ("frame_bytes", c_uint32),
                ("slot_base", c_uint32), ("slots", c_uint32), ("full", c_uint32), ("needed", c_uint32),
                ("parents", c_uint32), ("member", c_uint32), ("auth", c_uint64 * (MAX_WORKERS + MAX_PARENTS))]


class JobCounters(ctypes.Structure):
    """A job's counters, one per CPU (`counters`, at the job's row): what the emulator counts per job."""

    _fields_ = [("updates", c_uint64), ("results", c_uint64), ("resends", c_uint64), ("sent_up", c_uint64),
                ("resent_up", c_uint64), ("pending", c_uint64), ("drops", c_uint64 * DROP_REASONS)]


class Totals(ctypes.Structure):
    """The switch's counters, one per CPU: frames seen and drops by reason (index 0 and the reasons, as
    the emulator's `counts`), non-hina frames forwarded, outputs with no port to leave by, and the last
    broadcast's number on this CPU (the egress program tells broadcasts apart by it)."""

    _fields_ = [("drops", c_uint64 * DROP_REASONS), ("forwarded", c_uint64), ("unsent", c_uint64),
                ("seq", c_uint32), ("pad", c_uint32)]


class Meta(ctypes.Structure):
    """The XDP metadata the ingress program writes before a frame (`MetaKind`)."""

    _fields_ = [("seq", c_uint32), ("job_id", c_uint16), ("port", c_uint16), ("kind", c_uint8),
                ("pad", c_uint8 * 7)]


class Rewrite(ctypes.Structure):
    """Per egress port (`rewrite`, the raw emulator's rewrite table): the host's MAC and the switch's, the
    switch's IPv4 address and the host's, and whether a host is there at all (else only the checksum)."""

    _fields_ = [("dst_mac", c_uint8 * 6), ("src_mac", c_uint8 * 6), ("src_ip", c_uint8 * 4),
                ("dst_ip", c_uint8 * 4), ("host", c_uint8), ("pad", c_uint8 * 3)]


class ReplicaKey(ctypes.Structure):
    _fields_ = [("job_id", c_uint16), ("port", c_uint16), ("index", c_uint32)]


class Replica(ctypes.Structure):
    """A job's `index`-th RESULT replica on `port`: a member's own MAC, IPv4 address and UDP port (network
    order), or (`address` 0) the port's host at UDP port 0x4E41."""

    _fields_ = [("mac", c_uint8 * 6), ("udp_port", c_uint8 * 2), ("ip", c_uint8 * 4), ("address", c_uint8),
                ("pad", c_uint8 * 3)]


class Cursor(ctypes.Structure):
    """Per CPU and egress port: the broadcast whose copies the egress program is numbering, and the next."""

    _fields_ = [("seq", c_uint32), ("next", c_uint32)]


class MacKey(ctypes.Structure):
    _fields_ = [("mac", c_uint8 * 6), ("pad", c_uint8 * 2)]


class MacAction(ctypes.Structure):
    """The MAC table's action: forward out of `port`, or (`flood` 1) to every host port but the ingress."""

    _fields_ = [("flood", c_uint32), ("port", c_uint32)]


class Zeros(ctypes.Structure):
    """The `zeros` table's one entry, never written: what a PENDING answer's words after the first are
    copied from (one helper call, where a loop over K words would cost the verifier a walk per path)."""

    _fields_ = [("words", c_uint32 * MAX_WORDS)]


class Command(ctypes.Structure):
    """A control-plane change the `hina_control` program applies slot by slot under each slot's lock
    (BPF_PROG_TEST_RUN: the frame it runs on): RESET empties the copies of slots [base, base + slots);
    CLEAR empties those an earlier run left as `worker` joins (`_JobState.clear_leftovers`'s rule)."""

    _fields_ = [("op", c_uint32), ("worker", c_uint32), ("base", c_uint32), ("slots", c_uint32),
                ("full", c_uint32), ("needed", c_uint32), ("cleared", c_uint32), ("pad", c_uint32)]


class CommandOp(enum.IntEnum):
    RESET = 1
    CLEAR = 2


STRUCTS = (SpinLock, Copy, Slot, Job, JobCounters, Totals, Meta, Rewrite, ReplicaKey, Replica, Cursor, MacKey,
           MacAction, Zeros, Command)
_C_NAMES = {c_uint8: "__u8", c_uint16: "__u16", c_uint32: "__u32", c_uint64: "__u64"}


def _c_field(name: str, kind) -> str:
    dims = ""
    while issubclass(kind, ctypes.Array):  # outermost first, as C writes them
        dims += f"[{kind._length_}]"
        kind = kind._type_
    if kind is SpinLock:
        return f"\tstruct bpf_spin_lock {name}{dims};"
    if issubclass(kind, ctypes.Structure):
        return f"\tstruct {c_name(kind)} {name}{dims};"
    return f"\t{_C_NAMES[kind]} {name}{dims};"


def c_name(struct: type[ctypes.Structure]) -> str:
    """The struct's C name: hina_ and its Python name in snake case."""
    name = struct.__name__
    return "hina_" + "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _c_struct(struct: type[ctypes.Structure]) -> str:
    """The struct in C, with a check that the compiler lays it out as ctypes does (its size, each offset)."""
    name = c_name(struct)
    fields = "\n".join(_c_field(field, kind) for field, kind in struct._fields_)
    checks = [f"sizeof(struct {name}) == {ctypes.sizeof(struct)}"] + [
        f"__builtin_offsetof(struct {name}, {field}) == {getattr(struct, field).offset}"
        for field, _ in struct._fields_]
    asserts = "\n".join(f'_Static_assert({check}, "{struct.__name__}: not the layout of hina.emulator.xdp.layout");'
                        for check in checks)
    return f"struct {name} {{\n{fields}\n}};\n{asserts}"


def constants() -> dict[str, int]:
    """Every constant the program compiles in, by its C name."""
    out = {"HINA_UDP_PORT": headers.UDP_PORT, "HINA_HEADER_BYTES": headers.HEADER_BYTES,
           "ETH_BYTES": ETH_HEADER_BYTES, "IP_END": ETH_HEADER_BYTES + headers.IPV4_HEADER_BYTES,
           "UDP_END": headers.FRAME_OVERHEAD, "VERSION_SHIFT": headers.VERSION_BIT.bit_length() - 1,
           "SLOT_MASK": headers.VERSION_BIT - 1, "MAX_WORKERS": MAX_WORKERS, "MAX_PARENTS": MAX_PARENTS,
           "DROP_REASONS": DROP_REASONS, "MAX_WORDS": MAX_WORDS, "MAX_PORTS": MAX_PORTS, "MAX_JOBS": MAX_JOBS,
           "GROUP_ENTRIES": GROUP_ENTRIES, "PORT_IDS": dataplane.PORT_IDS, "OTHER_IDS": dataplane.OTHER_IDS,
           "RAW_IDS": dataplane.RAW_IDS, "RAW_PORTS": dataplane.RAW_PORTS,
           "NO_MEMBER": dataplane.NO_MEMBER & (1 << 64) - 1, "OTHER_SUBTREE": headers.OTHER_SUBTREE}
    out.update({f"AT_{name.upper()}": at for name, at in headers.FIELD_AT.items() if name not in ("version", "slot")})
    out["AT_POOL_INDEX"] = headers.AT_POOL_INDEX
    out.update({f"MSG_{m.name}": int(m) for m in MsgType})
    out.update({f"OP_{o.name}": int(o) for o in Op})
    out.update({f"FLAG_{f.name}": int(f) for f in Flags})
    out.update({f"DROP_{d.name}": int(d) for d in Drop})
    out.update({f"META_{k.name}": int(k) for k in MetaKind})
    out.update({f"CMD_{c.name}": int(c) for c in CommandOp})
    return out


def c_header() -> str:
    """hina_xdp.h: the constants and the map value structs, generated (never edited by hand)."""
    lines = ["/* Generated by hina.emulator.xdp.layout from hina.wire.headers and the table declarations:",
             " * do not edit (python -m hina.emulator.xdp.build writes it beside the compiled program). */",
             "#ifndef HINA_XDP_H", "#define HINA_XDP_H", ""]
    for name, value in constants().items():
        suffix = "ULL" if value >= 1 << 31 else ""
        lines.append(f"#define {name} {value:#x}{suffix}" if value >= 1 << 16 else f"#define {name} {value}")
    lines.append("")
    for struct in STRUCTS:
        if struct is not SpinLock:
            lines += [_c_struct(struct), ""]
    lines.append("#endif")
    return "\n".join(lines) + "\n"
