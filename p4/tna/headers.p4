/* hina on Tofino: header and metadata declarations.
 * The hina header is wire/headers.py's declaration (FIELDS) bit for bit, as in p4/headers.p4
 * (tests/p4/test_tofino.py checks it field by field).  The K words are two headers of K/2 words,
 * `lo` (words 0 .. K/2-1) and `hi` (words K/2 .. K-1): word i and word K/2 + i share a value register. */
#ifndef _HINA_TNA_HEADERS_P4_
#define _HINA_TNA_HEADERS_P4_

#include "configuration.p4"

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> IPPROTO_UDP = 17;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

header hina_t {
    bit<8>  msg_type;
    bit<8>  op;
    bit<16> job_id;
    bit<8>  worker_id;
    bit<8>  flags;
    bit<1>  version;
    bit<15> slot;
    bit<32> offset;
    bit<16> count;
    bit<16> phase;
}

/* K/2 signed words (the wire's int32), eight at a time so that HINA_WORDS picks the size;
 * HINA_EACH_WORD(M) expands M(nn) for every word number nn of a half, HINA_LATER_WORDS(M) for every one
 * but the first (a PENDING answer writes word 0 on its own). */
#define HINA_EACH_8(M, a, b, c, d, e, f, g, h) M(a) M(b) M(c) M(d) M(e) M(f) M(g) M(h)
#define HINA_E7_01(M) M(01) M(02) M(03) M(04) M(05) M(06) M(07)
#define HINA_E8_08(M) HINA_EACH_8(M, 08, 09, 10, 11, 12, 13, 14, 15)
#define HINA_E8_16(M) HINA_EACH_8(M, 16, 17, 18, 19, 20, 21, 22, 23)
#define HINA_E8_24(M) HINA_EACH_8(M, 24, 25, 26, 27, 28, 29, 30, 31)
#define HINA_E8_32(M) HINA_EACH_8(M, 32, 33, 34, 35, 36, 37, 38, 39)
#define HINA_E8_40(M) HINA_EACH_8(M, 40, 41, 42, 43, 44, 45, 46, 47)
#define HINA_E8_48(M) HINA_EACH_8(M, 48, 49, 50, 51, 52, 53, 54, 55)
#define HINA_E8_56(M) HINA_EACH_8(M, 56, 57, 58, 59, 60, 61, 62, 63)
#if HINA_HALF == 8
#define HINA_LATER_WORDS(M) HINA_E7_01(M)
#elif HINA_HALF == 16
#define HINA_LATER_WORDS(M) HINA_E7_01(M) HINA_E8_08(M)
#elif HINA_HALF == 24
#define HINA_LATER_WORDS(M) HINA_E7_01(M) HINA_E8_08(M) HINA_E8_16(M)
#elif HINA_HALF == 32
#define HINA_LATER_WORDS(M) HINA_E7_01(M) HINA_E8_08(M) HINA_E8_16(M) HINA_E8_24(M)
#elif HINA_HALF == 40
#define HINA_LATER_WORDS(M) HINA_E7_01(M) HINA_E8_08(M) HINA_E8_16(M) HINA_E8_24(M) HINA_E8_32(M)
#elif HINA_HALF == 48
#define HINA_LATER_WORDS(M) HINA_E7_01(M) HINA_E8_08(M) HINA_E8_16(M) HINA_E8_24(M) HINA_E8_32(M) HINA_E8_40(M)
#elif HINA_HALF == 56
#define HINA_LATER_WORDS(M) HINA_E7_01(M) HINA_E8_08(M) HINA_E8_16(M) HINA_E8_24(M) HINA_E8_32(M) HINA_E8_40(M) \
    HINA_E8_48(M)
#elif HINA_HALF == 64
#define HINA_LATER_WORDS(M) HINA_E7_01(M) HINA_E8_08(M) HINA_E8_16(M) HINA_E8_24(M) HINA_E8_32(M) HINA_E8_40(M) \
    HINA_E8_48(M) HINA_E8_56(M)
#else
#error "HINA_WORDS must be a multiple of 16 from 16 to 128"
#endif
#define HINA_EACH_WORD(M) M(00) HINA_LATER_WORDS(M)
#define HINA_ZERO_BOTH(i) hdr.lo.w##i = 0; hdr.hi.w##i = 0;
/* a PENDING answer's words: the copy's arrival bitmap (who is counted) as word 0, the rest 0 */
#define HINA_PENDING_WORDS hdr.lo.w00 = (int<32>) meta.seen; hdr.hi.w00 = 0; HINA_LATER_WORDS(HINA_ZERO_BOTH)

/* M(i, b) for each bit i of a 32-bit worker bitmap, b = 1 << i: a table matches "bit i of a field is set"
 * with one ternary entry a bit (a stage cannot AND two fields, nor shift by one) */
#define HINA_EACH_BIT(M) \
    M(0, 0x00000001) M(1, 0x00000002) M(2, 0x00000004) M(3, 0x00000008) \
    M(4, 0x00000010) M(5, 0x00000020) M(6, 0x00000040) M(7, 0x00000080) \
    M(8, 0x00000100) M(9, 0x00000200) M(10, 0x00000400) M(11, 0x00000800) \
    M(12, 0x00001000) M(13, 0x00002000) M(14, 0x00004000) M(15, 0x00008000) \
    M(16, 0x00010000) M(17, 0x00020000) M(18, 0x00040000) M(19, 0x00080000) \
    M(20, 0x00100000) M(21, 0x00200000) M(22, 0x00400000) M(23, 0x00800000) \
    M(24, 0x01000000) M(25, 0x02000000) M(26, 0x04000000) M(27, 0x08000000) \
    M(28, 0x10000000) M(29, 0x20000000) M(30, 0x40000000) M(31, 0x80000000)
