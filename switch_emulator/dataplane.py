"""The switch's ingress rules, compiled: `p4/hina.p4`'s control, one frame or a whole batch per call.

This is where the rules live, step for step with the P4 program's names:
`job_config` (which job, how many workers, which slots), `worker_auth` (may
this source speak for this worker_id), `arrival_bitmap` (first arrival,
duplicate, completion), `value_processor` (write, ADD, OR, MAX over K
words) and the RESULT it emits.  `Pipeline` (pipeline.py) owns the
registers below and the control plane, and calls `ingress` for one frame;
the UDP backend calls `udp_batch` for every datagram one `recvmmsg`
brought, which writes the RESULTs straight into the `sendmmsg` ring
(`mmsg.py`): no Python runs per packet.

Registers (numpy arrays the pipeline allocates, one row per job, in the
order the jobs were installed):

- `job_index[job_id]`: the job's row, -1 for none.
- `meta[j]`: the job's shape (`WORKERS`, `WORDS`, ...), where its copies
  and words start, and its counters (`UPDATES`, `RESULTS`, `RESENDS`, drops
  by reason from `DROPS`).
- `auth[j, w]`: the source id worker w must send from (-2: no member);
  `auth[j, MAX_WORKERS + k]`: parent k's (trees: slot s goes up to parent
  s mod `PARENTS`).
  A source id is an integer the backend can compute from what the kernel
  sees: `udp_source_id` for a UDP address, `port_source_id` for a port.
- `names[j, w]`: the member's sockaddr_in, where the batch sends RESULTs;
  `names[j, MAX_WORKERS + k]`: parent k's, where complete copies go up.
- `copies[c]`: per slot copy its arrival bitmap, arrival counter, offset,
  phase tag and whether it holds the total; `values[...]`: K int32 words
  per copy, flat.
- `counts`: frames seen ([0]) and drops by reason ([reason]).

Slot protocol (docs/design.md, "The slot protocol", after SwitchML): each slot has two
copies.  A worker's first UPDATE for a copy sets its bit in that copy's
arrival bitmap and clears it in the other copy, then writes (the copy was
empty) or combines its words into the copy.  When the bitmap reaches the
job's full mask the combined words go out as a RESULT to every member.
Each copy also counts its arrivals since it was last empty: the bitmap of a
complete copy loses bits as workers move on to the other copy, so the
counter is what still says "complete" when a worker whose RESULT was lost
asks again; a duplicate then gets the stored result by unicast.  An UPDATE
that arrives at a complete copy its sender has already left is stale and
dropped.  An UPDATE whose offset or phase tag disagrees with a non-empty
copy meets another run's state (a restarted job on a switch nobody reset):
it is refused as a RESULT flagged STALE_RUN, which the worker turns into an
error, never into a sum; the refusal goes to every member, not only the
sender, since the run cannot finish once one worker stops: a worker whose
window had not reached that copy yet would otherwise wait for chunks that
never complete and time out.  Nothing here raises on a
frame: anything malformed is dropped and counted by reason.

Aggregation trees (docs/design.md, "Aggregation trees"; docs/trees.md): a switch holds a
job's share, its children's mask (`FULL`, `NEEDED` arrivals) and maybe
parents (`PARENTS` of them, slot s going up to parent s mod PARENTS, so
that several spines share a job's slots; `MEMBER`: this switch's member id
up there).  A copy that completes on a switch with parents goes up as ONE
UPDATE (member id as worker_id, the combined words) to its slot's parent
(`TO_PARENT` + k for parent k), not down.  A
RESULT from the parent (any other source: NOT_PARENT) for a complete copy
with the same offset and phase is stored (the copy's `TOTAL` is set) and
multicast to the children; flagged STALE_RUN it is multicast down as it
came, whatever the copy holds, so every worker under it gets the refusal,
and nothing is stored.  A duplicate from a child: the copy holds the total -> unicast
back; complete but no total yet -> the partial goes up again (the UPDATE
up or the RESULT down was lost); incomplete -> dropped.  The workers'
retransmissions stay the only timers at every tier.  A root (no parent)
is the single switch above: every complete copy holds the total.
"""

from __future__ import annotations

import socket

import numpy as np
from numba import njit

from hina import kernels
from hina.control.config import MAX_PARENTS
from hina.wire.frames import (
    ETH,
    IP_END,
    UDP_END,
    VNET_AT_CSUM_OFFSET,
    VNET_AT_CSUM_START,
    VNET_AT_FLAGS,
    VNET_AT_GSO_SIZE,
    VNET_AT_GSO_TYPE,
    VNET_AT_HDR_LEN,
    VNET_F_NEEDS_CSUM,
    VNET_GSO_UDP_L4,
    VNET_HDR_BYTES,
)
from hina.wire.headers import (
    AT_COUNT,
    AT_FLAGS,
    AT_JOB_ID,
    AT_MSG_TYPE,
    AT_OFFSET,
    AT_OP,
    AT_PHASE,
    AT_POOL_INDEX,
    AT_WORKER_ID,
    DROP_REASONS,
    HEADER_BYTES,
    MAX_WORKERS,
    UDP_PORT,
    VERSION_BIT,
    Drop,
    Flags,
    MsgType,
    Op,
)

SOCKADDR = 16

# meta columns
WORKERS, WORDS, FRAME_BYTES, SLOT_BASE, SLOTS, FULL, COPY_BASE, VALUE_BASE, UPDATES, RESULTS, RESENDS = range(11)
# trees: how many parents (0: this switch is the job's root), this switch's member id in the parents'
# job, the arrivals that complete a copy, partials sent up (first time, and again)
PARENTS, MEMBER, NEEDED, SENT_UP, RESENT_UP = range(11, 16)
DROPS = 16  # drops by reason: meta[j, DROPS + reason]
REASONS = DROP_REASONS
META = DROPS + REASONS
# copies columns; TOTAL: the copy holds the job's total (a RESULT from the parent was stored in it)
BITMAP, COUNTER, OFFSET, PHASE, TOTAL = range(5)
COPY_COLUMNS = 5

