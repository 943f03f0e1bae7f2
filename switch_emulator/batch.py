"""The switch's batch I/O, compiled: a whole `recvmmsg` batch through the controls into a `sendmmsg` ring.

The backends receive up to 64 frames with one system call into fixed
buffers (`hina.wire.sockio.BatchSocket`) and hand the batch to one call
here, which runs the P4 controls (`controls.ingress`) on every frame and
writes what they emit straight into the transmit ring, a message per
destination: no Python runs per packet.

- `udp_batch`: datagrams of a UDP socket (loopback, routed hosts); a
  member is a UDP address, and a RESULT goes to each member's sockaddr_in
  (`registers.JOB.worker_name`).
- `raw_batch`: Ethernet frames of a packet socket (Mininet, `--raw`); the
  P4 parser's checks (`hina.wire.compiled.is_hina`, the IPv4 checksum),
  the controls, and per replica `controls.egress_rewrite` for its egress
  port and member; anything that is not hina is left to the caller.

Both take the registers as bytes (`registers.Registers.kernel_args`) and
name them inside, as `controls.ingress_bytes` does.  Super-frames (virtio_net_hdrs) are cut before and
gathered after `raw_batch` by `hina.wire.offload`.  `warm()` has the
switch's kernels compiled, or loaded from this machine's cache, before the
first frame waits on them (`hina.kernels`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hina import kernels
from hina.wire import offload
from hina.wire.compiled import get16, get32, ipv4_checksum, is_hina
from hina.wire.frames import (
    ETH_SRC_AT,
    HINA_AT,
    IP_BYTES,
    IP_CHECKSUM_AT,
    IP_SRC_AT,
    IPV4_AT,
    MAC_BYTES,
    UDP_LEN_AT,
    UDP_SPORT_AT,
)
from hina.wire.headers import AT_WORKER_ID, HEADER_BYTES, MAX_WORKERS, UDP_HEADER_BYTES
from hina.wire.sockio import (
    PACKET_OUTGOING,
    SIN_ADDR_AT,
    SIN_PORT_AT,
    SLL_PKTTYPE_AT,
    SOCKADDR_IN_BYTES,
    SOCKADDR_LL_BYTES,
)

from .controls import (
    BAD_CHECKSUM,
    HOST,
    NOTHING,
    TO_GROUP,
    TO_PARENT,
    TO_SENDER,
    TRUNCATED,
    drop,
    egress_rewrite,
    ingress,
    ingress_bytes,
)
from .registers import (
    COPY,
    COUNTERS,
    JOB,
    NAME_IP_AT,
    NAME_MAC_AT,
    NAME_PORT_AT,
    NO_MEMBER,
    NO_SOURCE,
    OTHER_IDS,
    PORT_IDS,
    RAW_IDS,
    RAW_PORTS,
    Registers,
    counters,
)


@njit(cache=True, inline="always")
def _name(names, m, source):
    """names[m] = source: a message's address, byte by byte (a few bytes: no array machinery)."""
    for b in range(names.shape[1]):
        names[m, b] = source[b]


@njit(cache=True, inline="always")
def _message(iov, m, address, size):
    iov[2 * m] = address
    iov[2 * m + 1] = size


@njit(cache=True)
def udp_batch(job_index, jobs, copies, values, counters, rx, stride, lengths, rx_names, start, n, tx, tx_names,
              tx_iov, tx_at, capacity):
    """Run `ingress` on received datagrams start..n-1 (entry i: rx[i * stride:], lengths[i] bytes,
    sender's sockaddr_in rx_names[i]) and queue what they emit in the transmit ring (tx bytes at address
    tx_at, per message a sockaddr_in in tx_names and an iovec in tx_iov).  The registers are their bytes.

    Returns (next entry, messages queued, ring bytes used): it stops early, before an entry whose
    output might not fit, so that the caller sends and calls again from there.
    """
    jobs, copies, counters = jobs.view(JOB), copies.view(COPY), counters.view(COUNTERS)[0]
    m = 0
    used = np.int64(0)  # not a literal 0: `ingress` would be compiled once more for Literal[int](0)
    for i in range(start, n):
        length = np.int64(lengths[i])
        if m + MAX_WORKERS > capacity or used + length > tx.size:
            return i, m, used
        source = (get32(rx_names[i], SIN_ADDR_AT) << 16) | get16(rx_names[i], SIN_PORT_AT)
        action, j, size = ingress(job_index, jobs, copies, values, counters, rx, i * stride, length, length,
                                  source, tx, used)
        if action == NOTHING:
            continue
        job = jobs[j]
        if action == TO_SENDER:
            _name(tx_names, m, rx_names[i])
            _message(tx_iov, m, tx_at + used, size)
            m += 1
        elif action >= TO_PARENT:
            _name(tx_names, m, job.parent_name[action - TO_PARENT])
            _message(tx_iov, m, tx_at + used, size)
            m += 1
        else:
            for w in range(job.workers):
                if job.worker_source[w] != NO_MEMBER:
                    _name(tx_names, m, job.worker_name[w])
                    _message(tx_iov, m, tx_at + used, size)
                    m += 1
        used += size
    return n, m, used


