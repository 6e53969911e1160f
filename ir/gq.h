/* gq.h — GPTQ / AWQ linear layers (ir_gq in ir.h): their stored tensors checked against the
 * layer's shape, decoded into the integer rows of ir_weight_read_blocks (IR_STYPE_GPTQ) or into
 * f32. Internal to ir/ (sources.c maps the bytes, this decodes them). */
#ifndef IG_IR_GQ_H
#define IG_IR_GQ_H

#include "ir.h"

/* The stored bytes of one layer (borrowed; g_idx NULL when absent). */
typedef struct ir_gq_src {
    const uint8_t *qweight, *zeros, *scales, *g_idx;
    uint64_t n_qweight, n_zeros, n_scales, n_gidx; /* byte counts */
    ir_stype scales_type;                          /* F16, BF16 or F32 */
} ir_gq_src;

/* Decodes layer t ([N][K], src_type GPTQ or AWQ) into out: raw = 1, N integer rows of
 * ir_gq_row_bytes(K, t->gq.group) bytes; raw = 0, N x K floats. Every size, code, zero point and
 * group index is checked first: a bad one is an error naming the tensor. With raw = 1 a group index
 * must be constant over each run of G consecutive columns (groups may be permuted, columns not:
 * the rows keep groups of consecutive columns); f32 takes any g_idx in range. */
ig_status ir_gq_decode(const ir_tensor *t, const ir_gq_src *src, int raw, uint8_t *out, ig_err *err);

#endif
