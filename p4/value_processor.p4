/* hina: the 32 values of each slot copy.  Writes (first arrival), combines
 * (ADD wrapping, OR, signed MAX) and leaves the copy's running value in
 * the packet, so a completing UPDATE carries the result out.  With
 * read_only set it only copies the stored values into the packet (RESEND). */
#ifndef _HINA_VALUE_PROCESSOR_P4_
#define _HINA_VALUE_PROCESSOR_P4_

#include "headers.p4"

#define HINA_WORD(i, w)                                                   \
    values.read(stored, base + i);                                        \
    if (read_only == 1) {                                                 \
        payload.w = stored;                                               \
    } else {                                                              \
        if (first == 1) {                                                 \
            stored = payload.w;                                           \
        } else if (op == OP_ADD) {                                        \
            stored = stored + payload.w;                                  \
        } else if (op == OP_OR) {                                         \
            stored = stored | payload.w;                                  \
        } else if ((int<32>) payload.w > (int<32>) stored) {              \
            stored = payload.w;                                           \
        }                                                                 \
        values.write(base + i, stored);                                   \
        payload.w = stored;                                               \
    }

control ValueProcessor(inout hina_payload_t payload, in bit<32> copy, in bit<8> op,
                       in bit<1> first, in bit<1> read_only) {
    register<bit<32>>(HINA_VALUES) values;

    apply {
        bit<32> base = copy * HINA_WORDS;
        bit<32> stored;
        HINA_WORD(0, w00)  HINA_WORD(1, w01)  HINA_WORD(2, w02)  HINA_WORD(3, w03)
        HINA_WORD(4, w04)  HINA_WORD(5, w05)  HINA_WORD(6, w06)  HINA_WORD(7, w07)
        HINA_WORD(8, w08)  HINA_WORD(9, w09)  HINA_WORD(10, w10) HINA_WORD(11, w11)
        HINA_WORD(12, w12) HINA_WORD(13, w13) HINA_WORD(14, w14) HINA_WORD(15, w15)
        HINA_WORD(16, w16) HINA_WORD(17, w17) HINA_WORD(18, w18) HINA_WORD(19, w19)
        HINA_WORD(20, w20) HINA_WORD(21, w21) HINA_WORD(22, w22) HINA_WORD(23, w23)
        HINA_WORD(24, w24) HINA_WORD(25, w25) HINA_WORD(26, w26) HINA_WORD(27, w27)
        HINA_WORD(28, w28) HINA_WORD(29, w29) HINA_WORD(30, w30) HINA_WORD(31, w31)
    }
}

#endif