# what `ingress` asks the caller to do with the frame it wrote: TO_PARENT + k sends it to parent k
NOTHING, TO_GROUP, TO_SENDER, TO_PARENT = 0, 1, 2, 3

# the wire's codes as plain integers, which the kernels compile in as constants
(TRUNCATED, BAD_LENGTH, BAD_MSG_TYPE, BAD_OP, UNKNOWN_JOB, BAD_WORKER, UNAUTHORIZED, BAD_COUNT, BAD_SLOT, STALE,
 DUPLICATE, BAD_CHECKSUM, NO_ROUTE, STALE_RUN, NOT_PARENT) = (int(d) for d in Drop)
_UPDATE, _RESULT = int(MsgType.UPDATE), int(MsgType.RESULT)
_RESEND_FLAG, _STALE_RUN_FLAG = int(Flags.RESEND), int(Flags.STALE_RUN)
_MAX_OP = int(max(Op))
_ADD, _OR = int(Op.ADD), int(Op.OR)
_SLOT_MASK = VERSION_BIT - 1
_VERSION_SHIFT = VERSION_BIT.bit_length() - 1
NO_MEMBER = -2
NO_SOURCE = -1  # a source no member has: matches no auth entry


def udp_source_id(host: str, port: int) -> int | None:
    """The source id of UDP address (host, port): its IPv4 address and port in one integer, as
    `udp_batch` reads them from a received sockaddr_in; None unless `host` is a dotted IPv4
    address (a received datagram's source always is: names are never looked up)."""
    try:
        addr = socket.inet_pton(socket.AF_INET, host)
    except (OSError, TypeError):
        return None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 1 << 16:
        return None
    return int.from_bytes(addr, "big") << 16 | port


PORT_IDS = 1 << 48  # source ids below are UDP addresses (48 bits: address, port); from here, ports
OTHER_IDS = 1 << 49  # from here, ids given out to any other kind of source (an in-process port name)
RAW_IDS = 1 << 62  # from here, workers behind a port: the port above bit 48, IPv4 address and UDP port below
RAW_PORTS = 1 << 13  # raw ids hold ports below this (BMv2's are 9 bits)


def port_source_id(port: int) -> int:
    """The source id of a switch port (raw frames): a neighbouring switch, whatever its address."""
    return PORT_IDS | port


def raw_source_id(port: int, host: str, udp_port: int) -> int | None:
    """The source id of a worker behind switch port `port` sending from IPv4 `host`, UDP port `udp_port`
    (raw frames), as `raw_batch` computes it from a frame; None if it is not one."""
    udp = udp_source_id(host, udp_port)
    if udp is None or isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < RAW_PORTS:
        return None
    return RAW_IDS | port << 48 | udp


@njit(cache=True, inline="always")
def _port_id(source):
    """A raw source's port as a port's source id (a parent switch is known by its port alone)."""
    if source >= RAW_IDS:
        return PORT_IDS | ((source >> 48) & (RAW_PORTS - 1))
    return source


def sockaddr(host: str, port: int) -> bytes:
    """struct sockaddr_in for (host, port), host a dotted IPv4 address: family in host order, port
    and address in network order."""
    addr = socket.inet_pton(socket.AF_INET, host)
    return int(socket.AF_INET).to_bytes(2, "little") + port.to_bytes(2, "big") + addr + bytes(8)


@njit(cache=True, inline="always")
def _be16(b, i):
    return (np.int64(b[i]) << 8) | np.int64(b[i + 1])


@njit(cache=True, inline="always")
def _be32(b, i):
    return (np.int64(b[i]) << 24) | (np.int64(b[i + 1]) << 16) | (np.int64(b[i + 2]) << 8) | np.int64(b[i + 3])


@njit(cache=True, inline="always")
def _bswap(x):
    """A uint32 with its bytes reversed: big-endian wire words to native and back (one instruction)."""
    return ((x & np.uint32(0xFF)) << np.uint32(24)) | ((x & np.uint32(0xFF00)) << np.uint32(8)) \
        | ((x >> np.uint32(8)) & np.uint32(0xFF00)) | (x >> np.uint32(24))


@njit(cache=True, inline="always")
def _words(b, at, count):
    """The `count` 32-bit words at b[at:] as uint32 (still in wire order)."""
    return b[at : at + 4 * count].view(np.uint32)


@njit(cache=True, inline="always")
def _drop(meta, counts, j, reason):
    counts[reason] += 1
    if j >= 0:
        meta[j, DROPS + reason] += 1
    return NOTHING, j, 0


@njit(cache=True, inline="always")
def _header(out, o, data, at, flags, msg_type=_RESULT):
    """The RESULT's header: the UPDATE's, as a RESULT with `flags` (or as another `msg_type`)."""
    out[o : o + HEADER_BYTES] = data[at : at + HEADER_BYTES]
    out[o + AT_MSG_TYPE] = msg_type
    out[o + AT_FLAGS] = flags


@njit(cache=True, inline="always")
def _send_up(out, o, data, at, values, row, words, member):
    """The copy's combined words as one UPDATE to the parent, this switch's member id as worker_id."""
    _result(out, o, data, at, 0, values, row, words)
    out[o + AT_MSG_TYPE] = _UPDATE
    out[o + AT_WORKER_ID] = member


