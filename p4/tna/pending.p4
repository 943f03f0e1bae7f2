/* hina on Tofino: PENDING, the answer to a repeat of a copy that still waits for other members, and the
 * parent's PENDING on its way down (p4/arrival_bitmap.p4's PENDING, PENDING_BACK and PENDING_DOWN).
 *
 * A duplicate UPDATE of an open copy is counted DUPLICATE and answered with the copy's arrival bitmap as
 * word 0 (the other words 0): to every member the first time for the copy, to its sender after that.  So
 * each copy keeps one bit more, `pending`: set by that first answer, cleared by the copy's first arrival.
 * It cannot join the copy state (copy_state.p4), which is read and written in the first of the slot's
 * stages, before anything knows the frame is a duplicate: only the bitmap, two stages later, says so.  So
 * it is a register of its own, in the stage after the bitmap's (stage 7 of Tofino 1, which had no
 * stateful ALU), and the table that runs its actions decides from what the bitmap handed back: the
 * sender's bit in `seen` is `mine`, which the same stage computes (Arrived), so the table matches it itself,
 * one ternary entry per bit (HINA_EACH_BIT): that bit set in both `seen` and `worker_bit`.  The same
 * actions write the answer's words, a stage before the value stages read them (a duplicate never reaches
 * the values: the guard), so the answer takes no second pass.
 *
 * A repeat of a copy this switch sent up (complete, no total yet; the sender arrived, the switch has a
 * parent) sends the partial up again for one repeat and answers the next children - 1 PENDING, so that
 * each member asking once more costs one partial up, not one each.  The same register counts them down
 * (`ask`: the copy's open phase left 0 or 1 there, so the first repeat goes up) and the parent's counted
 * PENDING clears it (it answered: the next repeat goes up).  `told` says PENDING; the action cannot write
 * the answer's words, since the value stages that read the copy for a partial going up OR the frame's
 * words into it, so hina.p4 writes them where `told` keeps the value stages off the frame.
 *
 * The parent's PENDING for a copy this switch sent up (complete, no total yet) is never stored:
 * `parent_counted` says whether the parent's bitmap (its word 0) holds this switch's member id, again an
 * entry a bit.  Counted, every child here is counted too: the answer goes down with this copy's bitmap
 * (the words written here; the register cleared, so the next repeat goes up).  Not counted, the partial
 * never reached the parent and goes up again as a resend does (slot_rules.p4). */
#ifndef _HINA_TNA_PENDING_P4_
#define _HINA_TNA_PENDING_P4_

#include "headers.p4"

#define HINA_MEMBER_COUNTED(i, b) (i, b &&& b): counted();
#define HINA_SENDER_ARRIVED(i, b) (PASS_NONE, MSG_UPDATE, _, STATE_OPEN, 1, _, _, b &&& b, b &&& b): mark_pending();
#define HINA_SENDER_ASKED(i, b) (PASS_NONE, MSG_UPDATE, _, STATE_DONE, 1, _, 1, b &&& b, b &&& b): ask_again();

control ParentCounted(inout headers_t hdr, inout metadata_t meta) {
    action counted() {
        meta.counted = 1;
    }
    action not_counted() {
        meta.counted = 0;
    }
    table parent_counted {
        key = {
            meta.member: ternary;
            hdr.lo.w00[31:0]: ternary;
        }
        actions = { counted; not_counted; }
        const entries = {
            HINA_EACH_BIT(HINA_MEMBER_COUNTED)
        }
        default_action = not_counted();
    }

    apply {
        parent_counted.apply();
    }
}

control Pending(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<8>, copy_index_t>(HINA_COPIES) pending;

    /* the first PENDING answer for the copy sets it; whether an earlier one did comes back */
    RegisterAction<bit<8>, copy_index_t, bit<8>>(pending) mark = {
        void apply(inout bit<8> value, out bit<8> rv) {
            rv = value;
            value = 1;
        }
    };
    RegisterAction<bit<8>, copy_index_t, bit<8>>(pending) clear = {
        void apply(inout bit<8> value) {
            value = 0;
        }
    };
    /* a repeat of a copy sent up without a total yet: at 0 or 1, the partial goes up again and the next
     * children - 1 repeats are to be answered PENDING; else one of those (1 comes back) */
    RegisterAction<bit<8>, copy_index_t, bit<8>>(pending) ask = {
        void apply(inout bit<8> value, out bit<8> rv) {
            if (value == 0 || value == 1) {
                value = meta.children;
                rv = 0;
            } else {
                value = value - 1;
                rv = 1;
            }
        }
    };

    /* a duplicate of an open copy: counted (slot_rules.p4's verdict delivers), answered with its bitmap */
    action mark_pending() {
        meta.told = mark.execute(meta.copy);
        HINA_PENDING_WORDS
    }
    /* a first arrival: no answer for this copy's chunk went out yet */
    action clear_pending() {
        clear.execute(meta.copy);
    }
    /* a repeat of a copy sent up without a total yet: up again, or (told) answered PENDING */
    action ask_again() {
        meta.told = ask.execute(meta.copy);
    }
    /* the parent's PENDING counts this switch: down with this copy's bitmap; the next repeat goes up again */
    action pending_down_words() {
        clear.execute(meta.copy);
        HINA_PENDING_WORDS
    }
    table pending_update {
        key = {
            hdr.bridge.pass: ternary;
            hdr.hina.msg_type: ternary;
            hdr.hina.flags: ternary;
            meta.state: ternary;
            meta.tags_ok: ternary;
            meta.counted: ternary;
            meta.has_parent: ternary;
            meta.seen: ternary;
            meta.worker_bit: ternary;
        }
        actions = { mark_pending; clear_pending; ask_again; pending_down_words; NoAction; }
        const entries = {
            (PASS_NONE, MSG_UPDATE, _, STATE_FREE, 1, _, _, _, _): clear_pending();
            HINA_EACH_BIT(HINA_SENDER_ARRIVED)
            HINA_EACH_BIT(HINA_SENDER_ASKED)
            /* a refusal from the parent goes down as it came, whatever else it says */
            (PASS_NONE, MSG_RESULT, FLAG_STALE_RUN &&& FLAG_STALE_RUN, _, _, _, _, _, _): NoAction();
            (PASS_NONE, MSG_RESULT, FLAG_PENDING &&& FLAG_PENDING, STATE_DONE, 1, 1, _, _, _): pending_down_words();
        }
        default_action = NoAction();
    }

    apply {
        pending_update.apply();
    }
}

#endif
