/* dequant.h — the hook through which quantized (GGUF) weight bytes become f32.
 *
 * ir_weight_read_f32 (sources.c) hands every storage type to ir_dequant (dequant.c): the plain
 * F32/BF16/F16 of safetensors and the GGUF block formats.
 */
#ifndef IG_DEQUANT_H
#define IG_DEQUANT_H

#include <stdint.h>
#include "ir.h"

/* Dequantizes n elements (a whole tensor, row-major, n a multiple of the block size) stored as
 * `t` in src[0..src_nbytes) into dst[0..n). Borrows src and dst. Fails with IG_ERR_FORMAT when
 * src_nbytes does not match n elements of `t`, IG_ERR_UNSUPPORTED for an unknown type. */
ig_status ir_dequant(ir_stype t, const void *src, uint64_t src_nbytes, int64_t n, float *dst,
                     ig_err *err);

#endif
