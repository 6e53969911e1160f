/* embed.c — template: gather embedding rows from the panel-packed embedding table.
 *
 * Instantiate with EM_NAME, EM_D (hidden size), EM_WBF16 (table type), EM_SCALE (rows are
 * multiplied by it: Gemma's sqrt(hidden); default 1); defines
 *   static void EM_NAME(int T, const int32_t *ids, const void *w, float *x, int nth);
 * The table E [V][D] is stored as matmul panels (N = V, K = D) so a tied lm_head reads the same
 * bytes: row id lives in panel id/16 at lane id%16, i.e. one 4-byte (bf16 pair) or 4-byte (f32)
 * element per 64-byte line. The gather touches D/2 (bf16) or D (f32) lines per token, which is
 * negligible next to one matmul. A quantized table (EM_WQ) is dequantized row by row (quant.h).
 * ids must be valid (the runtime checks them).
 * Tensor parallel (EM_ROWS > 0): the table holds only the rows [lo, lo + EM_ROWS) of the
 * vocabulary, and the function takes lo as a last parameter:
 *   static void EM_NAME(int T, const int32_t *ids, const void *w, float *x, int nth, int32_t lo);
 * a token outside the slice gets a zero row (the all-reduce after it adds the owning rank's).
 */
#include "common.h"
#include "quant.h"

#ifndef EM_NAME
#define EM_NAME ig_embed
#endif
#ifndef EM_D
#define EM_D 2048
#endif
#ifndef EM_WBF16
#define EM_WBF16 1
#endif
#ifndef EM_SCALE
#define EM_SCALE 1.0f
#endif
#ifndef EM_WQ /* quantized table (quant.h): an IG_WQ_* format (group EM_WG where it has one); 0: float */
#define EM_WQ 0
#endif
#ifndef EM_WG
#define EM_WG 128
#endif

#ifndef EM_ROWS
#define EM_ROWS 0
#endif

#if EM_ROWS
static void EM_NAME(int T, const int32_t *ids, const void *w, float *x, int nth, int32_t lo) {
#else
static void EM_NAME(int T, const int32_t *ids, const void *w, float *x, int nth) {
    const int32_t lo = 0;
#endif
    _Static_assert(!EM_WBF16 || EM_D % 2 == 0, "bf16 panels need an even D");
#pragma omp parallel for num_threads(nth) schedule(static) if (T >= 64)
    for (int t = 0; t < T; t++) {
        int id = ids[t] - lo, p = id / 16, j = id % 16;
        float *xr = x + (size_t)t * EM_D;
        if (EM_ROWS && (id < 0 || id >= EM_ROWS)) {
            memset(xr, 0, sizeof(float) * EM_D);
            continue;
        }
        if (EM_WQ) {
            ig_wq_row(EM_WQ, EM_D, EM_WG, (const char *)w + (size_t)p * ig_wq_panel_bytes(EM_WQ, EM_D, EM_WG), j, 0, EM_D, xr);
        } else if (EM_WBF16) {
            /* panel p: [D/2][16][2]; the pair (2k', 2k'+1) of lane j is one 32-bit word */
            const uint16_t *pw = (const uint16_t *)w + (size_t)p * EM_D * 16 + 2 * j;
            for (int k = 0; k < EM_D / 2; k++) {
                xr[2 * k] = ig_bf16_to_f32(pw[(size_t)k * 32]);
                xr[2 * k + 1] = ig_bf16_to_f32(pw[(size_t)k * 32 + 1]);
            }
        } else {
            const float *pw = (const float *)w + (size_t)p * EM_D * 16 + j;
            for (int k = 0; k < EM_D; k++) xr[k] = pw[(size_t)k * 16];
        }
        if (EM_SCALE != 1.0f) ig_scale(xr, EM_SCALE, EM_D);
    }
}

#undef EM_NAME
#undef EM_D
#undef EM_WBF16
#undef EM_SCALE
#undef EM_WQ
#undef EM_WG
#undef EM_ROWS
