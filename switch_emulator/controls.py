"""p4/hina.p4's controls, compiled: what the switch does with one hina frame, step for step with the P4.

Each function is named after the P4 control (or table) it copies, so the
two can be read side by side:

| here | P4 |
|---|---|
| `job_config` | `JobConfig` (p4/job_config.p4), with the ingress's length, msg_type and op checks |
| `worker_auth` | `WorkerAuth` (p4/job_config.p4) |
| `tree_parent` | `TreeParent` (p4/job_config.p4) |
| `arrival_bitmap` | `ArrivalBitmap` (p4/arrival_bitmap.p4) |
| `value_processor` | `ValueProcessor` (p4/value_processor.p4) |
| `from_parent` | `ArrivalBitmap`'s branch for a RESULT from the parent |
| `ingress` | `HinaIngress` (p4/hina.p4), which wires them |
| `egress_rewrite` | `EgressRewrite` (p4/forwarding.p4) |

`Pipeline.update` (pipeline.py) runs `ingress` on one frame; the batch I/O
(`batch.py`) runs it on every frame of a `recvmmsg` batch and
`egress_rewrite` on every frame it sends.  The registers they read and
write are `registers.py`'s (`jobs[j].slot_base`, `copies[c].bitmap`).
`Forwarding` (MAC forwarding of everything that is not hina) is not
compiled: `FrameSwitch` does it (frames.py).

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
job's share, its children's mask (`full`, `needed` arrivals) and maybe
parents (`parents` of them, slot s going up to parent s mod parents, so
that several spines share a job's slots; `member`: this switch's member id
up there).  A copy that completes on a switch with parents goes up as ONE
UPDATE (member id as worker_id, the combined words) to its slot's parent
(`TO_PARENT` + k for parent k), not down.  A
RESULT from the parent (any other source: NOT_PARENT) for a complete copy
with the same offset and phase is stored (the copy's `total` is set) and
multicast to the children; flagged STALE_RUN it is multicast down as it
came, whatever the copy holds, so every worker under it gets the refusal,
and nothing is stored.  A duplicate from a child: the copy holds the total -> unicast
back; complete but no total yet -> the partial goes up again (the UPDATE
up or the RESULT down was lost); incomplete -> dropped.  The workers'
retransmissions stay the only timers at every tier.  A root (no parent)
is the single switch above: every complete copy holds the total.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hina.wire.compiled import bswap, get16, get32, put16, put32, set_ipv4_checksum, words
from hina.wire.frames import (
    ETH_DST_AT,
    ETH_SRC_AT,
    IP_BYTES,
    IP_DST_AT,
    IP_SRC_AT,
    IPV4_AT,
    MAC_BYTES,
    UDP_CHECKSUM_AT,
    UDP_DPORT_AT,
    UDP_SPORT_AT,
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
    HEADER_BYTES,
    OTHER_SUBTREE,
    UDP_PORT,
    VERSION_BIT,
    Drop,
    Flags,
    MsgType,
    Op,
)

from .registers import COPY, COUNTERS, JOB, NAME_IP_AT, NAME_MAC_AT, NAME_PORT_AT, PORT_IDS, RAW_IDS, RAW_PORTS

# what `ingress` asks the caller to do with the frame it wrote: TO_PARENT + k sends it to parent k
NOTHING, TO_GROUP, TO_SENDER, TO_PARENT = 0, 1, 2, 3

# the wire's codes as plain integers, which the kernels compile in as constants
(TRUNCATED, BAD_LENGTH, BAD_MSG_TYPE, BAD_OP, UNKNOWN_JOB, BAD_WORKER, UNAUTHORIZED, BAD_COUNT, BAD_SLOT, STALE,
 DUPLICATE, BAD_CHECKSUM, NO_ROUTE, STALE_RUN, NOT_PARENT) = (int(d) for d in Drop)
_UPDATE, _RESULT = int(MsgType.UPDATE), int(MsgType.RESULT)
_RESEND_FLAG, _STALE_RUN_FLAG, _PENDING_FLAG = int(Flags.RESEND), int(Flags.STALE_RUN), int(Flags.PENDING)
_MAX_OP = int(max(Op))
_ADD, _OR = int(Op.ADD), int(Op.OR)
_SLOT_MASK = VERSION_BIT - 1
_VERSION_SHIFT = VERSION_BIT.bit_length() - 1

# EgressRewrite's `hosts` table, a row per egress port: the switch's address as the source and the port's
# host (or neighbour switch) as the destination, where the port has one (`has_host`)
HOST = np.dtype([("host_mac", np.uint8, (MAC_BYTES,)), ("switch_mac", np.uint8, (MAC_BYTES,)),
                 ("switch_ip", np.uint8, (IP_BYTES,)), ("host_ip", np.uint8, (IP_BYTES,)), ("has_host", np.uint8)])


@njit(cache=True, inline="always")
def _port_id(source):
    """A raw source's port as a port's source id (a parent switch is known by its port alone)."""
    if source >= RAW_IDS:
        return PORT_IDS | ((source >> 48) & (RAW_PORTS - 1))
    return source


@njit(cache=True, inline="always")
def drop(jobs, counters, j, reason):
    """Count a drop by `reason`, on the switch and (j >= 0) on job row j; what `ingress` returns for it."""
    counters.drops[reason] += 1
    if j >= 0:
        jobs[j].drops[reason] += 1
    return NOTHING, j, 0


@njit(cache=True, inline="always")
def _header(out, o, data, at, flags):
    """The RESULT's header: the UPDATE's, as a RESULT with `flags`."""
    out[o : o + HEADER_BYTES] = data[at : at + HEADER_BYTES]
    out[o + AT_MSG_TYPE] = _RESULT
    out[o + AT_FLAGS] = flags


@njit(cache=True, inline="always")
def _result(out, o, data, at, flags, values, row, count):
    """A RESULT at out[o:]: the UPDATE's header with `flags`, and the copy's `count` words (values[row:])."""
    _header(out, o, data, at, flags)
    wire = words(out, o + HEADER_BYTES, count)
    raw = values[row : row + count].view(np.uint32)
    for i in range(count):
        wire[i] = bswap(raw[i])


@njit(cache=True, inline="always")
def _pending(out, o, data, at, count, bitmap):
    """A PENDING answer at out[o:]: the UPDATE's header flagged PENDING, the copy's arrival bitmap as word 0 and
    zeros for the rest of its `count` words."""
    _header(out, o, data, at, _PENDING_FLAG)
    out[o + HEADER_BYTES : o + HEADER_BYTES + 4 * count] = 0
    put32(out, o + HEADER_BYTES, bitmap)


@njit(cache=True, inline="always")
def _send_up(out, o, data, at, values, row, count, member):
    """The copy's combined words as one UPDATE to the parent, this switch's member id as worker_id."""
    _result(out, o, data, at, 0, values, row, count)
    out[o + AT_MSG_TYPE] = _UPDATE
    out[o + AT_WORKER_ID] = member


@njit(cache=True, inline="always")
def job_config(job_index, jobs, data, at, present, claimed):
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
    j = np.int64(job_index[get16(data, at + AT_JOB_ID)])
    if j < 0:
        return (BAD_MSG_TYPE if msg_type == _RESULT else UNKNOWN_JOB), -1
    job = jobs[j]
    if msg_type == _RESULT and job.parents == 0:
        return BAD_MSG_TYPE, j
    if claimed != job.frame_bytes or present < job.frame_bytes:
        if claimed > job.frame_bytes and present >= job.frame_bytes:
            return BAD_LENGTH, j
        return TRUNCATED, j
    return 0, j


@njit(cache=True, inline="always")
def worker_auth(job, worker, source):
    """worker_auth: whether `source` may speak for `worker`: the worker's own address, or (a worker known
    by its port) anything on that port."""
    member = job.worker_source[worker]
    return member == source or member == _port_id(source)


@njit(cache=True, inline="always")
def tree_parent(job, pool_index):
    """tree_parent: which of the job's parents the slot goes up to."""
    return (pool_index & _SLOT_MASK) % job.parents