@njit(cache=True, inline="always")
def _job_config(job_index, meta, data, at, present, claimed):
    """job_config: (0, the frame's job row), or (the reason it is dropped, the row it counts against or -1).

    Fewer bytes present or claimed than a header, or than header + K words, is TRUNCATED; more claimed
    is BAD_LENGTH, as in the P4 program.  Only a switch with a parent takes RESULTs."""
    if present < HEADER_BYTES or claimed < HEADER_BYTES:
        return TRUNCATED, -1
    msg_type = data[at + AT_MSG_TYPE]
    if msg_type != _UPDATE and msg_type != _RESULT:
        return BAD_MSG_TYPE, -1
    if np.int64(data[at + AT_OP]) > _MAX_OP:
        return BAD_OP, -1
    j = np.int64(job_index[_be16(data, at + AT_JOB_ID)])
    if j < 0:
        return (BAD_MSG_TYPE if msg_type == _RESULT else UNKNOWN_JOB), -1
    if msg_type == _RESULT and meta[j, PARENTS] == 0:
        return BAD_MSG_TYPE, j
    frame_bytes = meta[j, FRAME_BYTES]
    if claimed != frame_bytes or present < frame_bytes:
        if claimed > frame_bytes and present >= frame_bytes:
            return BAD_LENGTH, j
        return TRUNCATED, j
    return 0, j


@njit(cache=True, inline="always")
def _slot_of(meta, j, data, at):
    """The frame's `count` and pool index against job row j (an UPDATE's and a RESULT's alike):
    (0 or the drop reason, the pool index, the slot within the job's range)."""
    if _be16(data, at + AT_COUNT) > meta[j, WORDS]:
        return BAD_COUNT, 0, 0
    pool_index = _be16(data, at + AT_POOL_INDEX)
    slot = (pool_index & _SLOT_MASK) - meta[j, SLOT_BASE]
    if slot < 0 or slot >= meta[j, SLOTS]:
        return BAD_SLOT, pool_index, slot
    return 0, pool_index, slot


@njit(cache=True)
def ingress(job_index, meta, auth, copies, values, counts, data, at, present, claimed, source, out, o):
    """Process the hina frame at data[at:at + present] (header + K words) from source id `source`.

    `claimed` is the hina length the frame claims (UDP length - 8 on raw frames; else `present`).
    Returns (action, job row, size): with action TO_GROUP or TO_SENDER a frame of `size` bytes was
    written at out[o:] for the job's members or for the sender alone, with TO_PARENT + k for parent
    k; NOTHING: absorbed or dropped (and counted).  The steps are the P4 program's controls.
    """
    counts[0] += 1
    reason, j = _job_config(job_index, meta, data, at, present, claimed)
    if reason:
        return _drop(meta, counts, j, reason)
    if data[at + AT_MSG_TYPE] == _RESULT:
        return _from_parent(meta, auth, counts, copies, values, data, at, source, j, out, o)
    # worker_auth: a member of the job, speaking from its own source
    worker = np.int64(data[at + AT_WORKER_ID])
    if worker >= meta[j, WORKERS]:
        return _drop(meta, counts, j, BAD_WORKER)
    member = auth[j, worker]
    if member != source and member != _port_id(source):  # its own address, or (known by its port) any there
        return _drop(meta, counts, j, UNAUTHORIZED)
    reason, pool_index, slot = _slot_of(meta, j, data, at)
    if reason:
        return _drop(meta, counts, j, reason)
    return _arrival_bitmap(meta, counts, copies, values, data, at, j, worker, pool_index, slot, out, o)


@njit(cache=True, inline="always")
def _arrival_bitmap(meta, counts, copies, values, data, at, j, worker, pool_index, slot, out, o):
    """arrival_bitmap: first arrival, duplicate, stale, another run's copy; then the value processor and,
    when the copy completes, the RESULT (or on a switch with a parent, one UPDATE up)."""
    frame_bytes = meta[j, FRAME_BYTES]
    local = 2 * slot + (pool_index >> _VERSION_SHIFT)
    copy = meta[j, COPY_BASE] + local
    other = meta[j, COPY_BASE] + (local ^ 1)
    bit = np.int64(1) << worker
    seen = copies[copy, BITMAP]
    offset = _be32(data, at + AT_OFFSET)
    phase = _be16(data, at + AT_PHASE)
    if seen != 0 and (copies[copy, OFFSET] != offset or copies[copy, PHASE] != phase):
        # Within one run a copy in use holds one chunk, and a worker whose bit is still set sends
        # there only that chunk again: this copy holds another run's state.  Refused at once, to
        # every member (the sender never takes an old RESULT or adds into old words, and the others
        # stop too instead of waiting for a run that cannot finish).
        _drop(meta, counts, j, STALE_RUN)
        _header(out, o, data, at, _STALE_RUN_FLAG)
        out[o + HEADER_BYTES : o + frame_bytes] = data[at + HEADER_BYTES : at + frame_bytes]
        return TO_GROUP, j, frame_bytes
    words = meta[j, WORDS]
    row = meta[j, VALUE_BASE] + local * words
    needed = meta[j, NEEDED]
    if seen & bit:
        if copies[copy, COUNTER] == needed:
            if meta[j, PARENTS] == 0 or copies[copy, TOTAL]:  # complete: the sender lost its RESULT
                meta[j, RESENDS] += 1
                _result(out, o, data, at, _RESEND_FLAG, values, row, words)
                return TO_SENDER, j, frame_bytes
            # sent up, no total yet: the partial up or the RESULT down was lost, so up again
            meta[j, RESENT_UP] += 1
            _send_up(out, o, data, at, values, row, words, meta[j, MEMBER])
            return TO_PARENT + (pool_index & _SLOT_MASK) % meta[j, PARENTS], j, frame_bytes
        return _drop(meta, counts, j, DUPLICATE)
    if seen != 0 and copies[copy, COUNTER] == needed:  # the sender already left this complete copy
        if meta[j, PARENTS] == 0 or copies[copy, TOTAL]:
            # Answered as when its bit is set: a late duplicate is ignored by its sender (that slot waits on
            # the other copy now), and a new run's hello that meets an earlier run's complete hello copy gets
            # words without its nonce and refuses them (StaleSwitchState), instead of waiting for an answer
            # that never comes while the workers whose bits are still set are refused.
            meta[j, RESENDS] += 1
            _result(out, o, data, at, _RESEND_FLAG, values, row, words)
            return TO_SENDER, j, frame_bytes
        return _drop(meta, counts, j, STALE)
    copies[other, BITMAP] &= ~bit
    seen |= bit
    copies[copy, BITMAP] = seen
    first = seen == bit
    _value_processor(values, row, words, data, at, np.int64(data[at + AT_OP]), first)
    if first:
        copies[copy, OFFSET] = offset
        copies[copy, PHASE] = phase
        copies[copy, COUNTER] = 1
        copies[copy, TOTAL] = 0
    else:
        copies[copy, COUNTER] += 1
    meta[j, UPDATES] += 1
    if seen != meta[j, FULL]:
        return NOTHING, j, 0
    if meta[j, PARENTS] != 0:  # complete here: one UPDATE up to the slot's parent, the total comes back down
        meta[j, SENT_UP] += 1
        _send_up(out, o, data, at, values, row, words, meta[j, MEMBER])
        return TO_PARENT + (pool_index & _SLOT_MASK) % meta[j, PARENTS], j, frame_bytes
    meta[j, RESULTS] += 1
    _result(out, o, data, at, 0, values, row, words)
    return TO_GROUP, j, frame_bytes


