/* hina on Tofino: the slot protocol's rules, p4/arrival_bitmap.p4's, on what the registers said.
 *
 * ValuePlan (before the value stages; the copy's state and tags are known, the bitmap not yet):
 *   UPDATE, tags differ          -> nothing (STALE_RUN)
 *   UPDATE, FREE copy            -> WRITE (first arrival)
 *   UPDATE, OPEN copy            -> the frame's op, unless the sender already arrived (the guard:
 *                                   the value stages run only if `mine` is 0)
 *   UPDATE, complete copy        -> read (a resend, or a late frame: harmless when it is dropped)
 *   RESULT from the parent       -> WRITE the total, if it answers this complete copy; flagged
 *                                   PENDING, never: read where it does not count this switch
 *   second pass                  -> read the half the first pass did not hand back
 * Deliver's `verdict` (after the bitmap; Arrived reads it):
 *   UPDATE: tags differ -> STALE_RUN, to every member; FREE -> written, complete if the sender is the
 *   only child; OPEN -> DUPLICATE answered PENDING if the sender already arrived (to every member
 *   the first time for the copy, else to the sender: pending.p4), else combined, complete when its
 *   bit was the last one missing; complete -> RESEND (root, or the total is held) or RESEND_UP
 *   (sender's bit set; PENDING back instead for the repeats pending.p4 counts down) or STALE (sender's
 *   bit clear: it left a copy that went up and has no total).
 *   RESULT: flagged STALE_RUN -> STALE_DOWN; the copy not complete or its tags differ -> STALE;
 *   flagged PENDING -> PENDING_DOWN where it counts this switch, else RESEND_UP; the total held
 *   already -> DUPLICATE; else TOTAL (down flagged RESEND where it came so).
 * Each verdict's action is its delivery.  A completed copy, a resend and a stored total take a second pass
 * (recirculation): it marks the copy (copy_state.p4) and reads the other half of each pair
 * (value_processor.p4) before the frame leaves. */
#ifndef _HINA_TNA_SLOT_RULES_P4_
#define _HINA_TNA_SLOT_RULES_P4_

#include "headers.p4"

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
            meta.counted: ternary;
        }
        actions = { none; write; combine; read_both; read_hi; read_lo; }
        const entries = {
            /* second pass */
            (PASS_COMPLETE, 0, _, _, _, _, _, _): read_hi();
            (PASS_COMPLETE, 1, _, _, _, _, _, _): read_lo();
            (PASS_RESEND, _, _, _, _, _, _, _): read_lo();
            (PASS_TOTAL, _, _, _, _, _, _, _): none();
            /* an UPDATE */
            (PASS_NONE, _, MSG_UPDATE, _, _, _, 0, _): none();                       /* STALE_RUN */
            (PASS_NONE, _, MSG_UPDATE, _, _, STATE_FREE, 1, _): write();
            (PASS_NONE, _, MSG_UPDATE, OP_ADD, _, STATE_OPEN, 1, _): combine(VALUE_ADD);
            (PASS_NONE, _, MSG_UPDATE, OP_OR, _, STATE_OPEN, 1, _): combine(VALUE_OR);
            (PASS_NONE, _, MSG_UPDATE, OP_MAX, _, STATE_OPEN, 1, _): combine(VALUE_MAX);
            (PASS_NONE, _, MSG_UPDATE, _, _, STATE_DONE, 1, _): read_both();
            (PASS_NONE, _, MSG_UPDATE, _, _, STATE_TOTAL, 1, _): read_both();
            /* the parent's RESULT: the total, where it answers a copy that went up; its PENDING never
             * stored, and read for sending up again where it does not count this switch */
            (PASS_NONE, _, MSG_RESULT, _, FLAG_STALE_RUN &&& FLAG_STALE_RUN, _, _, _): none();
            (PASS_NONE, _, MSG_RESULT, _, FLAG_PENDING &&& FLAG_PENDING, STATE_DONE, 1, 0): read_both();
            (PASS_NONE, _, MSG_RESULT, _, FLAG_PENDING &&& FLAG_PENDING, _, _, _): none();
            (PASS_NONE, _, MSG_RESULT, _, _, STATE_DONE, 1, _): write();
        }
        default_action = none();
    }
    apply {
        meta.guard = 0;
        value_plan.apply();
    }
}