@njit(cache=True)
def _sent_before(job, w, member):
    """Whether a worker before w of the job has the same source: one replica per address (and per port for
    members known by their port alone, behind a plain switch)."""
    for v in range(w):
        if job.worker_source[v] == member:
            return True
    return False


_SKIP, _UNREACHABLE = -1, -2  # `_egress_port`: no replica for this member; a parent that is not a port


@njit(cache=True, inline="always")
def _egress_port(job, w, action, ingress_port, by_address):
    """Where replica w of what `ingress` emitted leaves: (its port, whether to a member's own address, the
    member's `worker_name`, rather than to the port's host).  A multicast goes once per port or address:
    `_SKIP` for a member not behind a port or whose port (or address) an earlier member has."""
    if action == TO_GROUP:
        member = job.worker_source[w]
        if member < PORT_IDS or OTHER_IDS <= member < RAW_IDS or _sent_before(job, w, member):
            return _SKIP, False
        if member >= RAW_IDS:  # a worker at its own address behind the port
            return (member >> 48) & (RAW_PORTS - 1), True
        return member - PORT_IDS, False  # a neighbour known by its port alone
    if action >= TO_PARENT:
        port = job.parent_source[action - TO_PARENT] - PORT_IDS
        return (port, False) if 0 <= port < PORT_IDS else (_UNREACHABLE, False)
    return ingress_port, by_address  # back to the sender


@njit(cache=True, inline="always")
def _parse(rx, base, length, names, i, check_outgoing):
    """The P4 parser on the frame at rx[base:] (entry i): 1 hina, 0 anything else (the caller's), -1 a frame
    this host sent (skipped)."""
    if check_outgoing and names[i, SLL_PKTTYPE_AT] == PACKET_OUTGOING:
        return -1
    return 1 if is_hina(rx, base, length) else 0


@njit(cache=True, inline="always")
def _sender(rx, base, sender):
    """The received frame's source MAC, IPv4 address and UDP port as a `RAW_NAME` in `sender`: where a
    RESULT unicast back to its sender goes."""
    for b in range(MAC_BYTES):
        sender[NAME_MAC_AT + b] = rx[base + ETH_SRC_AT + b]
    for b in range(IP_BYTES):
        sender[NAME_IP_AT + b] = rx[base + IP_SRC_AT + b]
    sender[NAME_PORT_AT] = rx[base + UDP_SPORT_AT]
    sender[NAME_PORT_AT + 1] = rx[base + UDP_SPORT_AT + 1]