@njit(cache=True, inline="always")
def _value_processor(values, row, words, data, at, op, first):
    """value_processor: the frame's K big-endian int32 words written into the copy (first arrival) or
    combined with it: ADD modulo 2**32, OR, or signed MAX."""
    incoming = _words(data, at + HEADER_BYTES, words)
    stored = values[row : row + words]
    if first:
        raw = stored.view(np.uint32)
        for i in range(words):
            raw[i] = _bswap(incoming[i])
    elif op == _ADD:
        raw = stored.view(np.uint32)
        for i in range(words):
            raw[i] = raw[i] + _bswap(incoming[i])
    elif op == _OR:
        raw = stored.view(np.uint32)
        for i in range(words):
            raw[i] = raw[i] | _bswap(incoming[i])
    else:  # MAX, signed
        for i in range(words):
            x = np.int32(_bswap(incoming[i]))
            if x > stored[i]:
                stored[i] = x


@njit(cache=True)
def _from_parent(meta, auth, counts, copies, values, data, at, source, j, out, o):
    """A RESULT (right length) for job row j, which has parents: `from_parent`, the tree's one new rule.

    Only the slot's parent may send it (else NOT_PARENT).  A STALE_RUN refusal is multicast down as it
    came, whatever the copy holds, the copy untouched, so that every worker under it fails the same
    way.  A total must answer a copy this switch sent up: complete, same offset and phase (else STALE:
    it is late, the copy moved on); it is stored and multicast to the children, once (a second is a
    DUPLICATE: it answers a partial sent up again, and a child still missing it asks again and gets the
    stored copy).
    """
    frame_bytes = meta[j, FRAME_BYTES]
    reason, pool_index, slot = _slot_of(meta, j, data, at)
    if reason:
        return _drop(meta, counts, j, reason)
    # tree_parent: the slot's parent, the only source a RESULT is taken from
    if _port_id(source) != auth[j, MAX_WORKERS + (pool_index & _SLOT_MASK) % meta[j, PARENTS]]:
        return _drop(meta, counts, j, NOT_PARENT)
    if data[at + AT_FLAGS] & _STALE_RUN_FLAG:
        _drop(meta, counts, j, STALE_RUN)  # counted on every tier it passes
        out[o : o + frame_bytes] = data[at : at + frame_bytes]
        return TO_GROUP, j, frame_bytes
    local = 2 * slot + (pool_index >> _VERSION_SHIFT)
    copy = meta[j, COPY_BASE] + local
    if (copies[copy, COUNTER] != meta[j, NEEDED] or copies[copy, OFFSET] != _be32(data, at + AT_OFFSET)
            or copies[copy, PHASE] != _be16(data, at + AT_PHASE)):
        return _drop(meta, counts, j, STALE)
    out[o : o + frame_bytes] = data[at : at + frame_bytes]
    if copies[copy, TOTAL]:
        return _drop(meta, counts, j, DUPLICATE)
    words = meta[j, WORDS]
    row = meta[j, VALUE_BASE] + local * words
    _value_processor(values, row, words, data, at, _OR, True)  # the total, as it came: written
    copies[copy, TOTAL] = 1
    meta[j, RESULTS] += 1
    out[o + AT_FLAGS] = 0  # a fresh multicast down, whatever the parent's flags
    return TO_GROUP, j, frame_bytes


@njit(cache=True, inline="always")
def _result(out, o, data, at, flags, values, row, words):
    _header(out, o, data, at, flags)
    wire = _words(out, o + HEADER_BYTES, words)
    raw = values[row : row + words].view(np.uint32)
    for i in range(words):
        wire[i] = _bswap(raw[i])


