/* -*- P4_16 -*- hina: homomorphic in-network aggregation for Intel Tofino 1 (TNA) and Tofino 2 (T2NA).
 *
 * The same switch as p4/hina.p4 (BMv2): the same wire format, flags, drop reasons and slot rules,
 * the same tables and actions (control/controller.py's entries fit both), held to the same packet
 * vectors by its model where no Tofino runs (docs/tofino.md).  What Tofino changes: each register is
 * read and written once per pass, in one stage, so the slot's state is split over registers in the
 * order the rules need it (copy_state, run_tags, arrival_bitmap, pending, completer, then the values), and a completed
 * copy, a resend and a stored total finish in a second pass through the recirculation port.
 * This file only includes and wires the controls.
 */
#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

#include "configuration.p4"
#include "headers.p4"
#include "parser.p4"
#include "job_config.p4"
#include "frame_checks.p4"
#include "copy_state.p4"
#include "run_tags.p4"
#include "arrival_bitmap.p4"
#include "slot_rules.p4"
#include "pending.p4"
#include "completer.p4"
#include "value_processor.p4"
#include "forwarding.p4"

#define HINA_VP_DECLARE(i) ValueProcessor() vp##i;
#define HINA_VP_APPLY(i) vp##i.apply(hdr.lo.w##i, hdr.hi.w##i, meta.copy, meta.value_op);

control HinaIngress(inout headers_t hdr, inout metadata_t meta,
                    in ingress_intrinsic_metadata_t standard_metadata,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Counter<bit<32>, drop_reason_t>(DROP_REASONS, CounterType_t.PACKETS) drops;
    JobConfig() job_config;
    WorkerAuth() worker_auth;
    TreeParent() tree_parent;
    FrameChecks() frame_checks;
    CopyStateArg() copy_state_arg;
    CopyState() copy_state;
    RunTags() run_tags;
    ArrivalBitmap() arrival_bitmap;
    ValuePlan() value_plan;
    Arrived() arrived;
    ParentCounted() parent_counted;
    Pending() pending;
    Completer() completer;
    Deliver() deliver;
    Forwarding() forwarding;
    HINA_EACH_WORD(HINA_VP_DECLARE)

    apply {
        /* (the parser made the bridge header of a frame from a port: parser.p4's new_bridge) */
        meta.drop_reason = DROP_NONE;
        meta.value_op = VALUE_NONE;
        meta.guard = 0;
        meta.seen = 0;
        meta.claim = 0;
        meta.tags_ok = 0;
        meta.told = 0;
        meta.phase = (bit<32>) hdr.hina.phase;
        meta.copy = hdr.hina.slot[11:0] ++ hdr.hina.version;

        /* (hina's frames by the parser's flag, not by the UDP port: p4testgen reads a field of an invalid
         * header as unknown, and with it every path's output port) */
        if (!hdr.ethernet.isValid()) {
            meta.drop_reason = DROP_TRUNCATED;
            ig_dprsr_md.drop_ctl = 1;
        } else if (!meta.to_hina) {
            forwarding.apply(hdr, meta, ig_tm_md);
            if (meta.drop_reason != DROP_NONE) {
                ig_dprsr_md.drop_ctl = 1;
            }
        } else {
            job_config.apply(hdr, meta);
            tree_parent.apply(hdr, meta, standard_metadata);
            parent_counted.apply(hdr, meta);
            copy_state_arg.apply(hdr, meta);
            if (hdr.bridge.pass == PASS_NONE) {
                worker_auth.apply(hdr, meta, standard_metadata);
                frame_checks.apply(hdr, meta, ig_prsr_md);
            }
            if (meta.drop_reason == DROP_NONE) {
                copy_state.apply(hdr, meta);
                if (hdr.bridge.pass == PASS_NONE) {
                    run_tags.apply(hdr, meta);
                    if (meta.tags_ok == 1) {   /* (a RESULT only reads it: a PENDING goes down with it) */
                        arrival_bitmap.apply(hdr, meta);
                    }
                }
                value_plan.apply(hdr, meta);
                arrived.apply(hdr, meta);
                pending.apply(hdr, meta);
                completer.apply(hdr, meta);
            }
            /* (not under the test of drop_reason above, which value_op already carries: the verdict
             * writes drop_reason, so a table under that test would have to be placed before it).  A repeat
             * answered PENDING (`told`) never reaches the values, which would OR its words into the copy:
             * its words are written here instead, in a branch that excludes the values', so that the
             * compiler may place the two in one stage */
            if (meta.told == 1) {
                HINA_PENDING_WORDS
            } else if (meta.value_op != VALUE_NONE && (meta.guard == 0 || meta.mine == 0)) {
                HINA_EACH_WORD(HINA_VP_APPLY)
            }
            deliver.apply(hdr, meta, standard_metadata, ig_dprsr_md, ig_tm_md);
        }
        if (meta.drop_reason != DROP_NONE) {
            drops.count(meta.drop_reason);
        }
    }
}

control HinaEgress(inout headers_t hdr, inout metadata_t meta,
                   in egress_intrinsic_metadata_t standard_metadata,
                   in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                   inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                   inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    EgressRewrite() egress_rewrite;
    apply {
        if (hdr.bridge.is_flood == 1 && standard_metadata.egress_port == hdr.bridge.ingress_port) {
            eg_dprsr_md.drop_ctl = 1;   /* a broadcast never goes back where it came from */
        } else if (hdr.bridge.is_result == 1) {
            egress_rewrite.apply(hdr, standard_metadata);
        }
    }
}

Pipeline(HinaIngressParser(), HinaIngress(), HinaIngressDeparser(),
         HinaEgressParser(), HinaEgress(), HinaEgressDeparser()) pipe;

Switch(pipe) main;
