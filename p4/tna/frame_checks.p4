/* hina on Tofino: what a hina frame must be before it meets a slot, in p4/hina.p4's order, so that a
 * frame wrong in several ways is counted under the same reason on every target.  Only a frame that
 * passes every check (drop_reason stays DROP_NONE) reaches the slot's registers.
 *
 * BMv2's else-if chain is ONE ternary table here (`checks`): its keys are the checks' inputs, each
 * reduced to the bits a check reads (a header's validity, a length class, a sign bit, a flag), and its
 * constant entries, in the chain's order, are the failures; the first entry that matches (the highest
 * priority) names the reason, and a frame no entry matches passes.  Written as tests, the chain took a
 * stage per test on Tofino: every test writes drop_reason after the one before it. */
#ifndef _HINA_TNA_FRAME_CHECKS_P4_
#define _HINA_TNA_FRAME_CHECKS_P4_

#include "headers.p4"

/* what kind of message msg_type says (`kind` below) */
const bit<2> KIND_BAD = 0;
const bit<2> KIND_UPDATE = 1;
const bit<2> KIND_RESULT = 2;

control FrameChecks(inout headers_t hdr, inout metadata_t meta,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {
    /* The lengths, the word count, the message type and the op against the constants, by tables of
     * constant entries in the first stage, so that `checks` matches a class of each. */
    bit<2> length = 0;   /* 0: short of a header, 1: short of the words, 2: exact, 3: too long */
    bool count_over = false;
    bit<2> kind = KIND_BAD;
    bool op_bad = true;
    action length_is(bit<2> what) {
        length = what;
    }
    action count_is(bool over) {
        count_over = over;
    }
    action kind_is(bit<2> what) {
        kind = what;
    }
    action op_is(bool bad) {
        op_bad = bad;
    }
    table udp_length {
        key = { hdr.udp.len: range; }
        actions = { length_is; }
        const entries = {
            0 .. HINA_MIN_UDP_LENGTH - 1: length_is(0);
            HINA_MIN_UDP_LENGTH .. HINA_UDP_LENGTH - 1: length_is(1);
            HINA_UDP_LENGTH .. HINA_UDP_LENGTH: length_is(2);
            HINA_UDP_LENGTH + 1 .. 0xFFFF: length_is(3);
        }
        default_action = length_is(0);
        size = 4;
    }
    table word_count {
        key = { hdr.hina.count: range; }
        actions = { count_is; }
        const entries = {
            0 .. HINA_WORDS: count_is(false);
            HINA_WORDS + 1 .. 0xFF: count_is(true);
        }
        default_action = count_is(true);
        size = 2;
    }
    table message_kind {
        key = { hdr.hina.msg_type: exact; }
        actions = { kind_is; }
        const entries = {
            MSG_UPDATE: kind_is(KIND_UPDATE);
            MSG_RESULT: kind_is(KIND_RESULT);
        }
        default_action = kind_is(KIND_BAD);
        size = 2;
    }
    table operator {
        key = { hdr.hina.op: exact; }
        actions = { op_is; }
        const entries = {
            OP_ADD: op_is(false);
#ifndef HINA_ADD_ONLY
            OP_OR: op_is(false);
            OP_MAX: op_is(false);
#endif
        }
        default_action = op_is(true);
        size = 4;
    }

    action reason(drop_reason_t why) {
        meta.drop_reason = why;
    }
    action pass() {
        meta.drop_reason = DROP_NONE;
    }
    table checks {
        key = {
            hdr.hina.isValid(): ternary;
            length: ternary;
            meta.checksum_error: ternary;
            kind: ternary;
            op_bad: ternary;
            meta.job_hit: ternary;
            meta.parents: ternary;
            hdr.hi.isValid(): ternary;
            ig_prsr_md.parser_err: ternary;
            hdr.hina.worker_id[7:7]: ternary;
            meta.worker_over[7:7]: ternary;     /* clear when worker_id >= workers */
            meta.allowed_port: ternary;
            meta.allowed_address: ternary;
            count_over: ternary;
            meta.slot_rel[31:31]: ternary;      /* set when the slot is below the job's range */
            meta.slot_over[31:31]: ternary;     /* clear when it is at the range's end or past it */
            meta.has_parent: ternary;
            meta.parent_diff: ternary;          /* 0 when the frame came in from the slot's parent */
        }
        actions = { reason; pass; }
        /* in p4/hina.p4's order: the first entry that matches wins */
        const entries = {
            (false, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, 0, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, true, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_BAD_CHECKSUM);
            (_, _, _, KIND_BAD, _, _, _, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_BAD_MSG_TYPE);
            (_, _, _, _, true, _, _, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_BAD_OP);
            (_, _, _, KIND_RESULT, _, false, _, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_BAD_MSG_TYPE);
            (_, _, _, _, _, false, _, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_UNKNOWN_JOB);
            /* only a switch with a parent takes RESULTs */
            (_, _, _, KIND_RESULT, _, _, 0, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_BAD_MSG_TYPE);
            (_, _, _, _, _, _, _, false, _, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            /* a parser error (parser_err != 0: an entry a bit) */
            (_, _, _, _, _, _, _, _, 0x0001 &&& 0x0001, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0002 &&& 0x0002, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0004 &&& 0x0004, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0008 &&& 0x0008, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0010 &&& 0x0010, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0020 &&& 0x0020, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0040 &&& 0x0040, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0080 &&& 0x0080, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0100 &&& 0x0100, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0200 &&& 0x0200, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0400 &&& 0x0400, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x0800 &&& 0x0800, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x1000 &&& 0x1000, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x2000 &&& 0x2000, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x4000 &&& 0x4000, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, _, _, _, _, _, _, _, 0x8000 &&& 0x8000, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_TRUNCATED);
            (_, 3, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_BAD_LENGTH);
            (_, _, _, KIND_UPDATE, _, _, _, _, _, 1, _, _, _, _, _, _, _, _): reason(DROP_BAD_WORKER);
            (_, _, _, KIND_UPDATE, _, _, _, _, _, _, 0, _, _, _, _, _, _, _): reason(DROP_BAD_WORKER);
            (_, _, _, KIND_UPDATE, _, _, _, _, _, _, _, 0, 0, _, _, _, _, _): reason(DROP_UNAUTHORIZED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, true, _, _, _, _): reason(DROP_BAD_COUNT);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, 1, _, _, _): reason(DROP_BAD_SLOT);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _): reason(DROP_BAD_SLOT);
            /* a RESULT only from the slot's parent, on the parent's port */
            (_, _, _, KIND_RESULT, _, _, _, _, _, _, _, _, _, _, _, _, 0, _): reason(DROP_NOT_PARENT);
            (_, _, _, KIND_RESULT, _, _, _, _, _, _, _, _, _, _, _, _, _, 0): pass();
            (_, _, _, KIND_RESULT, _, _, _, _, _, _, _, _, _, _, _, _, _, _): reason(DROP_NOT_PARENT);
        }
        default_action = pass();
    }

    apply {
        udp_length.apply();
        word_count.apply();
        message_kind.apply();
        operator.apply();
        if (meta.job_hit) {
            /* a stage after job_config's slot_rel (the condition makes it an action of its own: one
             * action may not use what it computes) */
            meta.slot_over = meta.slot_rel - meta.slot_count;
        }
        checks.apply();
    }
}

#endif
