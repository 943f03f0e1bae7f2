/* hina on Tofino: the arrival bitmaps of a slot's two copies, one 64-bit register per slot.
 * An arrival sets the sender's bit in its copy and clears it in the other copy (p4/arrival_bitmap.p4
 * does that with two register writes; here both halves are updated by one stateful ALU in one pass).
 * An arrival that took a FREE copy starts its bitmap at the sender's bit.  A frame that only reads
 * (a complete copy) passes 0 as its bit.  The bitmap before the arrival comes back: whether the
 * sender had arrived already (a duplicate) and whether this arrival completes the copy are read from
 * it in the next stage. */
#ifndef _HINA_TNA_ARRIVAL_BITMAP_P4_
#define _HINA_TNA_ARRIVAL_BITMAP_P4_

#include "headers.p4"

struct bitmap_pair_t {
    bit<32> copy0;
    bit<32> copy1;
}

control ArrivalBitmap(inout headers_t hdr, inout metadata_t meta) {
    Register<bitmap_pair_t, slot_index_t>(HINA_SLOTS) bitmap;

    RegisterAction<bitmap_pair_t, slot_index_t, bit<32>>(bitmap) arrive0 = {
        void apply(inout bitmap_pair_t value, out bit<32> rv) {
            rv = value.copy0;
            if (meta.claim == 1) {
                value.copy0 = meta.bitmap_arg;
            } else {
                value.copy0 = value.copy0 | meta.bitmap_arg;
            }
            value.copy1 = value.copy1 & ~meta.bitmap_arg;
        }
    };
    RegisterAction<bitmap_pair_t, slot_index_t, bit<32>>(bitmap) arrive1 = {
        void apply(inout bitmap_pair_t value, out bit<32> rv) {
            rv = value.copy1;
            if (meta.claim == 1) {
                value.copy1 = meta.bitmap_arg;
            } else {
                value.copy1 = value.copy1 | meta.bitmap_arg;
            }
            value.copy0 = value.copy0 & ~meta.bitmap_arg;
        }
    };

    action arrive_copy0() {
        meta.seen = arrive0.execute(hdr.hina.slot[11:0]);
    }
    action arrive_copy1() {
        meta.seen = arrive1.execute(hdr.hina.slot[11:0]);
    }
    table bitmap_update {
        key = { hdr.hina.version: exact; }
        actions = { arrive_copy0; arrive_copy1; NoAction; }
        const entries = {
            0: arrive_copy0();
            1: arrive_copy1();
        }
        /* (a register's action cannot be a default action: its index comes from the hash unit, which
         * only a hit drives; version is one bit, so every frame hits) */
        default_action = NoAction();
    }

    apply {
        bitmap_update.apply();
    }
}

#endif