@njit(cache=True)
def udp_batch(job_index, meta, auth, copies, values, counts, names, rx, stride, lengths, rx_names, start, n,
              tx, tx_names, tx_iov, tx_at, capacity):
    """Run `ingress` on received datagrams start..n-1 (entry i: rx[i * stride:], lengths[i] bytes,
    sender's sockaddr_in at rx_names[16 i:]) and queue what they emit in the transmit ring (tx
    bytes at address tx_at, per message a sockaddr in tx_names and an iovec in tx_iov).

    Returns (next entry, messages queued, ring bytes used): it stops early, before an entry whose
    output might not fit, so that the caller sends and calls again from there.
    """
    m = 0
    used = np.int64(0)  # not a literal 0: `ingress` would be compiled once more for Literal[int](0)
    for i in range(start, n):
        length = np.int64(lengths[i])
        if m + MAX_WORKERS > capacity or used + length > tx.size:
            return i, m, used
        name = SOCKADDR * i
        source = (_be32(rx_names, name + 4) << 16) | _be16(rx_names, name + 2)
        action, j, size = ingress(job_index, meta, auth, copies, values, counts, rx, i * stride, length, length,
                                  source, tx, used)
        if action == NOTHING:
            continue
        if action != TO_GROUP:
            for b in range(SOCKADDR):
                tx_names[SOCKADDR * m + b] = rx_names[name + b] if action == TO_SENDER \
                    else names[j, MAX_WORKERS + action - TO_PARENT, b]
            tx_iov[2 * m] = tx_at + used
            tx_iov[2 * m + 1] = size
            m += 1
        else:
            for w in range(meta[j, WORKERS]):
                if auth[j, w] != NO_MEMBER:
                    for b in range(SOCKADDR):
                        tx_names[SOCKADDR * m + b] = names[j, w, b]
                    tx_iov[2 * m] = tx_at + used
                    tx_iov[2 * m + 1] = size
                    m += 1
        used += size
    return n, m, used


# raw frames (Ethernet / IPv4 without options / UDP, offsets from hina.wire.frames), as p4/hina.p4's parser sees them
SOCKADDR_LL = 20  # struct sockaddr_ll: where an AF_PACKET frame goes (an interface index)
PACKET_OUTGOING = 4  # sockaddr_ll.sll_pkttype of a frame this host sent


@njit(cache=True, inline="always")
def _ipv4_checksum(b, at):
    """The ones' complement checksum of the 20-byte IPv4 header at b[at:], its checksum field as zero."""
    total = np.int64(0)
    for i in range(0, 20, 2):
        if i != 10:
            total += _be16(b, at + i)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@njit(cache=True, inline="always")
def _egress(tx, at, port, rewrite, dest, d):
    """Rewrite the frame at tx[at:] for egress `port` as the P4 egress does: the switch's MAC and IP as
    source, UDP ports 0x4E41 and checksum 0 (only where the topology has a host on the port); as
    destination the port's host, or with d >= 0 the MAC, IPv4 address and UDP port at dest[d : d + 12]
    (a member's replica, or the sender a RESULT goes back to); then the IPv4 checksum."""
    if port < rewrite.shape[0] and rewrite[port, 20]:
        for b in range(12):
            tx[at + b] = rewrite[port, b]
        for b in range(8):
            tx[at + ETH + 12 + b] = rewrite[port, 12 + b]
        tx[at + IP_END] = tx[at + IP_END + 2] = UDP_PORT >> 8
        tx[at + IP_END + 1] = tx[at + IP_END + 3] = UDP_PORT & 0xFF
        tx[at + UDP_END - 2] = tx[at + UDP_END - 1] = 0
        if d >= 0:
            for b in range(6):
                tx[at + b] = dest[d + b]
            for b in range(4):
                tx[at + ETH + 16 + b] = dest[d + 6 + b]
            tx[at + IP_END + 2] = dest[d + 10]
            tx[at + IP_END + 3] = dest[d + 11]
    checksum = _ipv4_checksum(tx, at + ETH)
    tx[at + ETH + 10] = checksum >> 8
    tx[at + ETH + 11] = checksum & 0xFF


@njit(cache=True)
def _sent_before(auth, j, w, member):
    """Whether a member before worker w of job row j has the same source: one replica per address (and
    per port for members known by their port alone, behind a plain switch)."""
    for v in range(w):
        if auth[j, v] == member:
            return True
    return False