/* What the bitmap said, for the verdict: `mine` (the sender had arrived already) and `rest` (0: this
 * arrival completes the copy), by a table's actions: the compiler folds plain assignments into the
 * conditions that test them, and a condition (a gateway) cannot AND two fields. */
control Arrived(inout headers_t hdr, inout metadata_t meta) {
    action fresh() {
        meta.mine = meta.seen & meta.worker_bit;
        meta.rest = meta.need;               /* a fresh bitmap: complete if the sender is the only child */
    }
    action arrived() {
        meta.mine = meta.seen & meta.worker_bit;
        meta.rest = meta.seen ^ meta.need;   /* 0: the sender's bit was the last one missing */
    }
    table sender_arrived {
        key = { meta.claim: exact; }
        actions = { fresh; arrived; }
        const entries = {
            1: fresh();
        }
        default_action = arrived();
        size = 1;
    }
    apply {
        sender_arrived.apply();
    }
}

/* The verdict and what leaves, as ONE ternary table whose constant entries are p4/hina.p4's verdict
 * chain in its order (the first entry that matches wins) and whose actions are the deliveries: written
 * as a chain of tests and then a chain of deliveries, they took five stages on Tofino.  `mine` and
 * `rest` are matched as zero (every bit 0) or not (an entry after the zero one, with `_`). */