@njit(cache=True, inline="always")
def _slot_of(job, data, at):
    """The frame's `count` and pool index against the job (an UPDATE's and a RESULT's alike):
    (0 or the drop reason, the pool index, the slot within the job's range)."""
    if get16(data, at + AT_COUNT) > job.words:
        return BAD_COUNT, 0, 0
    pool_index = get16(data, at + AT_POOL_INDEX)
    slot = (pool_index & _SLOT_MASK) - job.slot_base
    if slot < 0 or slot >= job.slots:
        return BAD_SLOT, pool_index, slot
    return 0, pool_index, slot


@njit(cache=True)
def ingress(job_index, jobs, copies, values, counters, data, at, present, claimed, source, out, o):
    """Process the hina frame at data[at:at + present] (header + K words) from source id `source`.

    `claimed` is the hina length the frame claims (UDP length - 8 on raw frames; else `present`).
    Returns (action, job row, size): with action TO_GROUP or TO_SENDER a frame of `size` bytes was
    written at out[o:] for the job's members or for the sender alone, with TO_PARENT + k for parent
    k; NOTHING: absorbed or dropped (and counted).  The steps are the P4 program's controls.
    """
    counters.frames += 1
    reason, j = job_config(job_index, jobs, data, at, present, claimed)
    if reason:
        return drop(jobs, counters, j, reason)
    if data[at + AT_MSG_TYPE] == _RESULT:
        return from_parent(jobs, copies, values, counters, data, at, source, j, out, o)
    job = jobs[j]
    worker = np.int64(data[at + AT_WORKER_ID])
    if worker >= job.workers:
        return drop(jobs, counters, j, BAD_WORKER)
    if not worker_auth(job, worker, source):
        return drop(jobs, counters, j, UNAUTHORIZED)
    reason, pool_index, slot = _slot_of(job, data, at)
    if reason:
        return drop(jobs, counters, j, reason)
    return arrival_bitmap(jobs, copies, values, counters, data, at, j, worker, pool_index, slot, out, o)


