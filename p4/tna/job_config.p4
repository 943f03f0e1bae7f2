/* hina on Tofino: per-job configuration and worker authorization (control-plane tables).
 * The tables, actions and parameters are p4/job_config.p4's, so control/controller.py's entries fit
 * both targets; the intrinsic metadata is named `standard_metadata` for the same reason (the keys are
 * then `standard_metadata.ingress_port` on both).  The actions also start the arithmetic the checks
 * need (a Tofino stage compares a field with a constant, not with another field). */
#ifndef _HINA_TNA_JOB_CONFIG_P4_
#define _HINA_TNA_JOB_CONFIG_P4_

#include "headers.p4"

/* job_id -> N, full mask (the children's bits), arrivals that complete a copy (its popcount: unused
 * here, the bitmap itself says when the copy is complete), multicast group, slot range, parents. */
control JobConfig(inout headers_t hdr, inout metadata_t meta) {
    action set_job(bit<8> workers, bit<32> full_mask, bit<8> children, bit<16> group, bit<16> slot_base,
                   bit<16> slot_count, bit<8> parents) {
        meta.workers = workers;
        meta.full_mask = full_mask;
        meta.group = group;
        meta.slot_count = slot_count;
        meta.parents = parents;
        meta.slot_rel = (bit<32>) hdr.hina.slot - (bit<32>) slot_base;
        meta.worker_over = (bit<16>) hdr.hina.worker_id - (bit<16>) workers;
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
        jobs.apply();
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
 * (`worker_addresses`), or by its port alone (`workers`); both tables are looked up at once (each sets
 * its own copy of the worker's bit), and either one's hit allows it. */
control WorkerAuth(inout headers_t hdr, inout metadata_t meta,
                   in ingress_intrinsic_metadata_t standard_metadata) {
    action allow(bit<32> worker_bit) {
        meta.port_bit = worker_bit;
    }
    action allow_address(bit<32> worker_bit) {
        meta.address_bit = worker_bit;
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
    apply {
        meta.port_bit = 0;
        meta.address_bit = 0;
        bool by_address = worker_addresses.apply().hit;
        bool by_port = workers.apply().hit;
        meta.allowed = by_address || by_port;
        meta.worker_bit = meta.port_bit | meta.address_bit;
    }
}

#endif