@njit(cache=True)
def unwrap(rx, stride, lengths, rx_names, start, n, out, out_stride, out_lengths, out_names, origin, capacity,
           passed):
    """Frames read after a virtio_net_hdr (PACKET_VNET_HDR: entry i is rx[i * stride:], lengths[i] bytes with the
    header, its sockaddr_ll at rx_names[20 i:]) from entries start..n-1, made what the wire would carry, into
    `out` (frame k at out[k * out_stride:], out_lengths[k] bytes, its sockaddr_ll at out_names[20 k:], origin[k]
    the entry it came from): a hina super-frame (IPv4 without options, UDP to port 0x4E41, gso_type UDP_L4:
    the sender's stack left its datagrams whole) is cut into its datagrams, each with its own IPv4 and UDP
    lengths, IPv4 identification and checksum and the super-frame's headers otherwise; any other hina frame is
    copied as it is.  Every other frame (ARP, other traffic, a frame longer than `out_stride`) keeps its header
    for the caller: its entry index goes into `passed`.

    Returns (next entry, frames out, entries passed); it stops before an entry whose frames would not fit."""
    k = 0
    p = 0
    for i in range(start, n):
        base = i * stride
        at = base + VNET_HDR_BYTES
        length = np.int64(lengths[i]) - VNET_HDR_BYTES
        hina = (length >= UDP_END and _be16(rx, at + 12) == 0x0800 and rx[at + ETH] == 0x45
                and rx[at + ETH + 9] == 17 and _be16(rx, at + IP_END + 2) == UDP_PORT)
        segment = _le16(rx, base + VNET_AT_GSO_SIZE)
        if hina and rx[base + VNET_AT_GSO_TYPE] == VNET_GSO_UDP_L4 and segment > 0 and length > UDP_END + segment:
            payload = length - UDP_END
            pieces = (payload + segment - 1) // segment
            if UDP_END + segment > out_stride or pieces > capacity:  # it could never fit: the caller's
                passed[p] = i
                p += 1
                continue
            if k + pieces > capacity:
                return i, k, p
            ident = _be16(rx, at + ETH + 4)
            for piece in range(pieces):
                size = min(segment, payload - piece * segment)
                o = k * out_stride
                out[o : o + UDP_END] = rx[at : at + UDP_END]
                source = at + UDP_END + piece * segment
                out[o + UDP_END : o + UDP_END + size] = rx[source : source + size]
                total = UDP_END - ETH + size
                out[o + ETH + 2], out[o + ETH + 3] = total >> 8, total & 0xFF
                seq = (ident + piece) & 0xFFFF
                out[o + ETH + 4], out[o + ETH + 5] = seq >> 8, seq & 0xFF
                checksum = _ipv4_checksum(out, o + ETH)
                out[o + ETH + 10], out[o + ETH + 11] = checksum >> 8, checksum & 0xFF
                udp = 8 + size
                out[o + IP_END + 4], out[o + IP_END + 5] = udp >> 8, udp & 0xFF
                out_lengths[k] = UDP_END + size
                out_names[SOCKADDR_LL * k : SOCKADDR_LL * (k + 1)] = rx_names[SOCKADDR_LL * i : SOCKADDR_LL * (i + 1)]
                origin[k] = i
                k += 1
        elif hina and length <= out_stride:
            if k + 1 > capacity:
                return i, k, p
            o = k * out_stride
            out[o : o + length] = rx[at : at + length]
            out_lengths[k] = length
            out_names[SOCKADDR_LL * k : SOCKADDR_LL * (k + 1)] = rx_names[SOCKADDR_LL * i : SOCKADDR_LL * (i + 1)]
            origin[k] = i
            k += 1
        else:
            passed[p] = i
            p += 1
    return n, k, p


GATHER_LEAST = 1024  # bytes of UDP payload a replica needs to be gathered: smaller ones gain little, cost latency


UDP_CHECKSUM_AT = 6  # the UDP header's checksum field


@njit(cache=True, inline="always")
def _le16(b, i):
    """A virtio_net_hdr's 16-bit fields are in the host's byte order: little-endian on every host hina runs on."""
    return np.int64(b[i]) | (np.int64(b[i + 1]) << 8)


@njit(cache=True, inline="always")
def _put_le16(b, i, v):
    b[i], b[i + 1] = v & 0xFF, (v >> 8) & 0xFF


@njit(cache=True, inline="always")
def _same_flow(tx, a, names, i, b, j):
    """Whether frames at tx[a:] and tx[b:] (messages i and j) go out of the same interface to the same
    destination: MAC, IPv4 address, UDP port."""
    for k in range(SOCKADDR_LL):
        if names[SOCKADDR_LL * i + k] != names[SOCKADDR_LL * j + k]:
            return False
    for k in range(6):
        if tx[a + k] != tx[b + k]:
            return False
    for k in range(4):
        if tx[a + ETH + 16 + k] != tx[b + ETH + 16 + k]:
            return False
    return tx[a + IP_END + 2] == tx[b + IP_END + 2] and tx[a + IP_END + 3] == tx[b + IP_END + 3]


@njit(cache=True)
def gather(tx, tx_names, tx_iov, tx_at, m, out, out_names, out_iov, out_at, limit, taken):
    """The replicas of a transmit ring (messages 0..m-1: frames at tx_iov's addresses less `tx_at`, their
    interfaces' sockaddr_ll in tx_names) as super-frames for a packet socket with virtio_net_hdrs: each run of
    frames to one destination (interface, MAC, IPv4 address, UDP port), in the ring's order, of one size but
    its last (a shorter one ends it), at most `limit` of them, becomes one message: a virtio_net_hdr asking
    for segmentation (UDP_L4, the run's UDP payload size) and the checksums, the first frame's headers sized
    for the whole run, and every frame's UDP payload back to back; a run of one is its frame after a header
    that asks nothing.  The kernel cuts a super-frame into the frames it stands for where the link does not
    carry it whole.  Returns the messages written to out (at address `out_at` + offset, out_iov and out_names
    as a sendmmsg ring's); `taken` is scratch, m flags."""
    for i in range(m):
        taken[i] = False
    k = 0
    used = 0
    for i in range(m):
        if taken[i]:
            continue
        a = np.int64(tx_iov[2 * i]) - tx_at
        size = np.int64(tx_iov[2 * i + 1])
        o = used
        payload = size - UDP_END
        out[o + VNET_HDR_BYTES : o + VNET_HDR_BYTES + size] = tx[a : a + size]
        total = payload
        pieces = 1
        taken[i] = True
        if payload >= GATHER_LEAST and _be16(tx, a + IP_END + 4) == 8 + payload:  # no bytes after it: runs
            for j in range(i + 1, m):
                if pieces == limit or total + payload > 65507:
                    break
                if taken[j]:
                    continue
                b = np.int64(tx_iov[2 * j]) - tx_at
                if not _same_flow(tx, a, tx_names, i, b, j):
                    continue
                more = np.int64(tx_iov[2 * j + 1]) - UDP_END
                if more > payload or more <= 0 or _be16(tx, b + IP_END + 4) != 8 + more:
                    break  # a larger frame to this destination (or one with bytes after its datagram): in order
                start = o + VNET_HDR_BYTES + UDP_END + total
                out[start : start + more] = tx[b + UDP_END : b + UDP_END + more]
                taken[j] = True
                total += more
                pieces += 1
                if more < payload:
                    break  # the shorter frame ends the run
        h = o + VNET_HDR_BYTES  # the first frame's headers, for the whole run
        for x in range(VNET_HDR_BYTES):
            out[o + x] = 0
        if pieces > 1:
            out[o + VNET_AT_FLAGS] = VNET_F_NEEDS_CSUM
            out[o + VNET_AT_GSO_TYPE] = VNET_GSO_UDP_L4
            _put_le16(out, o + VNET_AT_HDR_LEN, UDP_END)
            _put_le16(out, o + VNET_AT_GSO_SIZE, payload)
            _put_le16(out, o + VNET_AT_CSUM_START, IP_END)  # the UDP header, and in it its checksum field
            _put_le16(out, o + VNET_AT_CSUM_OFFSET, UDP_CHECKSUM_AT)
            ip_total = UDP_END - ETH + total
            out[h + ETH + 2], out[h + ETH + 3] = ip_total >> 8, ip_total & 0xFF
            checksum = _ipv4_checksum(out, h + ETH)
            out[h + ETH + 10], out[h + ETH + 11] = checksum >> 8, checksum & 0xFF
            udp = 8 + total
            out[h + IP_END + 4], out[h + IP_END + 5] = udp >> 8, udp & 0xFF
            # a partial checksum: the pseudo-header's sum (addresses, protocol, length), which the kernel
            # completes over each datagram it cuts
            pseudo = np.int64(17) + udp
            for x in range(0, 8, 2):
                pseudo += _be16(out, h + ETH + 12 + x)
            while pseudo >> 16:
                pseudo = (pseudo & 0xFFFF) + (pseudo >> 16)
            out[h + IP_END + 6], out[h + IP_END + 7] = pseudo >> 8, pseudo & 0xFF
        length = VNET_HDR_BYTES + UDP_END + total
        out_names[SOCKADDR_LL * k : SOCKADDR_LL * (k + 1)] = tx_names[SOCKADDR_LL * i : SOCKADDR_LL * (i + 1)]
        out_iov[2 * k] = out_at + o
        out_iov[2 * k + 1] = length
        k += 1
        used += length
    return k