@njit(cache=True, inline="always")
def arrival_bitmap(jobs, copies, values, counters, data, at, j, worker, pool_index, slot, out, o):
    """arrival_bitmap: first arrival, duplicate, stale, another run's copy; then the value processor and,
    when the copy completes, the RESULT (or on a switch with a parent, one UPDATE up)."""
    job = jobs[j]
    frame_bytes = job.frame_bytes
    local = 2 * slot + (pool_index >> _VERSION_SHIFT)
    c = copies[job.copy_base + local]
    other = copies[job.copy_base + (local ^ 1)]
    bit = np.int64(1) << worker
    seen = c.bitmap
    offset = get32(data, at + AT_OFFSET)
    phase = get16(data, at + AT_PHASE)
    if seen != 0 and (c.offset != offset or c.phase != phase):
        # Within one run a copy in use holds one chunk, and a worker whose bit is still set sends
        # there only that chunk again: this copy holds another run's state.  Refused at once, to
        # every member (the sender never takes an old RESULT or adds into old words, and the others
        # stop too instead of waiting for a run that cannot finish).
        drop(jobs, counters, j, STALE_RUN)
        _header(out, o, data, at, _STALE_RUN_FLAG)
        out[o + HEADER_BYTES : o + frame_bytes] = data[at + HEADER_BYTES : at + frame_bytes]
        return TO_GROUP, j, frame_bytes
    count = job.words
    row = job.value_base + local * count
    if seen & bit:
        if c.counter == job.needed:
            if job.parents == 0 or c.total:  # complete: the sender lost its RESULT
                job.resends += 1
                _result(out, o, data, at, _RESEND_FLAG, values, row, count)
                return TO_SENDER, j, frame_bytes
            # Sent up, no total yet: the partial up or the total down was lost, or the parent waits for others.
            # Up again for one repeat, then the next `needed - 1` repeats are answered PENDING below (c.pending
            # counts them down and stays at least 1, so to the sender alone): each member asks once more for one
            # partial up, not one each.
            if c.pending < 2:
                c.pending = job.needed
                job.resent_up += 1
                _send_up(out, o, data, at, values, row, count, job.member)
                return TO_PARENT + tree_parent(job, pool_index), j, frame_bytes
            c.pending -= 1
        # The copy holds the sender's words and waits for others: dropped, nothing stored, and answered PENDING
        # with who is counted, so that the sender stops resending.  The first time for this copy every member
        # hears it (a member whose UPDATE was lost sends it again at once instead of at its timeout); after
        # that the sender alone, so that no repeat costs more downstream than the copy's RESULT will
        drop(jobs, counters, j, DUPLICATE)
        job.pending += 1
        _pending(out, o, data, at, count, seen)
        if c.pending:
            return TO_SENDER, j, frame_bytes
        c.pending = 1
        return TO_GROUP, j, frame_bytes
    if seen != 0 and c.counter == job.needed:  # the sender already left this complete copy
        if job.parents == 0 or c.total:
            # Answered as when its bit is set: a late duplicate is ignored by its sender (that slot waits on
            # the other copy now), and a new run's hello that meets an earlier run's complete hello copy gets
            # words without its nonce and refuses them (StaleSwitchState), instead of waiting for an answer
            # that never comes while the workers whose bits are still set are refused.
            job.resends += 1
            _result(out, o, data, at, _RESEND_FLAG, values, row, count)
            return TO_SENDER, j, frame_bytes
        return drop(jobs, counters, j, STALE)
    other.bitmap &= ~bit
    seen |= bit
    c.bitmap = seen
    first = seen == bit
    value_processor(values, row, count, data, at, np.int64(data[at + AT_OP]), first)
    if first:
        c.offset = offset
        c.phase = phase
        c.counter = 1
        c.total = 0
        c.pending = 0
    else:
        c.counter += 1
    job.updates += 1
    if seen != job.full:
        return NOTHING, j, 0
    if job.parents != 0:  # complete here: one UPDATE up to the slot's parent, the total comes back down
        c.last = worker  # (the total names this worker to the children if it completed the parent's copy too)
        job.sent_up += 1
        _send_up(out, o, data, at, values, row, count, job.member)
        return TO_PARENT + tree_parent(job, pool_index), j, frame_bytes
    job.results += 1
    _result(out, o, data, at, 0, values, row, count)
    return TO_GROUP, j, frame_bytes


