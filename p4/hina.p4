/* -*- P4_16 -*- hina: homomorphic in-network aggregation for BMv2 (v1model).
 *
 * The switch sums (ADD), ORs (OR) or takes signed maxima (MAX) of 32-bit
 * words in numbered slots and never knows about compression; the slot
 * protocol is docs/design.md's (aggregation trees: its "Aggregation trees"
 * and docs/trees.md).  This file only includes and wires the
 * controls; switch_emulator/controls.py is the same ingress in Python, and
 * tests/vectors/ holds the packet test vectors both must pass.
 */
#include <core.p4>
#include <v1model.p4>

#include "configuration.p4"
#include "headers.p4"
#include "parser.p4"
#include "job_config.p4"
#include "arrival_bitmap.p4"
#include "value_processor.p4"
#include "forwarding.p4"

control HinaIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    counter(DROP_REASONS, CounterType.packets) drops;
    JobConfig() job_config;
    WorkerAuth() worker_auth;
    TreeParent() tree_parent;
    ArrivalBitmap() arrival_bitmap;
    ValueProcessor() value_processor;
    Forwarding() forwarding;

    /* trees: the copy's words go up to the slot's parent as one UPDATE from this switch's member id */
    action send_up() {
        hdr.hina.msg_type = MSG_UPDATE;
        hdr.hina.worker_id = meta.member;
        hdr.hina.flags = 0;
        standard_metadata.egress_spec = meta.parent_port;
        meta.is_result = 1;
    }

    /* a PENDING answer's words: the copy's arrival bitmap (who is counted) as word 0, the rest 0 */
    action pending_words() {
        hdr.payload.w00 = meta.bitmap; hdr.payload.w01 = 0; hdr.payload.w02 = 0; hdr.payload.w03 = 0;
        hdr.payload.w04 = 0; hdr.payload.w05 = 0; hdr.payload.w06 = 0; hdr.payload.w07 = 0;
        hdr.payload.w08 = 0; hdr.payload.w09 = 0; hdr.payload.w10 = 0; hdr.payload.w11 = 0;
        hdr.payload.w12 = 0; hdr.payload.w13 = 0; hdr.payload.w14 = 0; hdr.payload.w15 = 0;
        hdr.payload.w16 = 0; hdr.payload.w17 = 0; hdr.payload.w18 = 0; hdr.payload.w19 = 0;
        hdr.payload.w20 = 0; hdr.payload.w21 = 0; hdr.payload.w22 = 0; hdr.payload.w23 = 0;
        hdr.payload.w24 = 0; hdr.payload.w25 = 0; hdr.payload.w26 = 0; hdr.payload.w27 = 0;
        hdr.payload.w28 = 0; hdr.payload.w29 = 0; hdr.payload.w30 = 0; hdr.payload.w31 = 0;
    }

    apply {
        bool hina_port = hdr.udp.isValid() && hdr.udp.dst_port == HINA_PORT;
        bool known_job = false;
        bool allowed = false;
        bool from_parent = false;
        meta.drop_reason = DROP_NONE;
        meta.is_result = 0;
        meta.to_sender = 0;
        meta.by_address = 0;
        meta.is_flood = 0;
        meta.has_parent = 0;

        if (!hdr.ethernet.isValid()) {
            meta.drop_reason = DROP_TRUNCATED;
        } else if (!hina_port) {
            forwarding.apply(hdr, meta, standard_metadata);
        } else if (!hdr.hina.isValid() || hdr.udp.len < HINA_MIN_UDP_LENGTH) {
            meta.drop_reason = DROP_TRUNCATED;
        } else if (standard_metadata.checksum_error == 1) {
            meta.drop_reason = DROP_BAD_CHECKSUM;
        } else if (hdr.hina.msg_type != MSG_UPDATE && hdr.hina.msg_type != MSG_RESULT) {
            meta.drop_reason = DROP_BAD_MSG_TYPE;
        } else if (hdr.hina.op > OP_MAX) {
            meta.drop_reason = DROP_BAD_OP;
        } else {
            from_parent = hdr.hina.msg_type == MSG_RESULT;
            job_config.apply(hdr, meta, known_job);
            if (!known_job && from_parent) {
                meta.drop_reason = DROP_BAD_MSG_TYPE;
            } else if (!known_job) {
                meta.drop_reason = DROP_UNKNOWN_JOB;
            } else if (from_parent && meta.parents == 0) {
                meta.drop_reason = DROP_BAD_MSG_TYPE;   /* only a switch with a parent takes RESULTs */
            } else if (!hdr.payload.isValid() || hdr.udp.len < HINA_UDP_LENGTH) {
                meta.drop_reason = DROP_TRUNCATED;
            } else if (hdr.udp.len > HINA_UDP_LENGTH) {
                meta.drop_reason = DROP_BAD_LENGTH;
            } else if (!from_parent && hdr.hina.worker_id >= meta.workers) {
                meta.drop_reason = DROP_BAD_WORKER;
            } else {
                if (from_parent) {
                    allowed = true;   /* the parent's port is checked once the slot is known */
                } else {
                    worker_auth.apply(hdr, meta, standard_metadata, allowed);
                }
                if (!allowed) {
                    meta.drop_reason = DROP_UNAUTHORIZED;
                } else if (hdr.hina.count > HINA_WORDS) {
                    meta.drop_reason = DROP_BAD_COUNT;
                } else if ((bit<16>) hdr.hina.slot < meta.slot_base ||
                           (bit<16>) hdr.hina.slot >= meta.slot_base + meta.slot_count) {
                    meta.drop_reason = DROP_BAD_SLOT;
                } else {
                    tree_parent.apply(hdr, meta);
                    if (from_parent && (meta.has_parent == 0 ||
                                        standard_metadata.ingress_port != meta.parent_port)) {
                        meta.drop_reason = DROP_NOT_PARENT;
                    } else {
                        meta.copy = ((bit<32>) hdr.hina.slot << 1) | (bit<32>) hdr.hina.version;
                        arrival_bitmap.apply(hdr, meta);
                        if (meta.verdict == VERDICT_STALE_RUN) {
                            drops.count((bit<32>) DROP_STALE_RUN);   /* counted; refused to every member */
                            hdr.hina.msg_type = MSG_RESULT;
                            hdr.hina.flags = FLAG_STALE_RUN;
                            standard_metadata.mcast_grp = meta.group;
                            meta.is_result = 1;
                        } else if (meta.verdict == VERDICT_RESEND) {
                            value_processor.apply(hdr.payload, meta.copy, hdr.hina.op, 0, 1);
                            hdr.hina.msg_type = MSG_RESULT;
                            hdr.hina.flags = FLAG_RESEND;
                            standard_metadata.egress_spec = standard_metadata.ingress_port;
                            meta.is_result = 1;
                            meta.to_sender = meta.by_address;   /* back to its address, or the port's host */
                        } else if (meta.verdict == VERDICT_RESEND_UP) {
                            value_processor.apply(hdr.payload, meta.copy, hdr.hina.op, 0, 1);
                            send_up();
                        } else if (meta.verdict == VERDICT_TOTAL) {
                            value_processor.apply(hdr.payload, meta.copy, hdr.hina.op, 1, 0);   /* stored */
                            /* a fresh multicast down; but a total the parent sent as a RESEND answers a
                             * repeat, and the children must know it */
                            hdr.hina.flags = hdr.hina.flags & FLAG_RESEND;
                            standard_metadata.mcast_grp = meta.group;
                            meta.is_result = 1;
                        } else if (meta.verdict == VERDICT_PENDING || meta.verdict == VERDICT_PENDING_BACK) {
                            drops.count((bit<32>) DROP_DUPLICATE);   /* counted, and answered: who is counted */
                            pending_words();
                            hdr.hina.msg_type = MSG_RESULT;
                            hdr.hina.flags = FLAG_PENDING;
                            if (meta.verdict == VERDICT_PENDING) {
                                standard_metadata.mcast_grp = meta.group;   /* the first: every member */
                            } else {
                                standard_metadata.egress_spec = standard_metadata.ingress_port;
                                meta.to_sender = meta.by_address;
                            }
                            meta.is_result = 1;
                        } else if (meta.verdict == VERDICT_PENDING_DOWN) {
                            pending_words();   /* this copy's bitmap: the children counted here */
                            standard_metadata.mcast_grp = meta.group;
                            meta.is_result = 1;
                        } else if (meta.verdict == VERDICT_STALE_DOWN) {
                            drops.count((bit<32>) DROP_STALE_RUN);   /* counted on every tier it passes */
                            standard_metadata.mcast_grp = meta.group;
                            meta.is_result = 1;
                        } else if (meta.verdict != VERDICT_DROP) {
                            value_processor.apply(hdr.payload, meta.copy, hdr.hina.op, meta.first, 0);
                            if (meta.verdict == VERDICT_COMPLETE) {
                                hdr.hina.msg_type = MSG_RESULT;
                                hdr.hina.flags = 0;
                                standard_metadata.mcast_grp = meta.group;
                                meta.is_result = 1;
                            } else if (meta.verdict == VERDICT_SEND_UP) {
                                send_up();
                            } else {
                                mark_to_drop(standard_metadata);   /* consumed: nothing leaves */
                            }
                        }
                    }
                }
            }
        }
        if (meta.drop_reason != DROP_NONE) {
            drops.count((bit<32>) meta.drop_reason);
            mark_to_drop(standard_metadata);
        }
    }
}

control HinaEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    EgressRewrite() egress_rewrite;
    apply {
        if (meta.is_flood == 1 && standard_metadata.egress_port == standard_metadata.ingress_port) {
            mark_to_drop(standard_metadata);   /* a broadcast never goes back where it came from */
        } else if (meta.is_result == 1) {
            egress_rewrite.apply(hdr, meta, standard_metadata);
        }
    }
}

V1Switch(HinaParser(), HinaVerifyChecksum(), HinaIngress(), HinaEgress(),
         HinaComputeChecksum(), HinaDeparser()) main;
