/* hina on Tofino: where each copy of a slot stands, both copies in one 16-bit register per slot (a pair
 * of bytes).
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

/* both copies' states, one byte each: a pair, so that a RegisterAction hands back the frame's copy's
 * byte itself (no stage after it picks the byte out) */
struct copy_states_t {
    bit<8> copy0;
    bit<8> copy1;
}

control CopyState(inout headers_t hdr, inout metadata_t meta) {
    Register<copy_states_t, slot_index_t>(HINA_SLOTS) copy_state;

    /* an UPDATE (state_arg: OPEN in its copy's byte), a RESULT (0: read), a stored total (TOTAL's bit);
     * the state found in the frame's copy comes back */
    RegisterAction<copy_states_t, slot_index_t, bit<8>>(copy_state) merge0 = {
        void apply(inout copy_states_t value, out bit<8> rv) {
            rv = value.copy0;
            value.copy0 = value.copy0 | meta.state_arg[7:0];
            value.copy1 = value.copy1 | meta.state_arg[15:8];
        }
    };
    RegisterAction<copy_states_t, slot_index_t, bit<8>>(copy_state) merge1 = {
        void apply(inout copy_states_t value, out bit<8> rv) {
            rv = value.copy1;
            value.copy0 = value.copy0 | meta.state_arg[7:0];
            value.copy1 = value.copy1 | meta.state_arg[15:8];
        }
    };
    /* a completion: DONE in its copy's byte, FREE in the other's (the second pass reads no state) */
    RegisterAction<copy_states_t, slot_index_t, bit<8>>(copy_state) assign = {
        void apply(inout copy_states_t value, out bit<8> rv) {
            rv = value.copy0;
            value.copy0 = meta.state_arg[7:0];
            value.copy1 = meta.state_arg[15:8];
        }
    };

    action merge_state0() {
        meta.state = merge0.execute(hdr.hina.slot[11:0]);
    }
    action merge_state1() {
        meta.state = merge1.execute(hdr.hina.slot[11:0]);
    }
    action assign_state() {
        meta.state = assign.execute(hdr.hina.slot[11:0]);
    }
    table copy_state_update {
        key = {
            hdr.bridge.pass: exact;
            hdr.hina.version: exact;
        }
        actions = { merge_state0; merge_state1; assign_state; NoAction; }
        const entries = {
            (PASS_NONE, 0): merge_state0();
            (PASS_NONE, 1): merge_state1();
            (PASS_COMPLETE, 0): assign_state();
            (PASS_COMPLETE, 1): assign_state();
            (PASS_TOTAL, 0): merge_state0();
            (PASS_TOTAL, 1): merge_state1();
        }
        default_action = NoAction();
    }

    apply {
        copy_state_update.apply();
    }
}

#endif
