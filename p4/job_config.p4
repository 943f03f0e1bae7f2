/* hina: per-job configuration and worker authorization (control-plane tables). */
#ifndef _HINA_JOB_CONFIG_P4_
#define _HINA_JOB_CONFIG_P4_

#include "headers.p4"

/* job_id -> N, full mask (the low N bits), multicast group, slot range. */
control JobConfig(inout headers_t hdr, inout metadata_t meta, out bool hit) {
    action set_job(bit<8> workers, bit<32> full_mask, bit<16> group, bit<16> slot_base, bit<16> slot_count) {
        meta.workers = workers;
        meta.full_mask = full_mask;
        meta.group = group;
        meta.slot_base = slot_base;
        meta.slot_count = slot_count;
    }
    table jobs {
        key = { hdr.hina.job_id: exact; }
        actions = { set_job; NoAction; }
        default_action = NoAction();
        size = 256;
    }
    apply {
        hit = jobs.apply().hit;
    }
}

/* (job, worker_id, ingress port) -> allowed, with the worker's bitmap bit. */
control WorkerAuth(inout headers_t hdr, inout metadata_t meta,
                   in standard_metadata_t standard_metadata, out bool allowed) {
    action allow(bit<32> worker_bit) {
        meta.worker_bit = worker_bit;
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
        allowed = workers.apply().hit;
    }
}

#endif
