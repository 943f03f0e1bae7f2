/* hina on Tofino: the slot protocol's rules, p4/arrival_bitmap.p4's, on what the registers said.
 *
 * ValuePlan (before the value stages; the copy's state and tags are known, the bitmap not yet):
 *   UPDATE, tags differ          -> nothing (STALE_RUN)
 *   UPDATE, FREE copy            -> WRITE (first arrival)
 *   UPDATE, OPEN copy            -> the frame's op, unless the sender already arrived (the guard:
 *                                   the value stages run only if `mine` is 0)
 *   UPDATE, complete copy        -> read (a resend, or a late frame: harmless when it is dropped)
 *   RESULT from the parent       -> WRITE the total, if it answers this complete copy
 *   second pass                  -> read the half the first pass did not hand back
 * Verdict (after the bitmap):
 *   UPDATE: tags differ -> STALE_RUN, to every member; FREE -> written, complete if the sender is the
 *   only child; OPEN -> DUPLICATE if the sender already arrived, else combined, complete when its
 *   bit was the last one missing; complete -> RESEND (root, or the total is held) or RESEND_UP
 *   (sender's bit set) or STALE (sender's bit clear: it left a copy that went up and has no total).
 *   RESULT: flagged STALE_RUN -> STALE_DOWN; the copy not complete or its tags differ -> STALE;
 *   the total held already -> DUPLICATE; else TOTAL.
 * Deliver: the verdict as frames.  A completed copy, a resend and a stored total take a second pass
 * (recirculation): it marks the copy (copy_state.p4) and reads the other half of each pair
 * (value_processor.p4) before the frame leaves. */
#ifndef _HINA_TNA_SLOT_RULES_P4_
#define _HINA_TNA_SLOT_RULES_P4_

#include "headers.p4"

#define HINA_ZERO_BOTH(i) hdr.lo.w##i = 0; hdr.hi.w##i = 0;
#define HINA_ZERO_HI(i) hdr.hi.w##i = 0;
#define HINA_MIN_LO(i) hdr.lo.w##i = INT32_MIN;

control ValuePlan(inout headers_t hdr, inout metadata_t meta) {
    action none() {
        meta.value_op = VALUE_NONE;
    }
    action write() {
        meta.value_op = VALUE_WRITE;
    }
    action combine(value_op_t op) {
        meta.value_op = op;
        meta.guard = 1;
    }
    /* a complete copy: hand back the high halves now, the low halves in the second pass */
    action read_both() {
        meta.value_op = VALUE_READ_HI;
#ifndef HINA_ADD_ONLY
        HINA_EACH_WORD(HINA_ZERO_BOTH)
#endif
    }
    /* second pass, after WRITE, ADD or MAX handed back the low halves (still in the frame) */
    action read_hi() {
        meta.value_op = VALUE_READ_HI;
#ifndef HINA_ADD_ONLY
        HINA_EACH_WORD(HINA_ZERO_HI)
#endif
    }
    /* second pass, after OR handed back the high halves, or after read_both */
    action read_lo() {
        meta.value_op = VALUE_READ_LO;
#ifndef HINA_ADD_ONLY
        HINA_EACH_WORD(HINA_MIN_LO)
#endif
    }
    table value_plan {
        key = {
            hdr.bridge.pass: ternary;
            hdr.bridge.read_lo: ternary;
            hdr.hina.msg_type: ternary;
            hdr.hina.op: ternary;
            hdr.hina.flags: ternary;
            meta.state: ternary;
            meta.tags_ok: ternary;
        }
        actions = { none; write; combine; read_both; read_hi; read_lo; }
        const entries = {
            /* second pass */
            (PASS_COMPLETE, 0, _, _, _, _, _): read_hi();
            (PASS_COMPLETE, 1, _, _, _, _, _): read_lo();
            (PASS_RESEND, _, _, _, _, _, _): read_lo();
            (PASS_TOTAL, _, _, _, _, _, _): none();
            /* an UPDATE */
            (PASS_NONE, _, MSG_UPDATE, _, _, _, 0): none();                       /* STALE_RUN */
            (PASS_NONE, _, MSG_UPDATE, _, _, STATE_FREE, 1): write();
            (PASS_NONE, _, MSG_UPDATE, OP_ADD, _, STATE_OPEN, 1): combine(VALUE_ADD);
            (PASS_NONE, _, MSG_UPDATE, OP_OR, _, STATE_OPEN, 1): combine(VALUE_OR);
            (PASS_NONE, _, MSG_UPDATE, OP_MAX, _, STATE_OPEN, 1): combine(VALUE_MAX);
            (PASS_NONE, _, MSG_UPDATE, _, _, STATE_DONE, 1): read_both();
            (PASS_NONE, _, MSG_UPDATE, _, _, STATE_TOTAL, 1): read_both();
            /* the parent's RESULT: the total, where it answers a copy that went up */
            (PASS_NONE, _, MSG_RESULT, _, FLAG_STALE_RUN &&& FLAG_STALE_RUN, _, _): none();
            (PASS_NONE, _, MSG_RESULT, _, _, STATE_DONE, 1): write();
        }
        default_action = none();
    }
    apply {
        meta.guard = 0;
        value_plan.apply();
    }
}

