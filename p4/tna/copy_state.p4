/* hina on Tofino: where each copy of a slot stands, both copies in one 16-bit register per slot.
 *
 * p4/arrival_bitmap.p4 decides with an arrival counter ("complete" = counter == children, since the
 * bitmap of a complete copy loses bits as workers move on) and with "empty" = bitmap == 0.  On Tofino
 * a register is read and written once per pass, in one stage, so whatever the bitmap's update depends
 * on (is the copy complete? is it another run's?) must come out of an EARLIER stage, and the run tags
 * can only be written on a first arrival if an earlier stage says the copy is empty.  So this
 * register, placed first, keeps per copy one of
 *
 *   FREE (0)   empty: the next accepted UPDATE takes it (its run tags are written, its bitmap starts
 *              at the sender's bit, its words are written);
 *   OPEN (1)   taken, not complete;
 *   DONE (3)   complete (at a switch with a parent: sent up, no total yet);
 *   TOTAL (7)  complete and holding the parent's total.
 *
 * An UPDATE ORs OPEN into its copy (FREE becomes OPEN, the rest stay: the encoding only adds bits) and
 * learns the state it found.  A copy's completion (the second pass of the frame that completed it)
 * sets it DONE and the OTHER copy FREE: every child's bit is in the completed copy, so the other one's
 * bitmap is empty at that moment (each arrival clears the sender's bit in the other copy), and a worker
 * sends into it again only once this RESULT reached it, after this write.  The parent's total (second
 * pass) ORs TOTAL in.  A RESULT only reads.  So FREE stands for the reference's "bitmap empty" and
 * DONE/TOTAL for "counter == children" on every sequence of frames the slot protocol produces.
 * Where they could differ: a frame that meets a copy within the second pass's microsecond (only a
 * late duplicate can), and the drop counted for a RESULT that arrives after its copy was emptied
 * (STALE here, DUPLICATE in the reference). */
#ifndef _HINA_TNA_COPY_STATE_P4_
#define _HINA_TNA_COPY_STATE_P4_

#include "headers.p4"

/* What copy_state is given, by pass, message and copy: computed a stage ahead (a stateful ALU reads
 * its operands as its stage starts). */
control CopyStateArg(inout headers_t hdr, inout metadata_t meta) {
    action arg(bit<16> value) {
        meta.state_arg = value;
    }
    table copy_state_arg {
        key = {
            hdr.bridge.pass: exact;
            hdr.hina.msg_type: exact;
            hdr.hina.version: exact;
        }
        actions = { arg; }
        const entries = {
            (PASS_NONE, MSG_UPDATE, 0): arg(0x0001);       /* OPEN, copy 0 */
            (PASS_NONE, MSG_UPDATE, 1): arg(0x0100);       /* OPEN, copy 1 */
            (PASS_COMPLETE, MSG_UPDATE, 0): arg(0x0003);   /* DONE, copy 1 FREE */
            (PASS_COMPLETE, MSG_UPDATE, 1): arg(0x0300);   /* DONE, copy 0 FREE */
            (PASS_TOTAL, MSG_RESULT, 0): arg(0x0004);      /* DONE -> TOTAL */
            (PASS_TOTAL, MSG_RESULT, 1): arg(0x0400);
        }
        default_action = arg(0);
    }

    apply {
        copy_state_arg.apply();
    }
}

control CopyState(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<16>, slot_index_t>(HINA_SLOTS, 0) copy_state;

    /* an UPDATE (state_arg: OPEN in its copy's byte), a RESULT (0: read), a stored total (TOTAL's bit) */
    RegisterAction<bit<16>, slot_index_t, bit<16>>(copy_state) merge = {
        void apply(inout bit<16> value, out bit<16> rv) {
            rv = value;
            value = value | meta.state_arg;
        }
    };
    /* a completion: DONE in its copy's byte, FREE in the other's */
    RegisterAction<bit<16>, slot_index_t, bit<16>>(copy_state) assign = {
        void apply(inout bit<16> value, out bit<16> rv) {
            rv = value;
            value = meta.state_arg;
        }
    };

    action merge_state() {
        meta.states = merge.execute(hdr.hina.slot[11:0]);
    }
    action assign_state() {
        meta.states = assign.execute(hdr.hina.slot[11:0]);
    }
    table copy_state_update {
        key = { hdr.bridge.pass: exact; }
        actions = { merge_state; assign_state; NoAction; }
        const entries = {
            PASS_NONE: merge_state();
            PASS_COMPLETE: assign_state();
            PASS_TOTAL: merge_state();
        }
        default_action = NoAction();
    }

    /* the frame's copy's byte */
    action copy0() {
        meta.state = meta.states[7:0];
    }
    action copy1() {
        meta.state = meta.states[15:8];
    }
    table copy_state_of {
        key = { hdr.hina.version: exact; }
        actions = { copy0; copy1; }
        const entries = {
            0: copy0();
            1: copy1();
        }
        default_action = copy0();
    }

    apply {
        copy_state_update.apply();
        copy_state_of.apply();
    }
}

#endif