@njit(cache=True)
def raw_batch(job_index, jobs, copies, values, counters, rx, stride, lengths, rx_names, check_outgoing,
              start, n, ingress_port, hosts, port_names, punt, tx, tx_names, tx_iov, tx_at, capacity):
    """Run the parser, `ingress` and the egress rewrite on raw frames start..n-1 received on switch
    port `ingress_port` (entry i: rx[i * stride:], lengths[i] bytes, its sockaddr_ll rx_names[i]; with
    `check_outgoing`, frames this host sent are skipped by their packet type).  The registers and
    `hosts` (`controls.HOST` rows) are their bytes.

    A hina frame (IPv4 without options, UDP to port 0x4E41, as the P4 parser takes it) goes through
    the rules with UDP length - 8 as its claimed length; each frame it emits is the received one
    (headers, the RESULT, the bytes that followed the hina frame) rewritten for its egress port
    (`controls.egress_rewrite`) and for whom it is: a RESULT's replica per member behind a port goes to
    that member (its `worker_name`: MAC, IPv4 address and UDP port), a RESULT unicast back to its sender,
    a partial up to the parent's port, and is queued in the transmit ring for the interface
    `port_names[port]` (a sockaddr_ll; all zero where no interface serves the port: not sent, counted as
    unsent).  A frame's source is its ingress port, IPv4 source and UDP source port
    (`registers.raw_source_id`).  Any other frame (ARP, other traffic, frames too short for the headers)
    is left to the caller: its entry index is put in `punt`.

    Returns (next entry, messages queued, ring bytes used, frames punted, outputs without an
    interface); it stops early, before an entry whose outputs might not fit.
    """
    jobs, copies, counters = jobs.view(JOB), copies.view(COPY), counters.view(COUNTERS)[0]
    hosts = hosts.view(HOST)
    m = 0
    used = 0
    punted = 0
    unsent = 0
    sender = np.zeros(SOCKADDR_IN_BYTES, np.uint8)  # a RESULT unicast back: the frame's source, as a RAW_NAME
    port_part = np.int64(ingress_port) << 48 if ingress_port < RAW_PORTS else np.int64(0)
    for i in range(start, n):
        length = np.int64(lengths[i])
        if m + MAX_WORKERS > capacity or used + MAX_WORKERS * length > tx.size:
            return i, m, used, punted, unsent
        base = i * stride
        kind = _parse(rx, base, length, rx_names, i, check_outgoing)
        if kind < 0:
            continue
        if kind == 0:
            punt[punted] = i
            punted += 1
            continue
        claimed = get16(rx, base + UDP_LEN_AT) - UDP_HEADER_BYTES
        if length - HINA_AT < HEADER_BYTES or claimed < HEADER_BYTES:
            counters.frames += 1
            drop(jobs, counters, -1, TRUNCATED)
            continue
        if ipv4_checksum(rx, base + IPV4_AT) != get16(rx, base + IP_CHECKSUM_AT):
            counters.frames += 1
            drop(jobs, counters, -1, BAD_CHECKSUM)
            continue
        source = (RAW_IDS | port_part | (get32(rx, base + IP_SRC_AT) << 16) | get16(rx, base + UDP_SPORT_AT)
                  if port_part or ingress_port == 0 else NO_SOURCE)
        action, j, size = ingress(job_index, jobs, copies, values, counters, rx, base + HINA_AT,
                                  length - HINA_AT, claimed, source, tx, used + HINA_AT)
        if action == NOTHING:
            continue
        # the frame around the RESULT: the received headers, and what followed the hina frame
        tx[used : used + HINA_AT] = rx[base : base + HINA_AT]
        tail = HINA_AT + size
        tx[used + tail : used + length] = rx[base + tail : base + length]
        first = used
        job = jobs[j]
        by_address = action == TO_SENDER and job.worker_source[rx[base + HINA_AT + AT_WORKER_ID]] >= RAW_IDS
        if by_address:  # back to where it sent from (else to the port's host: a member known by its port)
            _sender(rx, base, sender)
        for w in range(job.workers if action == TO_GROUP else 1):  # each member's replica, in worker order
            port, to = _egress_port(job, w, action, ingress_port, by_address)
            if port == _SKIP:
                continue
            if port == _UNREACHABLE or port >= port_names.shape[0] or port_names[port, 0] == 0:
                unsent += 1  # no interface serves the port, or a parent that is not a port
                continue
            if used != first:  # another copy: the received headers again, the RESULT and tail as built
                tx[used : used + HINA_AT] = rx[base : base + HINA_AT]
                tx[used + HINA_AT : used + length] = tx[first + HINA_AT : first + length]
            dest = sender
            if action == TO_GROUP:
                dest = job.worker_name[w]
            egress_rewrite(tx, used, hosts, port, to, dest)
            _name(tx_names, m, port_names[port])
            _message(tx_iov, m, tx_at + used, length)
            m += 1
            used += length
    return n, m, used, punted, unsent


_warm: set[str] = set()


def warm(batch: bool = False, raw: bool = False) -> None:
    """Compile (or load from the disk cache) the kernels now, not when the first frame is waiting:
    `ingress`, with `batch` `udp_batch`, with `raw` `raw_batch` (and the offload kernels that cut and
    gather its super-frames).  Once per process.  Frames are writable arrays everywhere
    (`Pipeline.update` copies read-only bytes), so each kernel is compiled for one signature."""
    kinds = ["ingress"] + (["udp_batch"] if batch else []) + (["raw_batch"] if raw else [])
    if not _warm.issuperset(kinds):  # on a machine that has not compiled them: one process compiles every
        kernels.ensure("switch", lambda: _drive(batch, raw), lambda: _drive(True, True))  # kind, others wait
        _warm.update(kinds)
    if raw:
        offload.warm()


def compile_kernels() -> None:
    """Every kernel of the switch, compiled on this machine (`hina compile`)."""
    warm(batch=True, raw=True)


def _drive(batch: bool, raw: bool) -> None:
    """Each kernel on empty registers and a frame too short for anything, on the arrays the backends pass
    (names as rows; lengths strided, as the mmsghdr lengths are)."""
    r = Registers(0, 0, 0, counters())
    out = np.zeros(64, np.uint8)
    frame = np.zeros(HEADER_BYTES, np.uint8)
    ingress_bytes(*r.kernel_args, frame, 0, frame.size, frame.size, NO_SOURCE, out, 0)
    lengths = np.zeros(4, np.uint32)[::2]
    if batch:
        udp_batch(*r.kernel_args, frame, HEADER_BYTES, lengths, np.zeros((1, SOCKADDR_IN_BYTES), np.uint8), 0, 1,
                  out, np.zeros((MAX_WORKERS, SOCKADDR_IN_BYTES), np.uint8), np.zeros(2 * MAX_WORKERS, np.uint64), 0,
                  MAX_WORKERS)
    if raw:  # one frame too short to parse: punted
        raw_batch(*r.kernel_args, frame, HEADER_BYTES, lengths, np.zeros((1, SOCKADDR_LL_BYTES), np.uint8), True, 0,
                  1, 1, np.zeros(2, HOST).view(np.uint8), np.zeros((2, SOCKADDR_LL_BYTES), np.uint8),
                  np.zeros(1, np.int64), out, np.zeros((MAX_WORKERS, SOCKADDR_LL_BYTES), np.uint8),
                  np.zeros(2 * MAX_WORKERS, np.uint64), 0, MAX_WORKERS)
