/* hina on Tofino: each copy's run tags, the offset and phase tag of the chunk it holds.
 * An UPDATE that takes a FREE copy (copy_state.p4) writes them; every other UPDATE, and the parent's
 * RESULT, compares: an UPDATE whose offset or tag differs from a copy in use meets another run's chunk
 * (STALE_RUN), a RESULT that differs answers another chunk (STALE).  This comes BEFORE the arrival
 * bitmap, so a refused frame never touches the bitmap: the copy stays as the other run left it, as in
 * p4/arrival_bitmap.p4. */
#ifndef _HINA_TNA_RUN_TAGS_P4_
#define _HINA_TNA_RUN_TAGS_P4_

#include "headers.p4"

struct run_tags_t {
    bit<32> offset;
    bit<32> phase;
}

control RunTags(inout headers_t hdr, inout metadata_t meta) {
    Register<run_tags_t, copy_index_t>(HINA_COPIES) run_tags;

    RegisterAction<run_tags_t, copy_index_t, bit<8>>(run_tags) take = {
        void apply(inout run_tags_t value) {
            value.offset = hdr.hina.offset;
            value.phase = meta.phase;
        }
    };
    RegisterAction<run_tags_t, copy_index_t, bit<8>>(run_tags) check = {
        void apply(inout run_tags_t value, out bit<8> rv) {
            if (value.offset == hdr.hina.offset && value.phase == meta.phase) {
                rv = 1;
            } else {
                rv = 0;
            }
        }
    };

    /* an UPDATE into a FREE copy takes it; its bitmap starts at the sender's bit */
    action take_copy() {
        take.execute(meta.copy);
        meta.tags_ok = 1;
        meta.claim = 1;
        meta.bitmap_arg = meta.worker_bit;
    }
    /* an UPDATE into an OPEN copy: arrives, if the tags agree */
    action arrive_in_copy() {
        meta.tags_ok = check.execute(meta.copy);
        meta.bitmap_arg = meta.worker_bit;
    }
    /* an UPDATE into a complete copy (or the parent's RESULT): only reads the bitmap */
    action read_copy() {
        meta.tags_ok = check.execute(meta.copy);
        meta.bitmap_arg = 0;
    }
    table run_tags_update {
        key = {
            hdr.hina.msg_type: exact;
            meta.state: exact;
        }
        actions = { take_copy; arrive_in_copy; read_copy; NoAction; }
        /* every state a copy can be in, for both message types: a register's action cannot be a default
         * action (its index comes from the hash unit, which only a hit drives) */
        const entries = {
            (MSG_UPDATE, STATE_FREE): take_copy();
            (MSG_UPDATE, STATE_OPEN): arrive_in_copy();
            (MSG_UPDATE, STATE_DONE): read_copy();
            (MSG_UPDATE, STATE_TOTAL): read_copy();
            (MSG_RESULT, STATE_FREE): read_copy();
            (MSG_RESULT, STATE_OPEN): read_copy();
            (MSG_RESULT, STATE_DONE): read_copy();
            (MSG_RESULT, STATE_TOTAL): read_copy();
        }
        default_action = NoAction();
    }

    apply {
        meta.tags_ok = 0;
        meta.claim = 0;
        run_tags_update.apply();
    }
}

#endif
