/* hina on Tofino: the values of each slot copy, word i and word K/2 + i in one 64-bit register, one
 * stateful ALU per pair (HINA_HALF of them, four per stage).
 *
 * A register may have at most four RegisterActions and runs one per pass: write (a first arrival, or
 * the parent's total), ADD (int32, wrapping), OR, signed MAX.  Each updates both halves; a Tofino 1
 * stateful ALU hands ONE word back to the packet: WRITE, ADD and MAX the low half (into word i), OR
 * the high half (into word K/2 + i).  The other half is read in the frame's second pass, with the
 * same four actions and nothing changed (slot_rules.p4 prepares the words first):
 *
 *   read the high half: OR, the low half fed its own value (the first pass left it in the packet:
 *     x | x = x) and the high half fed 0;
 *   read the low half:  MAX, the low half fed INT32_MIN (max(x, INT32_MIN) = x) and the high half
 *     fed its own value (max(x, x) = x);
 *   read both (a resend): OR with both halves fed 0 in the first pass hands back the high half, then
 *     as "read the low half" in the second.
 *
 * So a completed copy's RESULT leaves after two passes whatever the operator, and nothing but these
 * four actions ever touches the register. */
#ifndef _HINA_TNA_VALUE_PROCESSOR_P4_
#define _HINA_TNA_VALUE_PROCESSOR_P4_

#include "headers.p4"

struct value_pair_t {
    int<32> lo;
    int<32> hi;
}

control ValueProcessor(inout int<32> lo, inout int<32> hi, in copy_index_t copy, in value_op_t op) {
    Register<value_pair_t, copy_index_t>(HINA_COPIES) values;

    RegisterAction<value_pair_t, copy_index_t, int<32>>(values) write_pair = {
        void apply(inout value_pair_t value, out int<32> rv) {
            value.lo = lo;
            value.hi = hi;
            rv = value.lo;
        }
    };
    RegisterAction<value_pair_t, copy_index_t, int<32>>(values) add_pair = {
        void apply(inout value_pair_t value, out int<32> rv) {
            value.lo = value.lo + lo;
            value.hi = value.hi + hi;
            rv = value.lo;
        }
    };
#ifndef HINA_ADD_ONLY
    RegisterAction<value_pair_t, copy_index_t, int<32>>(values) or_pair = {
        void apply(inout value_pair_t value, out int<32> rv) {
            value.lo = value.lo | lo;
            value.hi = value.hi | hi;
            rv = value.hi;
        }
    };
    RegisterAction<value_pair_t, copy_index_t, int<32>>(values) max_pair = {
        void apply(inout value_pair_t value, out int<32> rv) {
            value.lo = max(value.lo, lo);   /* the stateful ALU's own signed max (maxs) */
            value.hi = max(value.hi, hi);
            rv = value.lo;
        }
    };
#else
    RegisterAction<value_pair_t, copy_index_t, int<32>>(values) read_lo_pair = {
        void apply(inout value_pair_t value, out int<32> rv) {
            rv = value.lo;
        }
    };
    RegisterAction<value_pair_t, copy_index_t, int<32>>(values) read_hi_pair = {
        void apply(inout value_pair_t value, out int<32> rv) {
            rv = value.hi;
        }
    };
#endif

    action do_write() {
        lo = write_pair.execute(copy);
    }
    action do_add() {
        lo = add_pair.execute(copy);
    }
#ifndef HINA_ADD_ONLY
    action do_or() {
        hi = or_pair.execute(copy);
    }
    action do_max() {
        lo = max_pair.execute(copy);
    }
    table value_ops {
        key = { op: exact; }
        actions = { do_write; do_add; do_or; do_max; NoAction; }
        const entries = {
            VALUE_WRITE: do_write();
            VALUE_ADD: do_add();
            VALUE_OR: do_or();
            VALUE_MAX: do_max();
            VALUE_READ_HI: do_or();    /* the low halves fed their own values, the high halves 0 */
            VALUE_READ_LO: do_max();   /* the low halves fed INT32_MIN, the high halves their own values */
        }
        default_action = NoAction();
    }
#else
    action do_read_hi() {
        hi = read_hi_pair.execute(copy);
    }
    action do_read_lo() {
        lo = read_lo_pair.execute(copy);
    }
    table value_ops {
        key = { op: exact; }
        actions = { do_write; do_add; do_read_hi; do_read_lo; NoAction; }
        const entries = {
            VALUE_WRITE: do_write();
            VALUE_ADD: do_add();
            VALUE_READ_HI: do_read_hi();
            VALUE_READ_LO: do_read_lo();
        }
        default_action = NoAction();
    }
#endif

    apply {
        value_ops.apply();
    }
}

#endif