@njit(cache=True)
def raw_batch(job_index, meta, auth, copies, values, counts, names, rx, stride, lengths, rx_names, check_outgoing,
              start, n, ingress_port, rewrite, port_names, punt, tx, tx_names, tx_iov, tx_at, capacity):
    """Run the parser, `ingress` and the egress rewrite on raw frames start..n-1 received on switch
    port `ingress_port` (entry i: rx[i * stride:], lengths[i] bytes, its sockaddr_ll at
    rx_names[20 i:]; with `check_outgoing`, frames this host sent are skipped by their packet type).

    A hina frame (IPv4 without options, UDP to port 0x4E41, as the P4 parser takes it) goes through
    the rules with UDP length - 8 as its claimed length; each frame it emits is the received one
    (headers, the RESULT, the bytes that followed the hina frame) rewritten for its egress port
    (`rewrite[port]`: 12 bytes of MACs, 8 of IPs, then whether the port has a host) and for whom it is:
    a RESULT's replica per member behind a port goes to that member (`names[j, w]`: its MAC, IPv4
    address and UDP port), a RESULT unicast back to its sender, a partial up to the parent's port, and
    is queued in the transmit ring for the interface `port_names[port]` (a sockaddr_ll; all zero
    where no interface serves the port: not sent, counted as unsent).  A frame's source is its ingress
    port, IPv4 source and UDP source port (`raw_source_id`).  Any other frame (ARP, other traffic, frames too
    short for the headers) is left to the caller: its entry index is put in `punt`.

    Returns (next entry, messages queued, ring bytes used, frames punted, outputs without an
    interface); it stops early, before an entry whose outputs might not fit.
    """
    m = 0
    used = 0
    punted = 0
    unsent = 0
    sender = np.zeros(12, np.uint8)  # a RESULT unicast back: the received frame's source, as a destination
    port_part = np.int64(ingress_port) << 48 if ingress_port < RAW_PORTS else np.int64(0)
    for i in range(start, n):
        length = np.int64(lengths[i])
        if m + MAX_WORKERS > capacity or used + MAX_WORKERS * length > tx.size:
            return i, m, used, punted, unsent
        base = i * stride
        if check_outgoing and rx_names[SOCKADDR_LL * i + 10] == PACKET_OUTGOING:
            continue
        if (length < UDP_END or _be16(rx, base + 12) != 0x0800 or rx[base + ETH] != 0x45
                or rx[base + ETH + 9] != 17 or _be16(rx, base + IP_END + 2) != UDP_PORT):
            punt[punted] = i
            punted += 1
            continue
        claimed = _be16(rx, base + IP_END + 4) - 8
        if length - UDP_END < HEADER_BYTES or claimed < HEADER_BYTES:
            counts[0] += 1
            _drop(meta, counts, -1, TRUNCATED)
            continue
        if _ipv4_checksum(rx, base + ETH) != _be16(rx, base + ETH + 10):
            counts[0] += 1
            _drop(meta, counts, -1, BAD_CHECKSUM)
            continue
        source = (RAW_IDS | port_part | (_be32(rx, base + ETH + 12) << 16) | _be16(rx, base + IP_END)
                  if port_part or ingress_port == 0 else NO_SOURCE)
        action, j, size = ingress(job_index, meta, auth, copies, values, counts, rx, base + UDP_END,
                                  length - UDP_END, claimed, source, tx, used + UDP_END)
        if action == NOTHING:
            continue
        # the frame around the RESULT: the received headers, and what followed the hina frame
        tx[used : used + UDP_END] = rx[base : base + UDP_END]
        tail = UDP_END + size
        tx[used + tail : used + length] = rx[base + tail : base + length]
        first = used
        for w in range(meta[j, WORKERS] if action == TO_GROUP else 1):  # each member's replica, in worker order
            d = -1
            dest = sender
            if action == TO_GROUP:
                member = auth[j, w]
                if member < PORT_IDS or OTHER_IDS <= member < RAW_IDS or _sent_before(auth, j, w, member):
                    continue  # not behind a port, or its address (or port) already has its replica
                if member >= RAW_IDS:  # a worker at its own address behind the port
                    port = (member >> 48) & (RAW_PORTS - 1)
                    dest, d = names[j, w], 0
                else:  # a neighbour known by its port alone
                    port = member - PORT_IDS
            elif action >= TO_PARENT:
                port = auth[j, MAX_WORKERS + action - TO_PARENT] - PORT_IDS
                if port < 0 or port >= PORT_IDS:  # a parent that is not a port: unreachable from here
                    unsent += 1
                    continue
            else:  # back to the sender: where it sent from, or (a member known by its port) the port's host
                port = ingress_port
                if auth[j, rx[base + UDP_END + AT_WORKER_ID]] >= RAW_IDS:
                    for b in range(6):
                        sender[b] = rx[base + 6 + b]
                    for b in range(4):
                        sender[6 + b] = rx[base + ETH + 12 + b]
                    sender[10], sender[11] = rx[base + IP_END], rx[base + IP_END + 1]
                    d = 0
            if port >= port_names.shape[0] or port_names[port, 0] == 0:
                unsent += 1
                continue
            if used != first:  # another copy: the received headers again, the RESULT and tail as built
                tx[used : used + UDP_END] = rx[base : base + UDP_END]
                tx[used + UDP_END : used + length] = tx[first + UDP_END : first + length]
            _egress(tx, used, port, rewrite, dest, d)
            for b in range(SOCKADDR_LL):
                tx_names[SOCKADDR_LL * m + b] = port_names[port, b]
            tx_iov[2 * m] = tx_at + used
            tx_iov[2 * m + 1] = length
            m += 1
            used += length
    return n, m, used, punted, unsent