control Verdict(inout headers_t hdr, inout metadata_t meta) {
    /* `mine` by a table's action: the compiler folds a plain assignment into the conditions that test it,
     * and a condition (a gateway) cannot AND two fields */
    action set_mine() {
        meta.mine = meta.seen & meta.worker_bit;
    }
    table sender_arrived {
        actions = { set_mine; }
        default_action = set_mine();
        size = 1;
    }
    apply {
        sender_arrived.apply();
        if (meta.claim == 1) {
            meta.rest = meta.need;               /* a fresh bitmap: complete if the sender is the only child */
        } else {
            meta.rest = meta.seen ^ meta.need;   /* 0: the sender's bit was the last one missing */
        }
        /* (if/else, not `? :`: the back end makes a conditional expression an action, and an action
         * compares only its own parameters) */
        bool total_held = false;
        if (meta.has_parent == 0) {
            total_held = true;
        } else if (meta.state == STATE_TOTAL) {
            total_held = true;
        }
        if (hdr.bridge.pass == PASS_COMPLETE) {
            if (hdr.bridge.to_parent == 1) {
                meta.verdict = VERDICT_SEND_UP;
            } else {
                meta.verdict = VERDICT_COMPLETE;
            }
        } else if (hdr.bridge.pass == PASS_RESEND) {
            if (hdr.bridge.to_parent == 1) {
                meta.verdict = VERDICT_RESEND_UP;
            } else {
                meta.verdict = VERDICT_RESEND;
            }
        } else if (hdr.bridge.pass == PASS_TOTAL) {
            meta.verdict = VERDICT_TOTAL;
        } else if (hdr.hina.msg_type == MSG_RESULT) {   /* from_parent */
            if ((hdr.hina.flags & FLAG_STALE_RUN) != 0) {
                meta.verdict = VERDICT_STALE_DOWN;
                meta.drop_reason = DROP_STALE_RUN;       /* counted on every tier it passes */
            } else if ((meta.state != STATE_DONE && meta.state != STATE_TOTAL) || meta.tags_ok == 0) {
                meta.drop_reason = DROP_STALE;
            } else if (meta.state == STATE_TOTAL) {
                meta.drop_reason = DROP_DUPLICATE;
            } else {
                meta.verdict = VERDICT_TOTAL;
            }
        } else if (meta.tags_ok == 0) {
            meta.verdict = VERDICT_STALE_RUN;
            meta.drop_reason = DROP_STALE_RUN;           /* counted; refused to every member */
        } else if (meta.state == STATE_DONE || meta.state == STATE_TOTAL) {
            if (meta.mine != 0 && total_held) {
                meta.verdict = VERDICT_RESEND;
            } else if (meta.mine != 0) {
                meta.verdict = VERDICT_RESEND_UP;
            } else if (total_held) {
                meta.verdict = VERDICT_RESEND;           /* the sender already left this complete copy */
            } else {
                meta.drop_reason = DROP_STALE;
            }
        } else if (meta.state == STATE_OPEN && meta.mine != 0) {
            meta.drop_reason = DROP_DUPLICATE;
        } else if (meta.rest != 0) {
            meta.verdict = VERDICT_CONSUMED;
        } else if (meta.has_parent == 1) {
            meta.verdict = VERDICT_SEND_UP;
        } else {
            meta.verdict = VERDICT_COMPLETE;
        }
    }
}

