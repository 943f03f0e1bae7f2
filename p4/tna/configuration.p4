/* hina on Tofino (TNA / T2NA): constants the data plane is compiled with, and why.
 * The wire codes (port, message types, ops, flags, drop reasons) are wire/headers.py's, as in
 * p4/configuration.p4: tests/p4/test_tofino.py checks every one against that declaration. */
#ifndef _HINA_TNA_CONFIGURATION_P4_
#define _HINA_TNA_CONFIGURATION_P4_

/* UDP destination port that marks hina traffic ("NA"). */
const bit<16> HINA_PORT = 0x4E41;

/* K: 32-bit words per frame, a compile-time constant as on BMv2 (K = 32, so a job can cross a BMv2 and
 * a Tofino; -DHINA_WORDS=n builds the wider variants docs/tofino.md measures).  The words
 * are kept in PAIRS: word i and word i + K/2 share one 64-bit register, one stateful ALU (SALU).  A
 * Tofino 1 SALU updates both halves of its pair in one pass but hands only ONE 32-bit word back to
 * the packet; a copy's result therefore leaves in two passes (the second pass reads the other half),
 * and since a completed copy needs a second pass anyway (copy_state.p4), that costs nothing more.
 * Tofino 2 could hand both halves back; the program keeps one design for both.  K/2 SALUs, four per
 * stage: K = 32 takes 16 SALUs, 4 stages. */
#ifndef HINA_WORDS
#define HINA_WORDS 32
#endif
#define HINA_HALF (HINA_WORDS / 2)
const bit<16> HINA_UDP_LENGTH = 8 + 16 + 4 * HINA_WORDS;   /* udp.length of every hina frame */
const bit<16> HINA_MIN_UDP_LENGTH = 8 + 16;                /* a hina header at least */

/* Slots: 4096 slots (two copies each), as on BMv2 (control/ledger.py's DEFAULT_SPACE, which
 * tests/wire/test_declared_once.py holds equal to HINA_SLOTS here and in p4/configuration.p4).  The arrival
 * bitmaps and copy states are indexed by slot (both copies in one entry: a register is touched once
 * per pass, and an arrival must set its bit in one copy and clear it in the other); the run tags and
 * the values by copy (slot * 2 + version).  A 64-bit register of 8192 entries is 4 SRAM blocks (1K x 128
 * bits each, and a spare) of a stage's 80 on Tofino 1, so four value SALUs fit a stage with room. */
#define HINA_SLOTS 4096
#define HINA_COPIES 8192
typedef bit<12> slot_index_t;    /* slot mod 4096 (a slot outside the job's range never reaches a register) */
typedef bit<13> copy_index_t;    /* slot * 2 + version */

/* The second pass (copy_state.p4, value_processor.p4) goes through the pipe's recirculation port: a
 * port in loopback, in the same pipe (registers are per pipe).  Tofino 1: port 68 of each pipe (the
 * pipe's number in bits 8:7).  Tofino 2: the pipe-local port 6 by default; either can be overridden
 * with -DHINA_RECIRC_PORT=n (a front-panel port put in loopback works too). */
#ifndef HINA_RECIRC_PORT
#if __TARGET_TOFINO__ == 2
#define HINA_RECIRC_PORT 6
#else
#define HINA_RECIRC_PORT 68
#endif
#endif

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

/* Drop reasons: the index into the `drops` counter (hina.wire.headers.Drop). */
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

/* The bridge header's `pass`: 0 a frame from a port; else the second pass it is in, and what it finishes. */
typedef bit<4> pass_t;
const pass_t PASS_NONE = 0;
const pass_t PASS_COMPLETE = 1;    /* mark the copy complete, read the other half, multicast (or up) */
const pass_t PASS_RESEND = 2;      /* read the other half, unicast back to the sender (or up again) */
const pass_t PASS_TOTAL = 3;       /* mark the copy as holding the total, multicast it down */

/* What a value SALU does (value_processor.p4), by one of the four RegisterActions a register may
 * have: the reads too (by OR and MAX fed words that leave the pair as it is). */
typedef bit<3> value_op_t;
const value_op_t VALUE_NONE = 0;
const value_op_t VALUE_WRITE = 1;    /* first arrival, or the parent's total: both halves written */
const value_op_t VALUE_ADD = 2;      /* both halves combined (int32, wrapping); hands back the low half */
const value_op_t VALUE_OR = 3;       /* both halves combined; hands back the HIGH half */
const value_op_t VALUE_MAX = 4;      /* both halves combined (signed); hands back the low half */
const value_op_t VALUE_READ_HI = 5;  /* hands back the high half, the pair unchanged */
const value_op_t VALUE_READ_LO = 6;  /* hands back the low half, the pair unchanged */

/* -DHINA_ADD_ONLY: a dense-only variant (ADD, as SwitchML), only to measure what OR and MAX cost
 * (docs/tofino.md): OR and MAX frames are refused (BAD_OP) and the reads have RegisterActions of their
 * own.  Never the program a switch runs. */
const int<32> INT32_MIN = -2147483648;

/* Where a copy stands (copy_state.p4): each state adds bits to the one before it, so an arrival can OR
 * OPEN in whatever it finds. */
const bit<8> STATE_FREE = 0;    /* empty: the next UPDATE takes it */
const bit<8> STATE_OPEN = 1;    /* taken, not complete */
const bit<8> STATE_DONE = 3;    /* complete (below the root: sent up, no total yet) */
const bit<8> STATE_TOTAL = 7;   /* complete, holding the parent's total */

#endif