@njit(cache=True, inline="always")
def value_processor(values, row, count, data, at, op, first):
    """value_processor: the frame's K big-endian int32 words written into the copy (first arrival) or
    combined with it: ADD modulo 2**32, OR, or signed MAX."""
    incoming = words(data, at + HEADER_BYTES, count)
    stored = values[row : row + count]
    if first:
        raw = stored.view(np.uint32)
        for i in range(count):
            raw[i] = bswap(incoming[i])
    elif op == _ADD:
        raw = stored.view(np.uint32)
        for i in range(count):
            raw[i] = raw[i] + bswap(incoming[i])
    elif op == _OR:
        raw = stored.view(np.uint32)
        for i in range(count):
            raw[i] = raw[i] | bswap(incoming[i])
    else:  # MAX, signed
        for i in range(count):
            x = np.int32(bswap(incoming[i]))
            if x > stored[i]:
                stored[i] = x


@njit(cache=True)
def from_parent(jobs, copies, values, counters, data, at, source, j, out, o):
    """A RESULT (right length) for job row j, which has parents: `from_parent`, the tree's one new rule.

    Only the slot's parent may send it (else NOT_PARENT).  A STALE_RUN refusal is multicast down as it
    came, whatever the copy holds, the copy untouched, so that every worker under it fails the same
    way.  A total must answer a copy this switch sent up: complete, same offset and phase (else STALE:
    it is late, the copy moved on); it is stored and multicast to the children, once (a second is a
    DUPLICATE: it answers a partial sent up again, and a child still missing it asks again and gets the
    stored copy).
    """
    job = jobs[j]
    frame_bytes = job.frame_bytes
    reason, pool_index, slot = _slot_of(job, data, at)
    if reason:
        return drop(jobs, counters, j, reason)
    if _port_id(source) != job.parent_source[tree_parent(job, pool_index)]:  # the only source it is taken from
        return drop(jobs, counters, j, NOT_PARENT)
    if data[at + AT_FLAGS] & _STALE_RUN_FLAG:
        drop(jobs, counters, j, STALE_RUN)  # counted on every tier it passes
        out[o : o + frame_bytes] = data[at : at + frame_bytes]
        return TO_GROUP, j, frame_bytes
    local = 2 * slot + (pool_index >> _VERSION_SHIFT)
    c = copies[job.copy_base + local]
    if c.counter != job.needed or c.offset != get32(data, at + AT_OFFSET) or c.phase != get16(data, at + AT_PHASE):
        return drop(jobs, counters, j, STALE)
    if c.total:
        return drop(jobs, counters, j, DUPLICATE)
    count = job.words
    row = job.value_base + local * count
    if data[at + AT_FLAGS] & _PENDING_FLAG:
        if get32(data, at + HEADER_BYTES) & (np.int64(1) << job.member):
            # the parent holds this switch's partial and waits for others: every child is counted here, and the
            # next repeat sends the partial up again (the parent answered the last)
            c.pending = 0
            job.pending += 1
            _pending(out, o, data, at, count, c.bitmap)
            return TO_GROUP, j, frame_bytes
        # the parent lacks this switch's partial: it was lost on the way up, so up again now
        job.resent_up += 1
        _send_up(out, o, data, at, values, row, count, job.member)
        return TO_PARENT + tree_parent(job, pool_index), j, frame_bytes
    out[o : o + frame_bytes] = data[at : at + frame_bytes]
    value_processor(values, row, count, data, at, _OR, True)  # the total, as it came
    c.total = 1
    job.results += 1
    # a fresh multicast down; but a total the parent sent as a RESEND answers a repeat, and its children must
    # know it (a worker takes no round trip from an answer to a resend)
    out[o + AT_FLAGS] = data[at + AT_FLAGS] & _RESEND_FLAG
    # the worker whose UPDATE completed the job's copy: the one that completed this copy where the parent's
    # total names this switch, else another subtree's
    out[o + AT_WORKER_ID] = c.last if data[at + AT_WORKER_ID] == job.member else OTHER_SUBTREE
    return TO_GROUP, j, frame_bytes