#define HINA_DECLARE(i) int<32> w##i;
header hina_half_t {
    HINA_EACH_WORD(HINA_DECLARE)
}

/* What ingress tells egress, and what a frame carries into its second pass (it goes out of the
 * recirculation port with this header before its Ethernet header, and the parser takes it off again
 * on that port).  Never on a wire. */
header bridge_t {
    /* the port first, at the offset the intrinsic metadata has it (the low 9 bits of 16): an action may
     * copy a field only to the same place in a container when it also writes constants */
    bit<7>   _pad0;
    bit<9>   ingress_port;  /* the port the frame first came in on */
    pass_t   pass;          /* PASS_NONE from a port; else what the second pass finishes */
    bit<1>   is_result;     /* the switch emits a frame (a RESULT, or an UPDATE up): rewrite its addresses */
    bit<1>   to_sender;     /* a RESULT unicast back: addressed to where its UPDATE came from */
    bit<1>   by_address;    /* the sender was authorized by its address and UDP port (worker_addresses) */
    bit<1>   is_flood;      /* a broadcast: never back out of its ingress port */
    bit<1>   to_parent;     /* second pass: the copy's words go up (SEND_UP, RESEND_UP) */
    bit<1>   read_lo;       /* second pass: read the low half of each pair (else the high half) */
    bit<6>   _pad1;
}

struct metadata_t {
    /* from job_config (set_job computes the slot's place in the job's range on the way) */
    bit<8>  workers;
    bit<32> full_mask;      /* the children's bits */
    bit<8>  children;       /* arrivals that complete a copy (pending.p4 counts a sent-up copy's repeats by it) */
    bit<16> group;
    bit<32> slot_count;     /* 32 bits, as slot_base (job_config.p4 says why) */
    bit<8>  parents;        /* 0: this switch is the job's root */
    bit<32> slot_base;
    bit<32> slot_rel;       /* slot - slot_base, 32 bits wide: bit 31 set when the slot is below the range */
    bit<32> slot_over;      /* slot_rel - slot_count: bit 31 set when the slot is below the range's end */
    bit<8>  worker_over;    /* worker_id - workers, 8 bits (no field widened: PHV): with worker_id < 128 and
                             * workers <= 32, bit 7 clear when worker_id >= workers */
    bool    job_hit;
    /* from tree_parent (trees) */
    bit<1>  has_parent;
    bit<9>  parent_port;
    bit<9>  parent_diff;    /* ingress port XOR the parent's port: 0 when the frame came from the parent */
    bit<8>  member;         /* this switch's member id in the parent's job */
    /* from worker_auth */
    bit<32> port_bit;       /* the worker's bit, if known by its port (`workers`) */
    bit<32> address_bit;    /* the worker's bit, if known by its address (`worker_addresses`) */
    bit<32> worker_bit;
    bit<1>  allowed_port;   /* `workers` allowed the sender */
    bit<1>  allowed_address;  /* `worker_addresses` allowed it */
    bit<32> need;           /* full_mask without the sender's bit: the bitmap that this arrival completes */
    /* the slot copy */
    copy_index_t copy;      /* slot * 2 + version: index of the run tags and values */
    bit<8>  state;          /* this copy's state before this frame (copy_state) */
    bit<16> state_arg;      /* what copy_state ORs in (or, second pass, sets) */
    bit<32> phase;          /* hdr.hina.phase, 32 bits wide for the run tags' SALU */
    bit<8>  tags_ok;        /* 1: the copy's offset and phase tag are the frame's (or it just took them) */
    bit<32> bitmap_arg;     /* the sender's bit where it arrives, 0 where the copy is only read */
    bit<32> claim;          /* 1: this frame took an empty copy: its bitmap starts at the sender's bit */
    bit<32> seen;           /* the copy's arrival bitmap before this frame */
    bit<32> mine;           /* seen & worker_bit: the sender already arrived */
    bit<32> rest;           /* seen ^ need: 0 when this arrival completes the copy */
    bit<8>  told;           /* open copy: 1 when every member heard a PENDING for it already; sent up, no
                             * total yet: 1 when this repeat is answered PENDING, not sent up (pending.p4) */
    bit<1>  counted;        /* the parent's PENDING (word 0) counts this switch's member id */
    bit<8>  named;          /* worker_id XOR member: 0 where the parent's total names this switch (completer.p4) */
    value_op_t value_op;
    bit<1>  guard;          /* 1: skip the values if the sender already arrived (a duplicate is never combined) */
    drop_reason_t drop_reason;
    bool    checksum_error;
    bool    to_hina;        /* the parser found UDP to HINA_PORT (a hina frame, whole or cut short) */
}

struct headers_t {
    bridge_t       bridge;
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    udp_t          udp;
    hina_t         hina;
    hina_half_t    lo;
    hina_half_t    hi;
}

#endif