control Deliver(inout headers_t hdr, inout metadata_t meta,
                in ingress_intrinsic_metadata_t standard_metadata,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* first pass */
    action refuse_stale_run() {                 /* the copy holds another run's chunk: to every member */
        hdr.hina.msg_type = MSG_RESULT;
        hdr.hina.flags = FLAG_STALE_RUN;
        ig_tm_md.mcast_grp_a = meta.group;
        hdr.bridge.is_result = 1;
        meta.drop_reason = DROP_STALE_RUN;      /* counted, and refused */
    }
    action stale_down() {                       /* the parent refused the partial: down to every child */
        ig_tm_md.mcast_grp_a = meta.group;
        hdr.bridge.is_result = 1;
        meta.drop_reason = DROP_STALE_RUN;      /* counted on every tier it passes */
    }
    /* a frame's second pass: out of its pipe's recirculation port, egress bypassed */
    action recirculate_complete(bit<1> to_parent, bit<1> read_lo) {
        ig_tm_md.ucast_egress_port = standard_metadata.ingress_port[8:7] ++ (bit<7>) HINA_RECIRC_PORT;
        ig_tm_md.bypass_egress = 1;
        hdr.bridge.pass = PASS_COMPLETE;
        hdr.bridge.to_parent = to_parent;       /* SEND_UP, else COMPLETE */
        hdr.bridge.read_lo = read_lo;           /* OR handed back the high halves */
    }
    action recirculate_resend(bit<1> to_parent) {
        ig_tm_md.ucast_egress_port = standard_metadata.ingress_port[8:7] ++ (bit<7>) HINA_RECIRC_PORT;
        ig_tm_md.bypass_egress = 1;
        hdr.bridge.pass = PASS_RESEND;
        hdr.bridge.to_parent = to_parent;       /* RESEND_UP, else RESEND */
        hdr.bridge.read_lo = 1;
    }
    action recirculate_total() {
        ig_tm_md.ucast_egress_port = standard_metadata.ingress_port[8:7] ++ (bit<7>) HINA_RECIRC_PORT;
        ig_tm_md.bypass_egress = 1;
        hdr.bridge.pass = PASS_TOTAL;
    }
    action drop_as(drop_reason_t why) {         /* DROP_NONE: consumed, nothing leaves */
        ig_dprsr_md.drop_ctl = 1;
        meta.drop_reason = why;
    }
    /* second pass */
    action send_up() {                          /* the copy's words up to the slot's parent, as one UPDATE */
        hdr.hina.msg_type = MSG_UPDATE;
        hdr.hina.worker_id = meta.member;
        hdr.hina.flags = 0;
        ig_tm_md.ucast_egress_port = meta.parent_port;
        hdr.bridge.is_result = 1;
        hdr.bridge.pass = PASS_NONE;
    }
    /* to every member (child): the completed copy and the stored total (second pass), a PENDING (first);
     * `counted_as` a drop reason where the frame it answers is counted as one (a duplicate) */
    action result_down(bit<8> flags, drop_reason_t counted_as) {
        hdr.hina.msg_type = MSG_RESULT;
        hdr.hina.flags = flags;
        ig_tm_md.mcast_grp_a = meta.group;
        hdr.bridge.is_result = 1;
        hdr.bridge.pass = PASS_NONE;
        meta.drop_reason = counted_as;
    }
    /* back to its sender: a resend (second pass), a PENDING (first); back to its address, or to the port's
     * host (a constant, not a copy of by_address: an action that writes constants into a container may not
     * also move bits within it) */
    action answer_back(bit<8> flags, bit<1> to_sender, drop_reason_t counted_as) {
        hdr.hina.msg_type = MSG_RESULT;
        hdr.hina.flags = flags;
        ig_tm_md.ucast_egress_port = hdr.bridge.ingress_port;
        hdr.bridge.is_result = 1;
        hdr.bridge.to_sender = to_sender;
        hdr.bridge.pass = PASS_NONE;
        meta.drop_reason = counted_as;
    }
    table verdict {
        key = {
            hdr.bridge.pass: ternary;
            hdr.bridge.to_parent: ternary;
            hdr.bridge.by_address: ternary;
            hdr.hina.msg_type: ternary;
            hdr.hina.flags: ternary;
            meta.state: ternary;
            meta.tags_ok: ternary;
            meta.mine: ternary;
            meta.rest: ternary;
            meta.has_parent: ternary;
            meta.value_op: ternary;
            meta.counted: ternary;
            meta.told: ternary;
        }
        actions = { refuse_stale_run; stale_down; recirculate_complete; recirculate_resend; recirculate_total;
                    drop_as; send_up; result_down; answer_back; }
        const entries = {
            /* the second pass: COMPLETE or SEND_UP, RESEND or RESEND_UP, TOTAL (a total the parent sent as a
             * RESEND answers a repeat: it goes down flagged so, any other fresh) */
            (PASS_COMPLETE, 1, _, _, _, _, _, _, _, _, _, _, _): send_up();
            (PASS_COMPLETE, 0, _, _, _, _, _, _, _, _, _, _, _): result_down(0, DROP_NONE);
            (PASS_RESEND, 1, _, _, _, _, _, _, _, _, _, _, _): send_up();
            (PASS_RESEND, 0, 1, _, _, _, _, _, _, _, _, _, _): answer_back(FLAG_RESEND, 1, DROP_NONE);
            (PASS_RESEND, 0, 0, _, _, _, _, _, _, _, _, _, _): answer_back(FLAG_RESEND, 0, DROP_NONE);
            (PASS_TOTAL, _, _, _, FLAG_RESEND &&& FLAG_RESEND, _, _, _, _, _, _, _, _): result_down(FLAG_RESEND, DROP_NONE);
            (PASS_TOTAL, _, _, _, _, _, _, _, _, _, _, _, _): result_down(0, DROP_NONE);
            /* the parent's RESULT: its STALE_RUN refusal; not the copy's chunk (or not complete); its PENDING,
             * down where it counts this switch, else the partial up again; the total held already; the total */
            (PASS_NONE, _, _, MSG_RESULT, FLAG_STALE_RUN &&& FLAG_STALE_RUN, _, _, _, _, _, _, _, _): stale_down();
            (PASS_NONE, _, _, MSG_RESULT, _, _, 0, _, _, _, _, _, _): drop_as(DROP_STALE);
            (PASS_NONE, _, _, MSG_RESULT, FLAG_PENDING &&& FLAG_PENDING, STATE_DONE, _, _, _, _, _, 1, _):
                result_down(FLAG_PENDING, DROP_NONE);
            (PASS_NONE, _, _, MSG_RESULT, FLAG_PENDING &&& FLAG_PENDING, STATE_DONE, _, _, _, _, _, _, _):
                recirculate_resend(1);
            (PASS_NONE, _, _, MSG_RESULT, _, STATE_DONE, _, _, _, _, _, _, _): recirculate_total();
            (PASS_NONE, _, _, MSG_RESULT, _, STATE_TOTAL, _, _, _, _, _, _, _): drop_as(DROP_DUPLICATE);
            (PASS_NONE, _, _, MSG_RESULT, _, _, _, _, _, _, _, _, _): drop_as(DROP_STALE);
            /* an UPDATE into another run's chunk */
            (PASS_NONE, _, _, MSG_UPDATE, _, _, 0, _, _, _, _, _, _): refuse_stale_run();
            /* into a complete copy: a resend where the total is held (the root, or TOTAL), the partial up
             * again where the sender's bit is still set (or PENDING back for the repeats pending.p4 counts
             * down), else it left this copy (STALE) */
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_TOTAL, _, _, _, _, _, _, _): recirculate_resend(0);
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_DONE, _, _, _, 0, _, _, _): recirculate_resend(0);
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_DONE, _, 0, _, _, _, _, _): drop_as(DROP_STALE);
            (PASS_NONE, _, 1, MSG_UPDATE, _, STATE_DONE, _, _, _, _, _, _, 1): answer_back(FLAG_PENDING, 1, DROP_DUPLICATE);
            (PASS_NONE, _, 0, MSG_UPDATE, _, STATE_DONE, _, _, _, _, _, _, 1): answer_back(FLAG_PENDING, 0, DROP_DUPLICATE);
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_DONE, _, _, _, _, _, _, _): recirculate_resend(1);
            /* into an open copy: complete when its bit was the last one missing (up where the switch has a
             * parent), else consumed; where the sender had arrived, a DUPLICATE answered PENDING (pending.p4
             * wrote its words): to every member the first time for this copy, else to the sender */
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_OPEN, _, 0, 0, 1, VALUE_OR, _, _): recirculate_complete(1, 1);
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_OPEN, _, 0, 0, 1, _, _, _): recirculate_complete(1, 0);
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_OPEN, _, 0, 0, 0, VALUE_OR, _, _): recirculate_complete(0, 1);
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_OPEN, _, 0, 0, 0, _, _, _): recirculate_complete(0, 0);
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_OPEN, _, 0, _, _, _, _, _): drop_as(DROP_NONE);
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_OPEN, _, _, _, _, _, _, 0): result_down(FLAG_PENDING, DROP_DUPLICATE);
            (PASS_NONE, _, 1, MSG_UPDATE, _, STATE_OPEN, _, _, _, _, _, _, _): answer_back(FLAG_PENDING, 1, DROP_DUPLICATE);
            (PASS_NONE, _, 0, MSG_UPDATE, _, STATE_OPEN, _, _, _, _, _, _, _): answer_back(FLAG_PENDING, 0, DROP_DUPLICATE);
            /* the first arrival: complete if the sender is the only child (its words were written) */
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_FREE, _, _, 0, 1, _, _, _): recirculate_complete(1, 0);
            (PASS_NONE, _, _, MSG_UPDATE, _, STATE_FREE, _, _, 0, 0, _, _, _): recirculate_complete(0, 0);
        }
        default_action = drop_as(DROP_NONE);
    }

    apply {
        if (meta.drop_reason == DROP_NONE) {
            verdict.apply();
        } else {
            ig_dprsr_md.drop_ctl = 1;   /* dropped for drop_reason */
        }
    }
}

#endif
