/* hina: the slot protocol's state per slot copy: arrival bitmap, counter, offset, phase tag, total,
 * whether every member heard a PENDING.
 * Same rules as switch_emulator/controls.py (arrival_bitmap, from_parent):
 * - copy non-empty and (offset or phase tag differs): STALE_RUN.  Within one
 *   run a copy in use holds one chunk, and a worker whose bit is still set
 *   sends there only that chunk again, so the copy holds another run's state:
 *   the packet goes to every member flagged STALE_RUN (the run cannot finish:
 *   all of its workers must stop, not only the sender).
 * - sender's bit already set: RESEND if the copy is complete (counter == the
 *   children's count) and holds the total (always, on the root); if it is
 *   complete but was sent up and no total came back yet (trees), RESEND_UP for
 *   one repeat and PENDING_BACK for the next children - 1 (`pendings` counts
 *   them down; the parent's PENDING_DOWN clears it), so that every member
 *   asking once more sends one partial up, not one each; else
 *   DUPLICATE, answered PENDING with the copy's bitmap: to every member the
 *   first time for this copy (its `pendings` bit, cleared by the copy's first
 *   arrival), to the sender after that (PENDING_BACK).  The counter, not the
 *   bitmap, says "complete" here: the bitmap of a complete copy loses bits as
 *   workers move to the other copy.
 * - copy non-empty and complete (the sender already left it): RESEND where it holds the total (a late
 *   duplicate is ignored by its sender; a new run's hello learns it met an earlier run's copy), else STALE.
 * - otherwise clear the sender's bit in the other copy, set it here; an
 *   empty copy is written (first), a non-empty one combined; when the bitmap
 *   reaches the children's mask: COMPLETE on the root, SEND_UP below it.
 * Trees, a RESULT from the slot's parent (ingress checked the port): a
 * STALE_RUN refusal goes down as it came (STALE_DOWN), whatever the copy
 * holds; a total must answer this copy (complete, same offset and phase
 * tag), else STALE, and is stored once (TOTAL; a second is a DUPLICATE).
 * The parent's PENDING for such a copy is never stored: where its bitmap
 * (word 0) counts this switch's member id, every child here is counted too
 * (PENDING_DOWN, with this copy's bitmap), else the partial never reached
 * the parent and goes up again (RESEND_UP). */
#ifndef _HINA_ARRIVAL_BITMAP_P4_
#define _HINA_ARRIVAL_BITMAP_P4_

#include "headers.p4"