control Deliver(inout headers_t hdr, inout metadata_t meta,
                in ingress_intrinsic_metadata_t standard_metadata,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    action multicast() {
        ig_tm_md.mcast_grp_a = meta.group;
        hdr.bridge.is_result = 1;
    }
    /* a frame's second pass: out of its pipe's recirculation port, egress bypassed */
    action recirculate(pass_t pass) {
        ig_tm_md.ucast_egress_port = standard_metadata.ingress_port[8:7] ++ (bit<7>) HINA_RECIRC_PORT;
        ig_tm_md.bypass_egress = 1;
        hdr.bridge.pass = pass;
    }
    /* trees: the copy's words go up to the slot's parent as one UPDATE from this switch's member id */
    action send_up() {
        hdr.hina.msg_type = MSG_UPDATE;
        hdr.hina.worker_id = meta.member;
        hdr.hina.flags = 0;
        ig_tm_md.ucast_egress_port = meta.parent_port;
        hdr.bridge.is_result = 1;
    }
    action drop() {
        ig_dprsr_md.drop_ctl = 1;
    }

    apply {
        if (hdr.bridge.pass == PASS_NONE) {
            if (meta.verdict == VERDICT_STALE_RUN) {
                hdr.hina.msg_type = MSG_RESULT;
                hdr.hina.flags = FLAG_STALE_RUN;
                multicast();
            } else if (meta.verdict == VERDICT_STALE_DOWN) {
                multicast();
            } else if (meta.verdict == VERDICT_COMPLETE || meta.verdict == VERDICT_SEND_UP) {
                hdr.bridge.to_parent = 0;
                if (meta.verdict == VERDICT_SEND_UP) {
                    hdr.bridge.to_parent = 1;
                }
                hdr.bridge.read_lo = 0;
                if (meta.value_op == VALUE_OR) {
                    hdr.bridge.read_lo = 1;   /* OR handed back the high halves */
                }
                recirculate(PASS_COMPLETE);
            } else if (meta.verdict == VERDICT_RESEND || meta.verdict == VERDICT_RESEND_UP) {
                hdr.bridge.to_parent = 0;
                if (meta.verdict == VERDICT_RESEND_UP) {
                    hdr.bridge.to_parent = 1;
                }
                hdr.bridge.read_lo = 1;
                recirculate(PASS_RESEND);
            } else if (meta.verdict == VERDICT_TOTAL) {
                recirculate(PASS_TOTAL);
            } else {
                drop();   /* consumed (nothing leaves), or dropped for drop_reason */
            }
        } else {
            if (meta.verdict == VERDICT_SEND_UP || meta.verdict == VERDICT_RESEND_UP) {
                send_up();
            } else if (meta.verdict == VERDICT_COMPLETE) {
                hdr.hina.msg_type = MSG_RESULT;
                hdr.hina.flags = 0;
                multicast();
            } else if (meta.verdict == VERDICT_RESEND) {
                hdr.hina.msg_type = MSG_RESULT;
                hdr.hina.flags = FLAG_RESEND;
                ig_tm_md.ucast_egress_port = hdr.bridge.ingress_port;
                hdr.bridge.is_result = 1;
                /* back to its address, or the port's host (constants, not a copy of by_address: an action
                 * that writes constants into a container may not also move bits within it) */
                if (hdr.bridge.by_address == 1) {
                    hdr.bridge.to_sender = 1;
                } else {
                    hdr.bridge.to_sender = 0;
                }
            } else {
                hdr.hina.flags = 0;   /* the stored total: a fresh multicast down, whatever the parent's flags */
                multicast();
            }
            hdr.bridge.pass = PASS_NONE;
        }
    }
}

#endif
