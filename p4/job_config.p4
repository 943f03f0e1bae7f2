/* hina: per-job configuration and worker authorization (control-plane tables). */
#ifndef _HINA_JOB_CONFIG_P4_
#define _HINA_JOB_CONFIG_P4_

#include "headers.p4"

/* job_id -> N, full mask (the children's bits: the low N on a single switch), arrivals that complete a
 * copy (its popcount), multicast group (the children), slot range, how many parents (0: the root). */
control JobConfig(inout headers_t hdr, inout metadata_t meta, out bool hit) {
    action set_job(bit<8> workers, bit<32> full_mask, bit<8> children, bit<16> group, bit<16> slot_base,
                   bit<16> slot_count, bit<8> parents) {
        meta.workers = workers;
        meta.full_mask = full_mask;
        meta.children = children;
        meta.group = group;
        meta.slot_base = slot_base;
        meta.slot_count = slot_count;
        meta.parents = parents;
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

/* Trees: (job, slot) -> the port of the slot's parent and this switch's member id in the parent's job
 * (the controller spreads slots over spines: slot s's parent is spine s mod S).  No entry: the root. */
control TreeParent(inout headers_t hdr, inout metadata_t meta) {
    action set_parent(bit<9> port, bit<8> member) {
        meta.parent_port = port;
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

/* May this frame speak for (job, worker_id)?  A worker that named its address (several ranks share a host
 * and a port, each at its own UDP port) only from that port, IPv4 address and UDP port (`worker_addresses`);
 * one known by its port alone (a neighbour switch, workers behind a plain switch) from anything on that
 * port (`workers`).  Either gives the worker's bitmap bit. */
control WorkerAuth(inout headers_t hdr, inout metadata_t meta,
                   in standard_metadata_t standard_metadata, out bool allowed) {
    action allow(bit<32> worker_bit) {
        meta.worker_bit = worker_bit;
    }
    action allow_address(bit<32> worker_bit) {
        meta.worker_bit = worker_bit;
        meta.by_address = 1;   /* a RESULT sent back to it goes to that address */
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
        meta.by_address = 0;
        allowed = worker_addresses.apply().hit;
        if (!allowed) {
            allowed = workers.apply().hit;
        }
    }
}

#endif