control ArrivalBitmap(inout headers_t hdr, inout metadata_t meta) {
    register<bit<32>>(HINA_COPIES) bitmap;
    register<bit<8>>(HINA_COPIES) arrivals;
    register<bit<32>>(HINA_COPIES) offsets;
    register<bit<16>>(HINA_COPIES) phases;
    register<bit<8>>(HINA_COPIES) totals;   /* trees: the copy holds the job's total (from the parent) */
    /* open copy: 1 when a PENDING for it went to every member already; sent up, no total yet: how many more
     * repeats are answered PENDING, plus one (0 or 1: the next one sends the partial up again) */
    register<bit<8>>(HINA_COPIES) pendings;
    /* trees: the worker_id whose UPDATE completed a copy sent up, which the parent's total names on its way
     * down where it names this switch (its partial completed the parent's copy), else OTHER_SUBTREE */
    register<bit<8>>(HINA_COPIES) lasts;

    /* Whether the parent's PENDING counts this switch: its bitmap (word 0) has the bit of this switch's
     * member id, matched with one entry a bit as on Tofino (p4/tna/pending.p4).  The word shifted right by
     * the member id says the same, but p4testgen's solver takes a shift only by an amount as wide as the
     * word (it stops at this program with a Z3 sort error), and BMv2 only by one of 8 bits at most. */
    bit<1> counted;
    action count_member() {
        counted = 1;
    }
#define HINA_MEMBER_COUNTED(i, b) (i, b &&& b): count_member();
    table parent_counted {
        key = {
            meta.member: exact;
            hdr.payload.w00: ternary;
        }
        actions = { count_member; NoAction; }
        const entries = {
            HINA_EACH_BIT(HINA_MEMBER_COUNTED)
        }
        default_action = NoAction();
    }

    apply {
        bit<32> seen;
        bit<8> count;
        bit<32> offset;
        bit<16> phase;
        bit<8> total;
        bitmap.read(seen, meta.copy);
        arrivals.read(count, meta.copy);
        offsets.read(offset, meta.copy);
        phases.read(phase, meta.copy);
        totals.read(total, meta.copy);
        meta.first = 0;
        if (hdr.hina.msg_type == MSG_RESULT) {   /* from_parent */
            if ((hdr.hina.flags & FLAG_STALE_RUN) != 0) {
                meta.verdict = VERDICT_STALE_DOWN;
            } else if (count != meta.children || offset != hdr.hina.offset || phase != hdr.hina.phase) {
                meta.verdict = VERDICT_DROP;
                meta.drop_reason = DROP_STALE;
            } else if (total != 0) {
                meta.verdict = VERDICT_DROP;
                meta.drop_reason = DROP_DUPLICATE;
            } else if ((hdr.hina.flags & FLAG_PENDING) != 0) {
                meta.bitmap = seen;
                counted = 0;
                parent_counted.apply();
                if (counted == 1) {
                    meta.verdict = VERDICT_PENDING_DOWN;   /* the parent holds this partial, waits for others */
                    pendings.write(meta.copy, 0);          /* it answered: the next repeat goes up again */
                } else {
                    meta.verdict = VERDICT_RESEND_UP;      /* the partial was lost on the way up */
                }
            } else {
                totals.write(meta.copy, 1);
                meta.verdict = VERDICT_TOTAL;
                if (hdr.hina.worker_id == meta.member) {
                    lasts.read(hdr.hina.worker_id, meta.copy);
                } else {
                    hdr.hina.worker_id = OTHER_SUBTREE;
                }
            }
        } else if (seen != 0 && (offset != hdr.hina.offset || phase != hdr.hina.phase)) {
            meta.verdict = VERDICT_STALE_RUN;
        } else if ((seen & meta.worker_bit) != 0) {
            if (count == meta.children) {
                if (meta.has_parent == 0 || total != 0) {
                    meta.verdict = VERDICT_RESEND;
                } else {
                    /* sent up, no total yet: up again for one repeat, PENDING to the next children - 1 */
                    bit<8> asks;
                    pendings.read(asks, meta.copy);
                    if (asks >= 2) {
                        pendings.write(meta.copy, asks - 1);
                        meta.bitmap = seen;
                        meta.verdict = VERDICT_PENDING_BACK;
                    } else {
                        pendings.write(meta.copy, meta.children);
                        meta.verdict = VERDICT_RESEND_UP;
                    }
                }
            } else {
                /* the copy holds the sender's words and waits for others: counted DUPLICATE, nothing
                 * stored, answered with who is counted */
                bit<8> told;
                pendings.read(told, meta.copy);
                pendings.write(meta.copy, 1);
                meta.bitmap = seen;
                if (told == 0) {
                    meta.verdict = VERDICT_PENDING;
                } else {
                    meta.verdict = VERDICT_PENDING_BACK;
                }
            }
        } else if (seen != 0 && count == meta.children) {
            /* the sender already left this complete copy: answered as a duplicate (its sender ignores a
             * late one; a restarted run's hello learns that it met an earlier run) where the copy holds the
             * total, else (sent up, no total yet) stale */
            if (meta.has_parent == 0 || total != 0) {
                meta.verdict = VERDICT_RESEND;
            } else {
                meta.verdict = VERDICT_DROP;
                meta.drop_reason = DROP_STALE;
            }
        } else {
            bit<32> other_seen;
            bitmap.read(other_seen, meta.copy ^ 1);
            bitmap.write(meta.copy ^ 1, other_seen & ~meta.worker_bit);
            if (seen == 0) {
                meta.first = 1;
                offsets.write(meta.copy, hdr.hina.offset);
                phases.write(meta.copy, hdr.hina.phase);
                arrivals.write(meta.copy, 1);
                totals.write(meta.copy, 0);
                pendings.write(meta.copy, 0);
            } else {
                arrivals.write(meta.copy, count + 1);
            }
            seen = seen | meta.worker_bit;
            bitmap.write(meta.copy, seen);
            if (seen != meta.full_mask) {
                meta.verdict = VERDICT_CONSUMED;
            } else if (meta.has_parent == 1) {
                meta.verdict = VERDICT_SEND_UP;
                lasts.write(meta.copy, hdr.hina.worker_id);
            } else {
                meta.verdict = VERDICT_COMPLETE;
            }
        }
    }
}

#endif