_warm: set[str] = set()


def warm(batch: bool = False, raw: bool = False) -> None:
    """Compile (or load from the disk cache) the kernels now, not when the first frame is waiting:
    `ingress`, with `batch` `udp_batch`, with `raw` `raw_batch`.  Once per process.  Frames are
    writable arrays everywhere (`Pipeline.update` copies read-only bytes), so each kernel is compiled
    for one signature."""
    kinds = ["ingress"] + (["udp_batch"] if batch else []) + (["raw_batch"] if raw else [])
    if not _warm.issuperset(kinds):  # on a machine that has not compiled them: one process compiles every
        kernels.ensure("switch", lambda: _drive(batch, raw), lambda: _drive(True, True))  # kind, others wait


def compile_kernels() -> None:
    """Every kernel of the switch, compiled on this machine (`hina compile`)."""
    warm(batch=True, raw=True)


def _drive(batch: bool, raw: bool) -> None:
    kinds = ["ingress"] + (["udp_batch"] if batch else []) + (["raw_batch"] if raw else [])
    job_index = np.full(1 << 16, -1, np.int32)
    meta = np.zeros((0, META), np.int64)
    auth = np.zeros((0, MAX_WORKERS + MAX_PARENTS), np.int64)
    copies = np.zeros((0, COPY_COLUMNS), np.int64)
    values = np.zeros(0, np.int32)
    counts = np.zeros(REASONS, np.int64)
    out = np.zeros(64, np.uint8)
    frame = np.zeros(HEADER_BYTES, np.uint8)
    ingress(job_index, meta, auth, copies, values, counts, frame, 0, frame.size, frame.size, NO_SOURCE, out, 0)
    lengths = np.zeros(4, np.uint32)[::2]  # strided as the mmsghdr lengths (one element would be contiguous)
    if batch:
        names = np.zeros((0, MAX_WORKERS + MAX_PARENTS, SOCKADDR), np.uint8)
        udp_batch(job_index, meta, auth, copies, values, counts, names, frame, HEADER_BYTES, lengths,
                  np.zeros(SOCKADDR, np.uint8), 0, 1, out, np.zeros(SOCKADDR * MAX_WORKERS, np.uint8),
                  np.zeros(2 * MAX_WORKERS, np.uint64), 0, MAX_WORKERS)
    if raw:  # one frame too short to parse: punted; one frame after a virtio_net_hdr, unwrapped; none gathered
        gather(out, np.zeros(SOCKADDR_LL, np.uint8), np.zeros(2, np.uint64), 0, 0, out, np.zeros(SOCKADDR_LL, np.uint8),
               np.zeros(2, np.uint64), 0, 1, np.zeros(1, np.bool_))
        unwrap(np.zeros(64, np.uint8), 64, lengths, np.zeros(SOCKADDR_LL, np.uint8), 0, 1, np.zeros(64, np.uint8), 64,
               lengths, np.zeros(SOCKADDR_LL, np.uint8), np.zeros(1, np.int64), 1, np.zeros(1, np.int64))
        names = np.zeros((0, MAX_WORKERS + MAX_PARENTS, SOCKADDR), np.uint8)
        raw_batch(job_index, meta, auth, copies, values, counts, names, frame, HEADER_BYTES, lengths,
                  np.zeros(SOCKADDR_LL, np.uint8), True, 0, 1, 1, np.zeros((2, 21), np.uint8),
                  np.zeros((2, SOCKADDR_LL), np.uint8), np.zeros(1, np.int64), out,
                  np.zeros(SOCKADDR_LL * MAX_WORKERS, np.uint8), np.zeros(2 * MAX_WORKERS, np.uint64), 0,
                  MAX_WORKERS)
    _warm.update(kinds)