@njit(cache=True, inline="always")
def egress_rewrite(tx, at, hosts, port, to, dest):
    """EgressRewrite on the frame at tx[at:] leaving by `port`: where the port has a host (`hosts`, the
    `hosts` table), the switch's MAC and IP as source, the host's as destination, UDP ports 0x4E41 and
    checksum 0; then with `to`, the MAC, IPv4 address and UDP port of `dest` (a `registers.RAW_NAME`: a
    member's replica, or the sender a RESULT goes back to) as destination; then the IPv4 checksum."""
    if port < hosts.shape[0] and hosts[port].has_host:
        h = hosts[port]
        for b in range(MAC_BYTES):
            tx[at + ETH_DST_AT + b] = h.host_mac[b]
            tx[at + ETH_SRC_AT + b] = h.switch_mac[b]
        for b in range(IP_BYTES):
            tx[at + IP_SRC_AT + b] = h.switch_ip[b]
            tx[at + IP_DST_AT + b] = h.host_ip[b]
        put16(tx, at + UDP_SPORT_AT, UDP_PORT)
        put16(tx, at + UDP_DPORT_AT, UDP_PORT)
        put16(tx, at + UDP_CHECKSUM_AT, 0)
        if to:
            for b in range(MAC_BYTES):
                tx[at + ETH_DST_AT + b] = dest[NAME_MAC_AT + b]
            for b in range(IP_BYTES):
                tx[at + IP_DST_AT + b] = dest[NAME_IP_AT + b]
            put16(tx, at + UDP_DPORT_AT, get16(dest, NAME_PORT_AT))
    set_ipv4_checksum(tx, at + IPV4_AT)


@njit(cache=True)
def ingress_bytes(job_index, jobs, copies, values, counters, data, at, present, claimed, source, out, o):
    """`ingress` on the registers' bytes (`registers.Registers.kernel_args`): what Python calls per frame."""
    return ingress(job_index, jobs.view(JOB), copies.view(COPY), values, counters.view(COUNTERS)[0], data, at,
                   present, claimed, source, out, o)
