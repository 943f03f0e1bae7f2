"""The switch's registers: their layout, declared once, for the compiled rules and anything that mirrors them.

`Pipeline` (pipeline.py) allocates them and the control plane writes
them; the compiled controls (`controls.py`) and batch I/O (`batch.py`)
read and write them by name (`jobs[j].slot_base`, `copies[c].bitmap`);
another data plane that keeps the same state (a switch in C) mirrors the
structs below, which a test holds to the numpy dtypes field by field.
Every field is a 64-bit integer in the host's byte order (little-endian
on every host hina runs on) or a byte array, in this order, without
padding.

- `job_index`: int32[65536], job_id -> the job's row in `jobs`, -1 (`NO_JOB`)
  for none.
- `jobs`: one `JOB` per installed job, in the order they were installed:
  its shape (job_config.p4's `jobs` table and tree_parent's), where its
  copies and words start, who may send for it (job_config.p4's
  worker_auth tables), where the batch paths send to, and its counters.
- `copies`: one `COPY` per slot copy (2 per slot: the `version` bit), the
  arrival_bitmap.p4 registers.
- `values`: int32, K words per copy (the value_processor.p4 register), the
  job's copies one after another from `value_base`.
- `counters`: one `COUNTERS`: frames seen, and drops by reason (`Drop`),
  the P4 `drops` counter.

    struct hina_job {                         /* JOB */
        int64_t workers;                      /* N: worker_ids 0..N-1 */
        int64_t words;                        /* K */
        int64_t frame_bytes;                  /* header + K words: every frame's length */
        int64_t slot_base;
        int64_t slots;
        int64_t full;                         /* the children's bits: a complete copy's bitmap */
        int64_t needed;                       /* the arrivals that complete a copy */
        int64_t parents;                      /* switches above (slot s goes to parent s % parents); 0: root */
        int64_t member;                       /* this switch's worker_id in its parents' job */
        int64_t copy_base;                    /* the job's first copy in `copies` */
        int64_t value_base;                   /* the job's first word in `values` */
        int64_t worker_source[32];            /* MAX_WORKERS: the source id each worker sends from */
        int64_t parent_source[8];             /* MAX_PARENTS: each parent's source id */
        uint8_t worker_name[32][16];          /* where RESULTs go: sockaddr_in, or MAC, IPv4, UDP port */
        uint8_t parent_name[8][16];           /* where partials go up: sockaddr_in */
        int64_t updates;                      /* UPDATEs taken */
        int64_t results;                      /* RESULTs multicast */
        int64_t resends;                      /* RESULTs unicast again */
        int64_t sent_up;                      /* partials sent up */
        int64_t resent_up;                    /* partials sent up again */
        int64_t pending;                      /* PENDING answers: repeats met a copy still waiting */
        int64_t drops[16];                    /* DROP_REASONS: by reason; [0] unused */
    };
    struct hina_copy {                        /* COPY */
        int64_t bitmap;                       /* the arrival bitmap: a bit per worker_id */
        int64_t counter;                      /* arrivals since the copy was last empty */
        int64_t offset;                       /* the chunk's offset (salted), as the frames carry it */
        int64_t phase;                        /* the chunk's phase tag */
        int64_t total;                        /* the copy holds the job's total (a tree's RESULT stored) */
        int64_t pending;                      /* open: every member heard PENDING; sent up: repeats left + 1 */
        int64_t last;                         /* the worker_id whose UPDATE completed the copy (trees) */
    };
    struct hina_counters {                    /* COUNTERS */
        int64_t frames;                       /* frames seen */
        int64_t drops[16];                    /* DROP_REASONS: by reason; [0] unused */
    };

A source id is an integer a backend computes from what its kernel sees:
a UDP address (`udp_source_id`: IPv4 address and port), a switch port
(`port_source_id`), a worker behind a port (`raw_source_id`: the port, its
IPv4 address and UDP port), or a number the pipeline gives out to any
other source (from `OTHER_IDS`).  `NO_MEMBER` fills a worker or parent
that is not there, `NO_SOURCE` is a frame's source that matches none.

A worker name (`worker_name`) is the 16 bytes of a struct sockaddr_in for
a member at a UDP address (`hina.wire.sockio.sockaddr_in`), or for one
behind a port its MAC, IPv4 address and UDP port (`RAW_NAME`).
"""

from __future__ import annotations

import socket

import numpy as np

from hina.control.config import MAX_PARENTS
from hina.wire.frames import IP_BYTES, MAC_BYTES, PORT_BYTES
from hina.wire.headers import DROP_REASONS, MAX_WORKERS, field_offsets
from hina.wire.sockio import SOCKADDR_IN_BYTES

