/* hina on Tofino: per-job configuration and worker authorization (control-plane tables).
 * The tables, actions and parameters are p4/job_config.p4's, so control/controller.py's entries fit
 * both targets; the intrinsic metadata is named `standard_metadata` for the same reason (the keys are
 * then `standard_metadata.ingress_port` on both).  The actions also start the arithmetic the checks
 * need (a Tofino stage compares a field with a constant, not with another field). */
#ifndef _HINA_TNA_JOB_CONFIG_P4_
#define _HINA_TNA_JOB_CONFIG_P4_

#include "headers.p4"

/* job_id -> N, full mask (the children's bits), arrivals that complete a copy (its popcount: the bitmap
 * itself says when the copy is complete; pending.p4 counts a sent-up copy's repeats by it), multicast
 * group, slot range, parents. */
control JobConfig(inout headers_t hdr, inout metadata_t meta) {
    /* slot_base and slot_count are wider than BMv2's bit<16> (the controller's values fit both): the back
     * end cannot widen an action parameter inside an expression ("IR structure not yet handled by the
     * ActionAnalysis pass"), nor subtract one, and widening a field costs an operation of its own, so
     * they are stored at the width the subtractions after the table use. */
    action set_job(bit<8> workers, bit<32> full_mask, bit<8> children, bit<16> group, bit<32> slot_base,
                   bit<32> slot_count, bit<8> parents) {
        meta.workers = workers;
        meta.full_mask = full_mask;
        meta.children = children;
        meta.group = group;
        meta.slot_count = slot_count;
        meta.parents = parents;
        meta.slot_base = slot_base;
        meta.job_hit = true;
    }
    table jobs {
        key = { hdr.hina.job_id: exact; }
        actions = { set_job; NoAction; }
        default_action = NoAction();
        size = 256;
    }
    apply {
        meta.job_hit = false;
        if (jobs.apply().hit) {
            /* (under the hit, so that the compiler does not fold slot_rel into frame_checks' slot_over,
             * one action of two subtractions) */
            meta.slot_rel = (bit<32>) hdr.hina.slot - meta.slot_base;
            meta.worker_over = hdr.hina.worker_id - meta.workers;
        }
    }
}

/* Trees: (job, slot) -> the port of the slot's parent and this switch's member id in the parent's job.
 * No entry: the root. */
control TreeParent(inout headers_t hdr, inout metadata_t meta,
                   in ingress_intrinsic_metadata_t standard_metadata) {
    action set_parent(bit<9> port, bit<8> member) {
        meta.parent_port = port;
        meta.parent_diff = standard_metadata.ingress_port ^ port;
        meta.member = member;
        meta.has_parent = 1;
    }
    table parents {
        key = {
            hdr.hina.job_id: exact;
            hdr.hina.slot: exact;
        }
        actions = { set_parent; NoAction; }
        default_action = NoAction();
        size = 8192;
    }
    apply {
        meta.has_parent = 0;
        parents.apply();
    }
}

/* May this frame speak for (job, worker_id)?  By its address and UDP port behind its port
 * (`worker_addresses`), or by its port alone (`workers`); both tables are looked up at once, each sets
 * its own copy of the worker's bit and its own flag (two tables may not write one field in one stage),
 * and either one's hit allows it (frame_checks.p4's `checks` reads both flags). */
control WorkerAuth(inout headers_t hdr, inout metadata_t meta,
                   in ingress_intrinsic_metadata_t standard_metadata) {
    action allow(bit<32> worker_bit) {
        meta.port_bit = worker_bit;
        meta.allowed_port = 1;
    }
    action allow_address(bit<32> worker_bit) {
        meta.address_bit = worker_bit;
        meta.allowed_address = 1;
        hdr.bridge.by_address = 1;   /* a RESULT sent back to it goes to that address */
    }
    table worker_addresses {
        key = {
            hdr.hina.job_id: exact;
            hdr.hina.worker_id: exact;
            standard_metadata.ingress_port: exact;
            hdr.ipv4.src_addr: exact;
            hdr.udp.src_port: exact;
        }
        actions = { allow_address; NoAction; }
        default_action = NoAction();
        size = 8192;
    }
    table workers {
        key = {
            hdr.hina.job_id: exact;
            hdr.hina.worker_id: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { allow; NoAction; }
        default_action = NoAction();
        size = 8192;
    }
    /* full_mask without the sender's bit, the bitmap this arrival completes: an XOR, one operation
     * (`full_mask & ~worker_bit` takes two).  The same for every frame that reaches a slot: an allowed
     * sender's bit is one of full_mask's, and a member's two entries carry the same bit.  A table's
     * action, a stage after worker_bit's (the compiler would fold two assignments into one action, and
     * an action may not use what it computes). */
    action need_of() {
        meta.need = meta.full_mask ^ meta.worker_bit;
    }
    table sender_need {
        actions = { need_of; }
        default_action = need_of();
        size = 1;
    }
    apply {
        meta.port_bit = 0;
        meta.address_bit = 0;
        meta.allowed_port = 0;
        meta.allowed_address = 0;
        worker_addresses.apply();
        workers.apply();
        meta.worker_bit = meta.port_bit | meta.address_bit;
        sender_need.apply();
    }
}

#endif
