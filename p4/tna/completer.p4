/* hina on Tofino: which child's UPDATE completed a copy this switch sent up, so that the parent's total
 * names it on its way down (p4/arrival_bitmap.p4's `lasts`).
 *
 * A total coming down a tree names, in worker_id, the worker whose UPDATE completed the job's copy, so that
 * a worker can tell a total its own UPDATE completed from one that waited for a peer.  The parent's total
 * names the member whose partial completed the parent's copy: where that is this switch (its member id), the
 * child that completed this switch's copy completed the job's, and the total goes down naming it; else
 * OTHER_SUBTREE.  So each copy keeps one byte more, in a register of its own: written in the completing
 * frame's second pass (before send_up puts this switch's member id in its worker_id; slot_rules.p4), read in
 * the second pass of the parent's total.  The copy is DONE from that same second pass on, and a total is
 * taken only for a DONE copy, so the byte is always written before it is read. */
#ifndef _HINA_TNA_COMPLETER_P4_
#define _HINA_TNA_COMPLETER_P4_

#include "headers.p4"

control Completer(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<8>, copy_index_t>(HINA_COPIES) completer;

    RegisterAction<bit<8>, copy_index_t, bit<8>>(completer) record = {
        void apply(inout bit<8> value) {
            value = hdr.hina.worker_id;
        }
    };
    RegisterAction<bit<8>, copy_index_t, bit<8>>(completer) recall = {
        void apply(inout bit<8> value, out bit<8> rv) {
            rv = value;
        }
    };

    /* a copy sent up: its completing child */
    action record_completer() {
        record.execute(meta.copy);
    }
    /* the parent's total names this switch: down naming the child that completed this copy */
    action name_completer() {
        hdr.hina.worker_id = recall.execute(meta.copy);
    }
    /* the parent's total names another member: the job's copy was completed in another subtree */
    action name_other_subtree() {
        hdr.hina.worker_id = OTHER_SUBTREE;
    }
    table completer_update {
        key = {
            hdr.bridge.pass: exact;
            hdr.bridge.to_parent: ternary;
            meta.named: ternary;
        }
        actions = { record_completer; name_completer; name_other_subtree; NoAction; }
        const entries = {
            (PASS_COMPLETE, 1, _): record_completer();
            (PASS_TOTAL, _, 0): name_completer();
            (PASS_TOTAL, _, _): name_other_subtree();
        }
        default_action = NoAction();
    }

    apply {
        meta.named = hdr.hina.worker_id ^ meta.member;   /* 0: the parent's total names this switch */
        completer_update.apply();
    }
}

#endif