JOB = np.dtype([
    ("workers", np.int64), ("words", np.int64), ("frame_bytes", np.int64), ("slot_base", np.int64),
    ("slots", np.int64), ("full", np.int64), ("needed", np.int64), ("parents", np.int64), ("member", np.int64),
    ("copy_base", np.int64), ("value_base", np.int64),
    ("worker_source", np.int64, (MAX_WORKERS,)), ("parent_source", np.int64, (MAX_PARENTS,)),
    ("worker_name", np.uint8, (MAX_WORKERS, SOCKADDR_IN_BYTES)),
    ("parent_name", np.uint8, (MAX_PARENTS, SOCKADDR_IN_BYTES)),
    ("updates", np.int64), ("results", np.int64), ("resends", np.int64), ("sent_up", np.int64),
    ("resent_up", np.int64), ("pending", np.int64), ("drops", np.int64, (DROP_REASONS,)),
])
COPY = np.dtype([("bitmap", np.int64), ("counter", np.int64), ("offset", np.int64), ("phase", np.int64),
                 ("total", np.int64), ("pending", np.int64), ("last", np.int64)])
COUNTERS = np.dtype([("frames", np.int64), ("drops", np.int64, (DROP_REASONS,))])
JOB_IDS = 1 << 16  # job_index's rows: every job_id
NO_JOB = -1

# a worker behind a port, in its `worker_name`: (name, bits), in order
RAW_NAME: tuple[tuple[str, int], ...] = (("mac", 8 * MAC_BYTES), ("ip", 8 * IP_BYTES), ("udp_port", 8 * PORT_BYTES))
NAME_MAC_AT, NAME_IP_AT, NAME_PORT_AT = (field_offsets(RAW_NAME)[f] for f in ("mac", "ip", "udp_port"))



def raw_name(mac: bytes, ip: bytes, udp_port: int) -> bytes:
    """A worker behind a port as a `RAW_NAME`: its MAC and IPv4 address (packed) and UDP port."""
    return mac + ip + udp_port.to_bytes(PORT_BYTES, "big")


NO_MEMBER = -2
NO_SOURCE = -1  # a source no member has: matches no worker_source
PORT_IDS = 1 << 48  # source ids below are UDP addresses (48 bits: address, port); from here, ports
OTHER_IDS = 1 << 49  # from here, ids given out to any other kind of source (an in-process port name)
RAW_IDS = 1 << 62  # from here, workers behind a port: the port above bit 48, IPv4 address and UDP port below
RAW_PORTS = 1 << 13  # raw ids hold ports below this (BMv2's are 9 bits)


def udp_source_id(host: str, port: int) -> int | None:
    """The source id of UDP address (host, port): its IPv4 address and port in one integer, as
    `batch.udp_batch` reads them from a received sockaddr_in; None unless `host` is a dotted IPv4
    address (a received datagram's source always is: names are never looked up)."""
    try:
        addr = socket.inet_pton(socket.AF_INET, host)
    except (OSError, TypeError):
        return None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 1 << 16:
        return None
    return int.from_bytes(addr, "big") << 16 | port


def port_source_id(port: int) -> int:
    """The source id of a switch port (raw frames): a neighbouring switch, whatever its address."""
    return PORT_IDS | port


def raw_source_id(port: int, host: str, udp_port: int) -> int | None:
    """The source id of a worker behind switch port `port` sending from IPv4 `host`, UDP port `udp_port`
    (raw frames), as `batch.raw_batch` computes it from a frame; None if it is not one."""
    udp = udp_source_id(host, udp_port)
    if udp is None or isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < RAW_PORTS:
        return None
    return RAW_IDS | port << 48 | udp


class Registers:
    """The registers for a set of jobs (the module's docstring says what each holds), and the same memory as
    bytes: what the compiled entry points take (`kernel_args`).  numba's dispatcher types a plain array
    almost for free and a structured one at 0.1-0.15 us a call (`hina.host.sendplane` says more), so the
    entry points take bytes and name them again inside."""

    def __init__(self, jobs: int, copies: int, values: int, counters: np.ndarray) -> None:
        self.job_index = np.full(JOB_IDS, NO_JOB, np.int32)
        self.jobs = np.zeros(jobs, JOB)
        self.jobs["worker_source"] = self.jobs["parent_source"] = NO_MEMBER
        self.copies = np.zeros(copies, COPY)
        self.values = np.zeros(values, np.int32)
        self.counters = counters  # one COUNTERS, kept across layouts
        self.kernel_args = (self.job_index, self.jobs.view(np.uint8), self.copies.view(np.uint8), self.values,
                            counters.view(np.uint8))


def counters() -> np.ndarray:
    """A fresh `COUNTERS` (an array of one, so that its bytes can be handed to the kernels)."""
    return np.zeros(1, COUNTERS)
