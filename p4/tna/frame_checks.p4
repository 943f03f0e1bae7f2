/* hina on Tofino: what a hina frame must be before it meets a slot, in p4/hina.p4's order, so that a
 * frame wrong in several ways is counted under the same reason on every target.  Only a frame that
 * passes every check (drop_reason stays DROP_NONE) reaches the slot's registers. */
#ifndef _HINA_TNA_FRAME_CHECKS_P4_
#define _HINA_TNA_FRAME_CHECKS_P4_

#include "headers.p4"

control FrameChecks(inout headers_t hdr, inout metadata_t meta,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {
    apply {
        /* the rest of the arithmetic the checks and the bitmap need (job_config started it) */
        meta.slot_over = meta.slot_rel - (bit<32>) meta.slot_count;
        meta.need = meta.full_mask & ~meta.worker_bit;
        bool update = hdr.hina.msg_type == MSG_UPDATE;
        bool result = hdr.hina.msg_type == MSG_RESULT;

        if (!hdr.hina.isValid() || hdr.udp.len < HINA_MIN_UDP_LENGTH) {
            meta.drop_reason = DROP_TRUNCATED;
        } else if (meta.checksum_error) {
            meta.drop_reason = DROP_BAD_CHECKSUM;
        } else if (!update && !result) {
            meta.drop_reason = DROP_BAD_MSG_TYPE;
#ifdef HINA_ADD_ONLY
        } else if (hdr.hina.op != OP_ADD) {
#else
        } else if (hdr.hina.op > OP_MAX) {
#endif
            meta.drop_reason = DROP_BAD_OP;
        } else if (!meta.job_hit && result) {
            meta.drop_reason = DROP_BAD_MSG_TYPE;
        } else if (!meta.job_hit) {
            meta.drop_reason = DROP_UNKNOWN_JOB;
        } else if (result && meta.parents == 0) {
            meta.drop_reason = DROP_BAD_MSG_TYPE;   /* only a switch with a parent takes RESULTs */
        } else if (!hdr.hi.isValid() || ig_prsr_md.parser_err != 0 || hdr.udp.len < HINA_UDP_LENGTH) {
            meta.drop_reason = DROP_TRUNCATED;
        } else if (hdr.udp.len > HINA_UDP_LENGTH) {
            meta.drop_reason = DROP_BAD_LENGTH;
        } else if (update && meta.worker_over[15:15] == 0) {
            meta.drop_reason = DROP_BAD_WORKER;     /* worker_id >= workers */
        } else if (update && !meta.allowed) {
            meta.drop_reason = DROP_UNAUTHORIZED;
        } else if (hdr.hina.count > HINA_WORDS) {
            meta.drop_reason = DROP_BAD_COUNT;
        } else if (meta.slot_rel[31:31] == 1 || meta.slot_over[31:31] == 0) {
            meta.drop_reason = DROP_BAD_SLOT;       /* below slot_base, or at slot_base + slot_count and past */
        } else if (result && (meta.has_parent == 0 || meta.parent_diff != 0)) {
            meta.drop_reason = DROP_NOT_PARENT;
        }
    }
}

#endif
