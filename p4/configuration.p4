/* hina: constants the data plane is compiled with, and why.
 * The codes (port, message types, ops, flags, drop reasons) are wire/headers.py's:
 * tests/wire/test_declared_once.py checks every one. */
#ifndef _HINA_CONFIGURATION_P4_
#define _HINA_CONFIGURATION_P4_

/* UDP destination port that marks hina traffic ("NA"). */
const bit<16> HINA_PORT = 0x4E41;

/* K: 32-bit words per packet.  One fixed K keeps the parser and the value
 * processor straight-line code: 32 words x 4 bytes + 16-byte header =
 * 144-byte UDP payloads, small enough for BMv2 and a real switch's PHV. */
#define HINA_WORDS 32
const bit<16> HINA_UDP_LENGTH = 8 + 16 + 4 * HINA_WORDS;   /* udp.length of every hina frame */
const bit<16> HINA_MIN_UDP_LENGTH = 8 + 16;                /* a hina header at least */

/* M(i, b) for each bit i of a 32-bit bitmap, b = 1 << i: a table matches "bit i of a field is set" with one
 * ternary entry a bit (p4/tna/headers.p4 has the same list for the TNA program) */
#define HINA_EACH_BIT(M) \
    M(0, 0x00000001) M(1, 0x00000002) M(2, 0x00000004) M(3, 0x00000008) \
    M(4, 0x00000010) M(5, 0x00000020) M(6, 0x00000040) M(7, 0x00000080) \
    M(8, 0x00000100) M(9, 0x00000200) M(10, 0x00000400) M(11, 0x00000800) \
    M(12, 0x00001000) M(13, 0x00002000) M(14, 0x00004000) M(15, 0x00008000) \
    M(16, 0x00010000) M(17, 0x00020000) M(18, 0x00040000) M(19, 0x00080000) \
    M(20, 0x00100000) M(21, 0x00200000) M(22, 0x00400000) M(23, 0x00800000) \
    M(24, 0x01000000) M(25, 0x02000000) M(26, 0x04000000) M(27, 0x08000000) \
    M(28, 0x10000000) M(29, 0x20000000) M(30, 0x40000000) M(31, 0x80000000)

/* Slots: each has two copies (the version bit), each copy a bitmap, a
 * counter, an offset and 32 values.  4096 slots = 8192 copies = 1 MiB of
 * values: plenty of windows for BMv2, which keeps registers in DRAM.
 * HINA_SLOTS is the slot space control/ledger.py hands out (DEFAULT_SPACE)
 * and HINA_WORDS control/controller.py's P4_WORDS: tests/wire/test_declared_once.py
 * checks both, and that the copies and values below follow from them. */
#define HINA_SLOTS 4096
#define HINA_COPIES 8192
#define HINA_VALUES 262144   /* HINA_COPIES * HINA_WORDS */

/* msg_type, op, flags (hina header). */
const bit<8> MSG_UPDATE = 0;
const bit<8> MSG_RESULT = 1;
const bit<8> OP_ADD = 0;
const bit<8> OP_OR = 1;
const bit<8> OP_MAX = 2;
const bit<8> FLAG_RESEND = 1;
const bit<8> FLAG_STALE_RUN = 2;   /* refused: the copy holds another run's chunk */
const bit<8> FLAG_PENDING = 4;     /* a repeat met a copy still waiting: word 0 says who is counted */
/* a total down a tree names the worker whose UPDATE completed the job's copy, or this: another subtree's */
const bit<8> OTHER_SUBTREE = 0xFF;

/* Drop reasons: the index into the `drops` counter; the emulator's
 * hina.wire.headers.Drop declares them, and the emulator counts by it. */
typedef bit<8> drop_reason_t;
const drop_reason_t DROP_NONE = 0;
const drop_reason_t DROP_TRUNCATED = 1;
const drop_reason_t DROP_BAD_LENGTH = 2;
const drop_reason_t DROP_BAD_MSG_TYPE = 3;
const drop_reason_t DROP_BAD_OP = 4;
const drop_reason_t DROP_UNKNOWN_JOB = 5;
const drop_reason_t DROP_BAD_WORKER = 6;
const drop_reason_t DROP_UNAUTHORIZED = 7;
const drop_reason_t DROP_BAD_COUNT = 8;
const drop_reason_t DROP_BAD_SLOT = 9;
const drop_reason_t DROP_STALE = 10;
const drop_reason_t DROP_DUPLICATE = 11;
const drop_reason_t DROP_BAD_CHECKSUM = 12;
const drop_reason_t DROP_NO_ROUTE = 13;
const drop_reason_t DROP_STALE_RUN = 14;   /* counted, and refused to every member */
const drop_reason_t DROP_NOT_PARENT = 15;  /* a RESULT from a port that is not the slot's parent */
#define DROP_REASONS 16

/* What the arrival bitmap decided for an UPDATE, or (trees) for a RESULT from the parent. */
typedef bit<4> verdict_t;
const verdict_t VERDICT_DROP = 0;       /* drop_reason says why */
const verdict_t VERDICT_CONSUMED = 1;   /* combined, copy not complete yet */
const verdict_t VERDICT_COMPLETE = 2;   /* combined, copy complete: multicast RESULT */
const verdict_t VERDICT_RESEND = 3;     /* duplicate for a complete copy: unicast RESULT */
const verdict_t VERDICT_STALE_RUN = 4;  /* the copy holds another run's chunk: refuse to every member */
const verdict_t VERDICT_SEND_UP = 5;    /* combined, copy complete, switch has a parent: ONE UPDATE up */
const verdict_t VERDICT_RESEND_UP = 6;  /* duplicate for a copy sent up, no total yet: the partial up again */
const verdict_t VERDICT_TOTAL = 7;      /* the parent's RESULT for a copy sent up: store, multicast down */
const verdict_t VERDICT_STALE_DOWN = 8; /* the parent refused the partial (STALE_RUN): multicast it down */
const verdict_t VERDICT_PENDING = 9;    /* duplicate for a copy still waiting: PENDING to every member (the first) */
const verdict_t VERDICT_PENDING_BACK = 10;  /* the same, every member told already: PENDING to the sender */
const verdict_t VERDICT_PENDING_DOWN = 11;  /* the parent's PENDING counts this switch: down to every child */

#endif
