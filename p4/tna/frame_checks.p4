/* hina on Tofino: what a hina frame must be before it meets a slot, in p4/hina.p4's order, so that a
 * frame wrong in several ways is counted under the same reason on every target.  Only a frame that
 * passes every check (drop_reason stays DROP_NONE) reaches the slot's registers. */
#ifndef _HINA_TNA_FRAME_CHECKS_P4_
#define _HINA_TNA_FRAME_CHECKS_P4_

#include "headers.p4"

control FrameChecks(inout headers_t hdr, inout metadata_t meta,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {
    /* The lengths and the word count against the constants, by range tables of constant entries: a
     * condition (a gateway) that compares a field with a constant by < or > read more than a
     * gateway's 4 bytes and 12 bits of fields here. */
    bit<2> length = 0;   /* 0: short of a header, 1: short of the words, 2: exact, 3: too long */
    bool count_over = false;
    action length_is(bit<2> what) {
        length = what;
    }
    action count_is(bool over) {
        count_over = over;
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
    apply {
        udp_length.apply();
        word_count.apply();
        /* the rest of the arithmetic the checks and the bitmap need (job_config started it) */
        if (meta.job_hit) {
            /* a stage after job_config's slot_rel (the condition makes it an action of its own: one
             * action may not use what it computes) */
            meta.slot_over = meta.slot_rel - meta.slot_count;
        }
        bool update = hdr.hina.msg_type == MSG_UPDATE;
        bool result = hdr.hina.msg_type == MSG_RESULT;

        /* p4/hina.p4's else-if chain, as independent tests from the last to the first, so that the first
         * that holds is the one left in drop_reason: a Tofino condition (a gateway) reads at most 4 bytes
         * and 12 bits of fields, and each test of a chain would carry every test before it */
        if (result) {
            if (meta.has_parent == 0) {
                meta.drop_reason = DROP_NOT_PARENT;
            }
            if (meta.parent_diff != 0) {
                meta.drop_reason = DROP_NOT_PARENT;
            }
        }
        if (meta.slot_rel[31:31] == 1) {
            meta.drop_reason = DROP_BAD_SLOT;       /* below slot_base */
        }
        if (meta.slot_over[31:31] == 0) {
            meta.drop_reason = DROP_BAD_SLOT;       /* at slot_base + slot_count and past */
        }
        if (count_over) {
            meta.drop_reason = DROP_BAD_COUNT;
        }
        if (update && !meta.allowed) {
            meta.drop_reason = DROP_UNAUTHORIZED;
        }
        if (update) {
            if (hdr.hina.worker_id[7:7] == 1) {
                meta.drop_reason = DROP_BAD_WORKER;
            }
            if (meta.worker_over[7:7] == 0) {
                meta.drop_reason = DROP_BAD_WORKER;     /* worker_id >= workers */
            }
        }
        if (length == 3) {
            meta.drop_reason = DROP_BAD_LENGTH;
        }
        if (length == 1) {
            meta.drop_reason = DROP_TRUNCATED;
        }
        if (ig_prsr_md.parser_err != 0) {
            meta.drop_reason = DROP_TRUNCATED;
        }
        if (!hdr.hi.isValid()) {
            meta.drop_reason = DROP_TRUNCATED;
        }
        if (result && meta.parents == 0) {
            meta.drop_reason = DROP_BAD_MSG_TYPE;   /* only a switch with a parent takes RESULTs */
        }
        if (!meta.job_hit) {
            meta.drop_reason = DROP_UNKNOWN_JOB;
            if (result) {
                meta.drop_reason = DROP_BAD_MSG_TYPE;
            }
        }
#ifdef HINA_ADD_ONLY
        if (hdr.hina.op != OP_ADD) {
#else
        if (hdr.hina.op > OP_MAX) {
#endif
            meta.drop_reason = DROP_BAD_OP;
        }
        if (!update && !result) {
            meta.drop_reason = DROP_BAD_MSG_TYPE;
        }
        if (meta.checksum_error) {
            meta.drop_reason = DROP_BAD_CHECKSUM;
        }
        if (length == 0) {
            meta.drop_reason = DROP_TRUNCATED;
        }
        if (!hdr.hina.isValid()) {
            meta.drop_reason = DROP_TRUNCATED;
        }
    }
}

#endif
