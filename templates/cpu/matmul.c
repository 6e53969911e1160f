/* matmul.c — template: Y = X · Wᵀ (+ bias) with a fused epilogue (store, residual add, SwiGLU, GeGLU),
 * W packed in 16-row panels (see SPEC.md). This is the hot path of every model: decode (T == 1)
 * is bound by how fast the weights stream from memory, prefill (T > 1) by FMA / dpbf16 throughput.
 *
 * Instantiate with MM_NAME, MM_K, MM_N, MM_WBF16, MM_XBF16, MM_BIAS, MM_EPI, MM_LDY, MM_YBF16;
 * defines  static void MM_NAME(int T, const void *x, const void *w, const float *bias, void *y,
 *                              int nth);
 *
 * Work is organized in panel pairs (panels 2q and 2q+1, 32 outputs): the unit threads split, the
 * width of the register block, and for SwiGLU exactly one gate panel plus its up panel.
 *  - T == 1: each thread streams its contiguous range of panels once (one sequential stream per
 *    thread, which the hardware prefetcher likes), four independent accumulators per panel and a
 *    software prefetch a few KB ahead.
 *  - T > 1: for each block of up to MM_TB rows and each panel pair, the K range is cut into chunks
 *    of MM_KC k-pairs (the pair's chunk, 16 KB of bf16, stays in L1) and every group of up to RB
 *    rows runs a register-blocked micro-kernel over the chunk, accumulating into a small tile that
 *    the epilogue turns into y. W is read from memory once per row block of MM_TB rows.
 * Each ISA (AVX-512 with/without BF16, AVX2+FMA, AArch64 NEON, scalar) implements the same micro-kernel
 * contract; the driver at the bottom is shared.
 *
 * Quantized weights (MM_WQ = 8: int8 per-row scale, 4: uint4 with scale and min per group of MM_WG
 * along K, 5 / 6: uint4 / uint6 with 8-bit group scales and mins under a per-superblock f16 pair,
 * 9: int8 per group; layouts in quant.h): decode streams them through ig_wq_gemv; prefill
 * dequantizes each K chunk of a panel pair once per row block into the f32 panel layout and runs
 * the f32 micro-kernel on it. MM_WBF16 is then unused. MM_WQ = 10 (a8w8: int8 per-row weights with
 * k in quads), 14 (Q4I: a16w4's uint4 in k-octets) and 15 (Q8I: a16w8's int8 in k-quads) have their
 * own path for every T: the rows are quantized per token (int8 per 32 columns; Q8I int16 per 256)
 * and multiplied in int32 (quant.h's ig_wq_xquant / ig_wq_xgemm: vpdpbusd / vpdpwssd where
 * AVX-512 VNNI or AVX-VNNI is compiled in, vpmaddubsw / vpmaddwd on AVX2).
 */
#include "common.h"
#include "quant.h"

#ifndef MM_NAME
#define MM_NAME ig_matmul
#endif
#ifndef MM_K
#define MM_K 2048
#endif
#ifndef MM_N
#define MM_N 2048
#endif
#ifndef MM_WBF16
#define MM_WBF16 1
#endif
#ifndef MM_WQ /* 0: float weights (MM_WBF16), or a quant.h format: IG_WQ_Q8C, Q4G, Q4K, Q6K, Q8G, Q8A, Q4Z, Q8Z, Q4I, Q8I */
#define MM_WQ 0
#endif
#ifndef MM_WG /* Q4G / Q4K / Q6K / Q8G group size along K */
#define MM_WG 128
#endif
#ifndef MM_XBF16
#define MM_XBF16 1
#endif
#ifndef MM_BIAS
#define MM_BIAS 0
#endif
#ifndef MM_EPI_STORE
#define MM_EPI_STORE 0
#define MM_EPI_ACC 1
#define MM_EPI_SWIGLU 2
#define MM_EPI_GEGLU 3
#endif
#ifndef MM_EPI
#define MM_EPI MM_EPI_STORE
#endif
#ifndef MM_LDY /* row stride of y in elements; for SwiGLU y has MM_N/2 columns */
#define MM_LDY ((MM_EPI) == MM_EPI_SWIGLU || (MM_EPI) == MM_EPI_GEGLU ? (MM_N) / 2 : (MM_N))
#endif
#ifndef MM_YBF16 /* SwiGLU output type (STORE/ACC always write f32) */
#define MM_YBF16 0
#endif
#ifndef MM_TB /* rows per row block: the tile is MM_TB x 32 floats on the stack */
#define MM_TB 192
#endif
#ifndef MM_QRB /* integer activations: rows quantized per block, their codes <= MM_QRB_BYTES of stack
                  (IG_WQ_XRB(wq)..64 rows, a multiple of it); each block streams the weights once */
#define MM_QRB_BYTES 131072
#define MM_QRB                                                                                                   \
    IG_MAX(IG_WQ_XRB(MM_WQ), IG_MIN(64, MM_QRB_BYTES / (int)IG_WQ_XQ_BYTES(MM_WQ, MM_K, MM_WG)) / IG_WQ_XRB(MM_WQ) * \
                                 IG_WQ_XRB(MM_WQ))
#endif
#ifndef MM_KC /* k-pairs per K chunk */
#define MM_KC 128
#endif

/* this instance's prefill runs on AMX tiles: bf16 weights and activations, at least one block of
 * 32 k */
#if defined(IG_AMX) && MM_WBF16 && MM_XBF16 && !MM_WQ && MM_K >= 32
#define IG_MM_AMX 1
#else
#define IG_MM_AMX 0
#endif
/* ... or a16w8's Q8I, a8w8's Q8A (the same bytes) or a16w4's Q4I weights with bf16 activations,
 * whole blocks of 32 k, for steps of MM_AMX_TMIN tokens and more (fewer: the integer-activation
 * path, which reads the codes as they are); the weights are converted to bf16 a K chunk at a time
 * and the rows are taken as they are (a8w8's prefill then quantizes no activations) */
#define IG_WQ_AMXQ(wq) ((wq) == IG_WQ_Q8I || (wq) == IG_WQ_Q8A || ((wq) == IG_WQ_Q4I && MM_WG % 8 == 0))
#ifndef IG_AMX_QUANT /* 0 (--tune cpu_amx_q=0): every instance's quantized weights stay on the integer path */
#define IG_AMX_QUANT 1
#endif
#if defined(IG_AMX) && IG_AMX_QUANT && IG_WQ_AMXQ(MM_WQ) && MM_XBF16 && MM_K % 32 == 0 && MM_KC % 16 == 0
#define IG_MM_AMXQ 1
#else
#define IG_MM_AMXQ 0
#endif
#ifndef MM_AMX_TMIN
#define MM_AMX_TMIN 32
#endif
#ifndef MM_AMX_TB /* AMX Q8I: rows per row block (each block converts the codes once; f32 sums on the stack) */
#define MM_AMX_TB 512
#endif

#ifndef IG_MATMUL_HELPERS
#define IG_MATMUL_HELPERS

/* Bytes of one k-pair in a panel: bf16 [16][2] = 64 B, f32 two [16] lines = 128 B. */
#define IG_MM_LB(wb) ((wb) ? 64 : 128)
/* Software prefetch distance for streamed weights, in bytes ahead of the current line. */
#ifndef IG_MM_PF
#define IG_MM_PF 2048
#endif

#if defined(IG_AVX512)

/* Weight k-pair of one panel as f32: even k lanes and odd k lanes (bf16 unpack is exact). */
IG_INLINE void ig_mm512_w(int wb, const char *wl, __m512 *we, __m512 *wo) {
    if (wb) {
        __m512i v = _mm512_loadu_si512((const void *)wl);
        *we = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        *wo = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
    } else {
        *we = _mm512_loadu_ps((const float *)wl);
        *wo = _mm512_loadu_ps((const float *)wl + 16);
    }
}
/* Activation k-pair l of one row, broadcast as f32. */
IG_INLINE void ig_mm512_x(int xb, const void *xr, int l, __m512 *xe, __m512 *xo) {
    if (xb) {
        int32_t v;
        memcpy(&v, (const uint16_t *)xr + 2 * l, 4);
        __m512i b = _mm512_set1_epi32(v);
        *xe = _mm512_castsi512_ps(_mm512_slli_epi32(b, 16));
        *xo = _mm512_castsi512_ps(_mm512_and_si512(b, _mm512_set1_epi32((int)0xffff0000u)));
    } else {
        *xe = _mm512_set1_ps(((const float *)xr)[2 * l]);
        *xo = _mm512_set1_ps(((const float *)xr)[2 * l + 1]);
    }
}

/* Micro-kernel: tile[r][16p + j] (+)= sum over k-pairs [l0, l1) of x[r] · W[panel p], for nr rows
 * (nr <= 12) and npn panels (1 or 2). x rows are ldx elements apart; panel p starts at
 * w + p * wps bytes. 2R accumulators + the weight line(s) + broadcasts fit the 32 zmm. */
IG_INLINE void ig_mm_mk(int nr, int npn, int wb, int xb, const void *x, int ldx, const char *w,
                        size_t wps, int l0, int l1, float *tile, int init) {
    __m512 acc[12][2];
    const int lb = IG_MM_LB(wb);
#pragma GCC unroll 12
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 2
        for (int p = 0; p < npn; p++)
            acc[r][p] = init ? _mm512_setzero_ps() : _mm512_loadu_ps(tile + r * 32 + 16 * p);
#if defined(IG_AVX512BF16)
    if (wb && xb) {
        const uint16_t *xs = (const uint16_t *)x;
        for (int l = l0; l < l1; l++) {
            const char *wl = w + (size_t)l * 64;
            _mm_prefetch(wl + IG_MM_PF, _MM_HINT_T0);
            __m512bh w0 = (__m512bh)_mm512_loadu_si512((const void *)wl);
            __m512bh w1 = w0;
            if (npn > 1) {
                _mm_prefetch(wl + wps + IG_MM_PF, _MM_HINT_T0);
                w1 = (__m512bh)_mm512_loadu_si512((const void *)(wl + wps));
            }
#pragma GCC unroll 12
            for (int r = 0; r < nr; r++) {
                int32_t v;
                memcpy(&v, xs + (size_t)r * ldx + 2 * l, 4);
                __m512bh xb2 = (__m512bh)_mm512_set1_epi32(v);
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], xb2, w0);
                if (npn > 1) acc[r][1] = _mm512_dpbf16_ps(acc[r][1], xb2, w1);
            }
        }
    } else
#endif
    {
        for (int l = l0; l < l1; l++) {
            const char *wl = w + (size_t)l * lb;
            __m512 we0, wo0, we1, wo1;
            _mm_prefetch(wl + IG_MM_PF, _MM_HINT_T0);
            ig_mm512_w(wb, wl, &we0, &wo0);
            we1 = we0, wo1 = wo0;
            if (npn > 1) {
                _mm_prefetch(wl + wps + IG_MM_PF, _MM_HINT_T0);
                ig_mm512_w(wb, wl + wps, &we1, &wo1);
            }
#pragma GCC unroll 12
            for (int r = 0; r < nr; r++) {
                __m512 xe, xo;
                ig_mm512_x(xb, (xb ? (const void *)((const uint16_t *)x + (size_t)r * ldx)
                                   : (const void *)((const float *)x + (size_t)r * ldx)),
                           l, &xe, &xo);
                acc[r][0] = _mm512_fmadd_ps(xe, we0, acc[r][0]);
                acc[r][0] = _mm512_fmadd_ps(xo, wo0, acc[r][0]);
                if (npn > 1) {
                    acc[r][1] = _mm512_fmadd_ps(xe, we1, acc[r][1]);
                    acc[r][1] = _mm512_fmadd_ps(xo, wo1, acc[r][1]);
                }
            }
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 2
        for (int p = 0; p < npn; p++) _mm512_storeu_ps(tile + r * 32 + 16 * p, acc[r][p]);
}
#define IG_MM_RB 12

#if defined(IG_AMX)
/* AMX prefill of bf16 weights and activations: a panel's k-pair lines (16 columns x 2 bf16, 64 B)
 * are the B-tile layout as packed, so 16 k-pairs of a panel (1 KB, contiguous) load as one tile,
 * and 16 rows x 32 bf16 of x as an A tile. Tiles 0..3 hold C (rows 0-15 / 16-31 x panel 0 / 1,
 * f32), 4 and 5 the two A tiles, 6 and 7 the pair's B tiles: a 32 x 32 block of outputs per pass
 * over K, four TDPBF16PS per 32 k. Configuration (palette 1): tiles of `r0` / `r1` rows for the
 * two row halves (r1 = 0: unused), B tiles 16 rows, every used tile 64 bytes wide. */
typedef struct ig_amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} ig_amx_cfg;

IG_INLINE void ig_amx_config(int r0, int r1) {
    IG_ALIGN64 ig_amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    const int rows[8] = {r0, r0, r1, r1, r0, r1, 16, 16};
    for (int i = 0; i < 8; i++) {
        c.rows[i] = (uint8_t)rows[i];
        c.colsb[i] = rows[i] ? 64 : 0;
    }
    _tile_loadconfig(&c);
}

/* tile[r][16p + j] (+)= sum over k-pairs [0, 16 nkb) of x[r] · W[panel p] for r < 16 (two = 0) or
 * r < 32 (two = 1, the second half's rows as configured) and npn panels; x rows ldx bf16 apart,
 * tile rows 32 floats apart. */
IG_INLINE void ig_amx_block(int two, int npn, const uint16_t *x, int ldx, const char *w, size_t wps, int nkb,
                            float *tile, int init) {
    const size_t xs = (size_t)ldx * 2;
    if (init) {
        _tile_zero(0);
        if (npn > 1) _tile_zero(1);
        if (two) {
            _tile_zero(2);
            if (npn > 1) _tile_zero(3);
        }
    } else {
        _tile_loadd(0, tile, 128);
        if (npn > 1) _tile_loadd(1, tile + 16, 128);
        if (two) {
            _tile_loadd(2, tile + 16 * 32, 128);
            if (npn > 1) _tile_loadd(3, tile + 16 * 32 + 16, 128);
        }
    }
    for (int kb = 0; kb < nkb; kb++) {
        const char *wl = w + (size_t)kb * 1024;
        _tile_loadd(6, wl, 64);
        if (npn > 1) _tile_loadd(7, wl + wps, 64);
        _tile_loadd(4, x + 32 * kb, xs);
        _tile_dpbf16ps(0, 4, 6);
        if (npn > 1) _tile_dpbf16ps(1, 4, 7);
        if (two) {
            _tile_loadd(5, x + 16 * (size_t)ldx + 32 * kb, xs);
            _tile_dpbf16ps(2, 5, 6);
            if (npn > 1) _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, tile, 128);
    if (npn > 1) _tile_stored(1, tile + 16, 128);
    if (two) {
        _tile_stored(2, tile + 16 * 32, 128);
        if (npn > 1) _tile_stored(3, tile + 16 * 32 + 16, 128);
    }
}

/* The rows [0, tn) of a row block against one panel pair over the k-pairs [0, 16 nkb), 32 rows a
 * pass, into tile (init) or onto it; *cfg is the thread's current configuration (r0 * 32 + r1),
 * reloaded only when it changes. */
IG_INLINE void ig_amx_rows(int tn, int npn, const uint16_t *x, int ldx, const char *w, size_t wps, int nkb,
                           float *tile, int init, int *cfg) {
    for (int r = 0; r < tn; r += 32) {
        int n = IG_MIN(32, tn - r), r0 = IG_MIN(16, n), r1 = n - r0;
        if (*cfg != r0 * 32 + r1) {
            ig_amx_config(r0, r1);
            *cfg = r0 * 32 + r1;
        }
        const uint16_t *xr = x + (size_t)r * ldx;
        if (r1 && npn > 1) ig_amx_block(1, 2, xr, ldx, w, wps, nkb, tile + r * 32, init);
        else if (r1) ig_amx_block(1, 1, xr, ldx, w, wps, nkb, tile + r * 32, init);
        else if (npn > 1) ig_amx_block(0, 2, xr, ldx, w, wps, nkb, tile + r * 32, init);
        else ig_amx_block(0, 1, xr, ldx, w, wps, nkb, tile + r * 32, init);
    }
}

/* One k-quad line of weights as f32, f[c] = lanes 4c..4c+3 x the quad's 4 columns (lane j's
 * columns at 4j..4j+3 in order), stored as two bf16 k-pair lines at d (k-pair 2m) and d + 32
 * (2m + 1): after conversion dword 2j holds lane j's columns 0, 1 and dword 2j + 1 its 2, 3. */
IG_INLINE void ig_amx_quad_store(const __m512 f[4], uint16_t *d) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    __m512i lo = (__m512i)_mm512_cvtne2ps_pbh(f[1], f[0]), hi = (__m512i)_mm512_cvtne2ps_pbh(f[3], f[2]);
    _mm512_storeu_si512((void *)d, _mm512_permutex2var_epi32(lo, ev, hi));
    _mm512_storeu_si512((void *)(d + 32), _mm512_permutex2var_epi32(lo, od, hi));
}

/* Q8A / Q8I codes of k-pairs [l0, l1) of one panel (l0, l1 even: whole k-quads) as bf16 k-pair
 * lines (the bf16 panel layout; int8 is exact in bf16, the row scales are applied to the sums). */
IG_INLINE void ig_amx_q8_pairs(const char *panel, int l0, int l1, uint16_t *dst) {
    const char *q = panel + 64; /* past the f32 row scales */
    for (int l = l0; l < l1; l += 2) {
        const char *ql = q + (size_t)(l / 2) * 64;
        __m512 f[4];
        for (int c = 0; c < 4; c++)
            f[c] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(ql + 16 * c))));
        ig_amx_quad_store(f, dst + (size_t)(l - l0) * 32);
    }
}

/* Q4I weights of k-pairs [l0, l1) of one panel (l0 a multiple of 4: whole k-octets; groups of G,
 * a multiple of 8) dequantized, m + s q in f32 rounded to bf16, as bf16 k-pair lines. An octet
 * block's low nibbles are the quad of its columns 0..3 in the k-quad layout, the high ones 4..7. */
IG_INLINE void ig_amx_q4i_pairs(const char *panel, int G, int l0, int l1, uint16_t *dst) {
    const __m512i quarter = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3); /* element e: e / 4 */
    __m512 s4[4], m4[4];
    int cur = -1;
    const char *gb = panel;
    for (int l = l0; l < l1; l += 4) {
        const int k = 2 * l, g = k / G;
        if (g != cur) {
            IG_ALIGN64 float sv[16], mv[16];
            gb = panel + IG_WQ_KGRP(IG_WQ_Q4I, G, g);
            ig_wq_k_scales(IG_WQ_Q4I, panel + IG_WQ_KHDR(IG_WQ_Q4I, G, g), (const uint8_t *)gb, sv, mv);
            const __m512 s = _mm512_load_ps(sv), m = _mm512_load_ps(mv);
            for (int c = 0; c < 4; c++) { /* lane 4c + e / 4 for element e */
                const __m512i ix = _mm512_add_epi32(_mm512_set1_epi32(4 * c), quarter);
                s4[c] = _mm512_permutexvar_ps(ix, s);
                m4[c] = _mm512_permutexvar_ps(ix, m);
            }
            cur = g;
        }
        const __m512i b = _mm512_loadu_si512((const void *)(gb + 32 + (size_t)((k % G) / 8) * 64));
        const __m512i nib[2] = {_mm512_and_si512(b, _mm512_set1_epi8(15)),
                                _mm512_and_si512(_mm512_srli_epi16(b, 4), _mm512_set1_epi8(15))};
        for (int h = 0; h < 2; h++) {
            __m512 f[4];
            f[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_castsi512_si128(nib[h])));
            f[1] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(nib[h], 1)));
            f[2] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(nib[h], 2)));
            f[3] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(nib[h], 3)));
            for (int c = 0; c < 4; c++) f[c] = _mm512_fmadd_ps(f[c], s4[c], m4[c]);
            ig_amx_quad_store(f, dst + (size_t)(l - l0 + 2 * h) * 32);
        }
    }
}
#endif /* IG_AMX */

/* Decode: out[0..16) = x · W[panel] over all nl k-pairs; four accumulators break the add chain. */
IG_INLINE void ig_mm_gemv(int wb, int xb, const void *x, const char *w, int nl, float *out) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int lb = IG_MM_LB(wb);
    int l = 0;
    for (; l + 4 <= nl; l += 4) {
        const char *wl = w + (size_t)l * lb;
        _mm_prefetch(wl + IG_MM_PF, _MM_HINT_T0);
        _mm_prefetch(wl + IG_MM_PF + 64, _MM_HINT_T0);
        _mm_prefetch(wl + IG_MM_PF + 128, _MM_HINT_T0);
        _mm_prefetch(wl + IG_MM_PF + 192, _MM_HINT_T0);
        if (!wb) {
            _mm_prefetch(wl + IG_MM_PF + 256, _MM_HINT_T0);
            _mm_prefetch(wl + IG_MM_PF + 320, _MM_HINT_T0);
            _mm_prefetch(wl + IG_MM_PF + 384, _MM_HINT_T0);
            _mm_prefetch(wl + IG_MM_PF + 448, _MM_HINT_T0);
        }
#if defined(IG_AVX512BF16)
        if (wb && xb) {
            int32_t v[4];
            memcpy(v, (const uint16_t *)x + 2 * l, 16);
            a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_set1_epi32(v[0]), (__m512bh)_mm512_loadu_si512((const void *)wl));
            a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_set1_epi32(v[1]), (__m512bh)_mm512_loadu_si512((const void *)(wl + 64)));
            a2 = _mm512_dpbf16_ps(a2, (__m512bh)_mm512_set1_epi32(v[2]), (__m512bh)_mm512_loadu_si512((const void *)(wl + 128)));
            a3 = _mm512_dpbf16_ps(a3, (__m512bh)_mm512_set1_epi32(v[3]), (__m512bh)_mm512_loadu_si512((const void *)(wl + 192)));
            continue;
        }
#endif
        __m512 we, wo, xe, xo;
        ig_mm512_w(wb, wl, &we, &wo);
        ig_mm512_x(xb, x, l, &xe, &xo);
        a0 = _mm512_fmadd_ps(xe, we, a0);
        a1 = _mm512_fmadd_ps(xo, wo, a1);
        ig_mm512_w(wb, wl + lb, &we, &wo);
        ig_mm512_x(xb, x, l + 1, &xe, &xo);
        a2 = _mm512_fmadd_ps(xe, we, a2);
        a3 = _mm512_fmadd_ps(xo, wo, a3);
        ig_mm512_w(wb, wl + 2 * lb, &we, &wo);
        ig_mm512_x(xb, x, l + 2, &xe, &xo);
        a0 = _mm512_fmadd_ps(xe, we, a0);
        a1 = _mm512_fmadd_ps(xo, wo, a1);
        ig_mm512_w(wb, wl + 3 * lb, &we, &wo);
        ig_mm512_x(xb, x, l + 3, &xe, &xo);
        a2 = _mm512_fmadd_ps(xe, we, a2);
        a3 = _mm512_fmadd_ps(xo, wo, a3);
    }
    for (; l < nl; l++) {
        const char *wl = w + (size_t)l * lb;
#if defined(IG_AVX512BF16)
        if (wb && xb) {
            int32_t v;
            memcpy(&v, (const uint16_t *)x + 2 * l, 4);
            a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_set1_epi32(v), (__m512bh)_mm512_loadu_si512((const void *)wl));
            continue;
        }
#endif
        __m512 we, wo, xe, xo;
        ig_mm512_w(wb, wl, &we, &wo);
        ig_mm512_x(xb, x, l, &xe, &xo);
        a0 = _mm512_fmadd_ps(xe, we, a0);
        a1 = _mm512_fmadd_ps(xo, wo, a1);
    }
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

#elif defined(IG_AVX2)

/* AVX2: a panel is two ymm halves (outputs 0-7, 8-15); one panel per call, nr <= 4 rows:
 * 8 accumulators + 4 unpacked weight vectors + 2 broadcasts = 14 of the 16 ymm. */
IG_INLINE void ig_mm_mk1(int nr, int wb, int xb, const void *x, int ldx, const char *w, int l0,
                         int l1, float *tile, int init) {
    __m256 acc[4][2];
    const int lb = IG_MM_LB(wb);
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
        acc[r][0] = init ? _mm256_setzero_ps() : _mm256_loadu_ps(tile + r * 32);
        acc[r][1] = init ? _mm256_setzero_ps() : _mm256_loadu_ps(tile + r * 32 + 8);
    }
    for (int l = l0; l < l1; l++) {
        const char *wl = w + (size_t)l * lb;
        __m256 we0, wo0, we1, wo1;
        _mm_prefetch(wl + IG_MM_PF, _MM_HINT_T0);
        if (wb) {
            __m256i v0 = _mm256_loadu_si256((const __m256i *)wl);
            __m256i v1 = _mm256_loadu_si256((const __m256i *)(wl + 32));
            we0 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16));
            wo0 = _mm256_castsi256_ps(_mm256_and_si256(v0, hi));
            we1 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16));
            wo1 = _mm256_castsi256_ps(_mm256_and_si256(v1, hi));
        } else {
            _mm_prefetch(wl + IG_MM_PF + 64, _MM_HINT_T0);
            const float *wf = (const float *)wl;
            we0 = _mm256_loadu_ps(wf);
            we1 = _mm256_loadu_ps(wf + 8);
            wo0 = _mm256_loadu_ps(wf + 16);
            wo1 = _mm256_loadu_ps(wf + 24);
        }
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
            __m256 xe, xo;
            if (xb) {
                int32_t v;
                memcpy(&v, (const uint16_t *)x + (size_t)r * ldx + 2 * l, 4);
                __m256i b = _mm256_set1_epi32(v);
                xe = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
                xo = _mm256_castsi256_ps(_mm256_and_si256(b, hi));
            } else {
                xe = _mm256_broadcast_ss((const float *)x + (size_t)r * ldx + 2 * l);
                xo = _mm256_broadcast_ss((const float *)x + (size_t)r * ldx + 2 * l + 1);
            }
            acc[r][0] = _mm256_fmadd_ps(xe, we0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(xe, we1, acc[r][1]);
            acc[r][0] = _mm256_fmadd_ps(xo, wo0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(xo, wo1, acc[r][1]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
        _mm256_storeu_ps(tile + r * 32, acc[r][0]);
        _mm256_storeu_ps(tile + r * 32 + 8, acc[r][1]);
    }
}

/* One row (decode): bf16 weights take four accumulator chains (even / odd k of each half), so
 * no k-pair waits on the last one's two FMAs: ig_mm_mk1's one-row chains are two FMAs deep per
 * k-pair, which bound a Zen 2 core to ~11 GB/s of weights (1B gate|up 2048 x 16384 from DRAM:
 * 6.3 -> 5.1-5.8 ms; unrolling to eight chains measured no faster). f32 weights keep ig_mm_mk1. */
IG_INLINE void ig_mm_gemv(int wb, int xb, const void *x, const char *w, int nl, float *out) {
    if (!wb) {
        IG_ALIGN64 float t[32];
        ig_mm_mk1(1, wb, xb, x, 0, w, 0, nl, t, 1);
        memcpy(out, t, 16 * sizeof(float));
        return;
    }
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int l = 0; l < nl; l++) {
        const char *wl = w + (size_t)l * 64;
        _mm_prefetch(wl + IG_MM_PF, _MM_HINT_T0);
        const __m256i v0 = _mm256_loadu_si256((const __m256i *)wl), v1 = _mm256_loadu_si256((const __m256i *)(wl + 32));
        __m256 xe, xo;
        if (xb) {
            int32_t v;
            memcpy(&v, (const uint16_t *)x + 2 * l, 4);
            const __m256i b = _mm256_set1_epi32(v);
            xe = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16)), xo = _mm256_castsi256_ps(_mm256_and_si256(b, hi));
        } else {
            xe = _mm256_broadcast_ss((const float *)x + 2 * l), xo = _mm256_broadcast_ss((const float *)x + 2 * l + 1);
        }
        a0 = _mm256_fmadd_ps(xe, _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16)), a0);
        a1 = _mm256_fmadd_ps(xe, _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16)), a1);
        a2 = _mm256_fmadd_ps(xo, _mm256_castsi256_ps(_mm256_and_si256(v0, hi)), a2);
        a3 = _mm256_fmadd_ps(xo, _mm256_castsi256_ps(_mm256_and_si256(v1, hi)), a3);
    }
    _mm256_storeu_ps(out, _mm256_add_ps(a0, a2));
    _mm256_storeu_ps(out + 8, _mm256_add_ps(a1, a3));
}

#elif defined(IG_NEON)

#if defined(IG_NEON_BF16)
/* BFMMLA (ARMv8.6 +bf16), bf16 x bf16 for 2..4 rows: one instruction multiplies a 2 x 4 block of
 * x (two rows, four k) by a 4 x 2 block of W (four k, two outputs) into a 2 x 2 f32 tile, twice a
 * BFDOT's work. The panel's k-pairs l and l + 1 zip (ZIP1 / ZIP2 of 32-bit lanes) into the
 * (output, four k) halves BFMMLA takes, a row pair's x is two 64-bit loads; an odd last k-pair
 * runs with zeros for the pair after it. Accumulators c[p][q] = rows 2p, 2p+1 x outputs 2q, 2q+1
 * (2 x 8 of them + 8 weight vectors + 2 x = 26 v registers); a third row pairs with a copy of
 * itself whose results are dropped. */
IG_INLINE bfloat16x8_t ig_mm_xpair(const uint16_t *r0, const uint16_t *r1, int l, int tail) {
    if (!tail) return vreinterpretq_bf16_u16(vcombine_u16(vld1_u16(r0 + 2 * l), vld1_u16(r1 + 2 * l)));
    uint32_t a, b;
    memcpy(&a, r0 + 2 * l, 4);
    memcpy(&b, r1 + 2 * l, 4);
    return vreinterpretq_bf16_u32(vcombine_u32(vcreate_u32(a), vcreate_u32(b)));
}

IG_INLINE void ig_mm_mk1_mmla(int nr, const uint16_t *x, int ldx, const char *w, int l0, int l1, float *tile,
                              int init) {
    float32x4_t c[2][8];
    const int np = (nr + 1) / 2;
    const uint16_t *xr[4];
    for (int r = 0; r < 4; r++) xr[r] = x + (size_t)(r < nr ? r : nr - 1) * ldx;
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < 8; q++) c[p][q] = vdupq_n_f32(0.0f);
    for (int l = l0; l < l1; l += 2) {
        const int tail = l + 1 == l1;
        const char *wl = w + (size_t)l * 64;
        __builtin_prefetch(wl + IG_MM_PF);
        __builtin_prefetch(wl + IG_MM_PF + 64);
        bfloat16x8_t b[8];
        for (int g = 0; g < 4; g++) {
            uint32x4_t v0 = vld1q_u32((const uint32_t *)(wl + 16 * g));
            uint32x4_t v1 = tail ? vdupq_n_u32(0) : vld1q_u32((const uint32_t *)(wl + 64 + 16 * g));
            b[2 * g] = vreinterpretq_bf16_u32(vzip1q_u32(v0, v1));
            b[2 * g + 1] = vreinterpretq_bf16_u32(vzip2q_u32(v0, v1));
        }
#pragma GCC unroll 2
        for (int p = 0; p < np; p++) {
            bfloat16x8_t a = ig_mm_xpair(xr[2 * p], xr[2 * p + 1], l, tail);
            for (int q = 0; q < 8; q++) c[p][q] = vbfmmlaq_f32(c[p][q], a, b[q]);
        }
    }
    for (int r = 0; r < nr; r++)
        for (int g = 0; g < 4; g++) {
            const float32x4_t lo = c[r / 2][2 * g], hi = c[r / 2][2 * g + 1];
            float32x4_t v = r & 1 ? vcombine_f32(vget_high_f32(lo), vget_high_f32(hi))
                                  : vcombine_f32(vget_low_f32(lo), vget_low_f32(hi));
            float *t = tile + r * 32 + 4 * g;
            vst1q_f32(t, init ? v : vaddq_f32(vld1q_f32(t), v));
        }
}
#endif

/* NEON: a panel is four q registers (outputs 0-3 ... 12-15); one panel per call, nr <= 4 rows:
 * 16 accumulators + 8 unpacked weight vectors + 2 broadcasts = 26 of the 32 v registers. A bf16
 * panel's k-pair holds (even, odd) per output: the even weight is the low half of each 32-bit
 * lane shifted up, the odd one the high half masked. */
IG_INLINE void ig_mm_mk1(int nr, int wb, int xb, const void *x, int ldx, const char *w, int l0,
                         int l1, float *tile, int init) {
#if defined(IG_NEON_BF16)
    if (wb && xb && nr >= 2) {
        ig_mm_mk1_mmla(nr, (const uint16_t *)x, ldx, w, l0, l1, tile, init);
        return;
    }
#endif
    float32x4_t acc[4][4];
    const int lb = IG_MM_LB(wb);
    const uint32x4_t hi = vdupq_n_u32(0xffff0000u);
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++)
        for (int g = 0; g < 4; g++) acc[r][g] = init ? vdupq_n_f32(0.0f) : vld1q_f32(tile + r * 32 + 4 * g);
#if defined(IG_NEON_BF16)
    /* bf16 x bf16, one row (two or more: BFMMLA above): BFDOT takes a k-pair per 32-bit lane as the
     * panel stores it, the row's pair broadcast (ld1r): 4 BFDOT per k-pair, no unpacking */
    if (wb && xb) {
        for (int l = l0; l < l1; l++) {
            const char *wl = w + (size_t)l * 64;
            __builtin_prefetch(wl + IG_MM_PF);
            bfloat16x8_t wv[4];
            for (int g = 0; g < 4; g++) wv[g] = vreinterpretq_bf16_u32(vld1q_u32((const uint32_t *)(wl + 16 * g)));
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++) {
                bfloat16x8_t xv = vreinterpretq_bf16_u32(vld1q_dup_u32((const uint32_t *)((const uint16_t *)x + (size_t)r * ldx + 2 * l)));
                for (int g = 0; g < 4; g++) acc[r][g] = vbfdotq_f32(acc[r][g], wv[g], xv);
            }
        }
    } else
#endif
    for (int l = l0; l < l1; l++) {
        const char *wl = w + (size_t)l * lb;
        float32x4_t we[4], wo[4];
        __builtin_prefetch(wl + IG_MM_PF);
        if (wb) {
            for (int g = 0; g < 4; g++) {
                uint32x4_t v = vld1q_u32((const uint32_t *)(wl + 16 * g));
                we[g] = vreinterpretq_f32_u32(vshlq_n_u32(v, 16));
                wo[g] = vreinterpretq_f32_u32(vandq_u32(v, hi));
            }
        } else {
            __builtin_prefetch(wl + IG_MM_PF + 64);
            const float *wf = (const float *)wl;
            for (int g = 0; g < 4; g++) {
                we[g] = vld1q_f32(wf + 4 * g);
                wo[g] = vld1q_f32(wf + 16 + 4 * g);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
            float xe, xo;
            if (xb) {
                const uint16_t *xr = (const uint16_t *)x + (size_t)r * ldx + 2 * l;
                xe = ig_bf16_to_f32(xr[0]);
                xo = ig_bf16_to_f32(xr[1]);
            } else {
                const float *xr = (const float *)x + (size_t)r * ldx + 2 * l;
                xe = xr[0];
                xo = xr[1];
            }
            for (int g = 0; g < 4; g++) {
                acc[r][g] = vfmaq_n_f32(acc[r][g], we[g], xe);
                acc[r][g] = vfmaq_n_f32(acc[r][g], wo[g], xo);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++)
        for (int g = 0; g < 4; g++) vst1q_f32(tile + r * 32 + 4 * g, acc[r][g]);
}

/* Decode: even and odd k in separate accumulators, 8 independent FMA chains, so the loop is bound
 * by loads and FMA throughput rather than by the FMA latency of 4 chains of 2. */
IG_INLINE void ig_mm_gemv(int wb, int xb, const void *x, const char *w, int nl, float *out) {
#if defined(IG_SVE)
    /* SVE, any vector length: f32 x f32 (units: the 2 nl floats of x), bf16 x bf16 (units: the nl
     * pairs of x, BFDOT) */
    if (!wb && !xb) {
        ig_sve_stream_f32((const uint32_t *)w, (const uint32_t *)x, 2 * nl, out);
        return;
    }
#if defined(IG_SVE_BF16)
    if (wb && xb) {
        ig_sve_stream_bf16((const uint32_t *)w, (const uint32_t *)x, nl, out);
        return;
    }
#endif
#endif
#if defined(IG_NEON_BF16)
    /* BFDOT: 8 chains over two k-pairs per step; the x pairs come four at a time (laneq) */
    if (wb && xb) {
        float32x4_t a[8];
        for (int g = 0; g < 8; g++) a[g] = vdupq_n_f32(0.0f);
        int l = 0;
        for (; l + 4 <= nl; l += 4) {
            const char *wl = w + (size_t)l * 64;
            __builtin_prefetch(wl + IG_MM_PF);
            __builtin_prefetch(wl + IG_MM_PF + 64);
            __builtin_prefetch(wl + IG_MM_PF + 128);
            __builtin_prefetch(wl + IG_MM_PF + 192);
            bfloat16x8_t xv = vreinterpretq_bf16_u16(vld1q_u16((const uint16_t *)x + 2 * l));
#define IG_MM_BFD(L, A)                                                                                  \
    for (int g = 0; g < 4; g++)                                                                      \
        a[A + g] = vbfdotq_laneq_f32(a[A + g], vreinterpretq_bf16_u8(vld1q_u8((const uint8_t *)wl + 64 * L + 16 * g)), xv, L);
            IG_MM_BFD(0, 0)
            IG_MM_BFD(1, 4)
            IG_MM_BFD(2, 0)
            IG_MM_BFD(3, 4)
#undef IG_MM_BFD
        }
        for (; l < nl; l++) {
            const char *wl = w + (size_t)l * 64;
            bfloat16x8_t xv = vreinterpretq_bf16_u32(vld1q_dup_u32((const uint32_t *)((const uint16_t *)x + 2 * l)));
            for (int g = 0; g < 4; g++) a[g] = vbfdotq_f32(a[g], vreinterpretq_bf16_u8(vld1q_u8((const uint8_t *)wl + 16 * g)), xv);
        }
        for (int g = 0; g < 4; g++) vst1q_f32(out + 4 * g, vaddq_f32(a[g], a[4 + g]));
        return;
    }
#endif
    float32x4_t ae[4], ao[4];
    const int lb = IG_MM_LB(wb);
    const uint32x4_t hi = vdupq_n_u32(0xffff0000u);
    for (int g = 0; g < 4; g++) ae[g] = ao[g] = vdupq_n_f32(0.0f);
    for (int l = 0; l < nl; l++) {
        const char *wl = w + (size_t)l * lb;
        __builtin_prefetch(wl + IG_MM_PF);
        float xe = xb ? ig_bf16_to_f32(((const uint16_t *)x)[2 * l]) : ((const float *)x)[2 * l];
        float xo = xb ? ig_bf16_to_f32(((const uint16_t *)x)[2 * l + 1]) : ((const float *)x)[2 * l + 1];
        for (int g = 0; g < 4; g++) {
            float32x4_t we, wo;
            if (wb) {
                uint32x4_t v = vld1q_u32((const uint32_t *)(wl + 16 * g));
                we = vreinterpretq_f32_u32(vshlq_n_u32(v, 16));
                wo = vreinterpretq_f32_u32(vandq_u32(v, hi));
            } else {
                we = vld1q_f32((const float *)wl + 4 * g);
                wo = vld1q_f32((const float *)wl + 16 + 4 * g);
            }
            ae[g] = vfmaq_n_f32(ae[g], we, xe);
            ao[g] = vfmaq_n_f32(ao[g], wo, xo);
        }
    }
    for (int g = 0; g < 4; g++) vst1q_f32(out + 4 * g, vaddq_f32(ae[g], ao[g]));
}

#else /* portable scalar C */

IG_INLINE void ig_mm_mk(int nr, int npn, int wb, int xb, const void *x, int ldx, const char *w,
                        size_t wps, int l0, int l1, float *tile, int init) {
    const int lb = IG_MM_LB(wb);
    for (int r = 0; r < nr; r++) {
        for (int p = 0; p < npn; p++) {
            float a[16];
            for (int j = 0; j < 16; j++) a[j] = init ? 0.0f : tile[r * 32 + 16 * p + j];
            for (int l = l0; l < l1; l++) {
                float xe, xo;
                if (xb) {
                    const uint16_t *xr = (const uint16_t *)x + (size_t)r * ldx;
                    xe = ig_bf16_to_f32(xr[2 * l]);
                    xo = ig_bf16_to_f32(xr[2 * l + 1]);
                } else {
                    const float *xr = (const float *)x + (size_t)r * ldx;
                    xe = xr[2 * l];
                    xo = xr[2 * l + 1];
                }
                const char *wl = w + p * wps + (size_t)l * lb;
                if (wb) {
                    const uint16_t *ws = (const uint16_t *)wl;
                    for (int j = 0; j < 16; j++)
                        a[j] += xe * ig_bf16_to_f32(ws[2 * j]) + xo * ig_bf16_to_f32(ws[2 * j + 1]);
                } else {
                    const float *wf = (const float *)wl;
                    for (int j = 0; j < 16; j++) a[j] += xe * wf[j] + xo * wf[16 + j];
                }
            }
            for (int j = 0; j < 16; j++) tile[r * 32 + 16 * p + j] = a[j];
        }
    }
}
#define IG_MM_RB 4

IG_INLINE void ig_mm_gemv(int wb, int xb, const void *x, const char *w, int nl, float *out) {
    float t[32];
    ig_mm_mk(1, 1, wb, xb, x, 0, w, 0, 0, nl, t, 1);
    memcpy(out, t, 16 * sizeof(float));
}

#endif

#if defined(IG_AVX2) || defined(IG_NEON)
/* AVX2 and NEON: a panel pair is two calls of the one-panel micro-kernel. */
IG_INLINE void ig_mm_mk(int nr, int npn, int wb, int xb, const void *x, int ldx, const char *w,
                        size_t wps, int l0, int l1, float *tile, int init) {
    ig_mm_mk1(nr, wb, xb, x, ldx, w, l0, l1, tile, init);
    if (npn > 1) ig_mm_mk1(nr, wb, xb, x, ldx, w + wps, l0, l1, tile + 16, init);
}
#define IG_MM_RB 4
#endif

/* Runs the micro-kernel for nr rows with nr a constant in each case, so each copy is unrolled. */
IG_INLINE void ig_mm_mk_rows(int nr, int npn, int wb, int xb, const void *x, int ldx, const char *w,
                             size_t wps, int l0, int l1, float *tile, int init) {
#define IG_MM_CASE(n)                                                        \
    case n:                                                                  \
        if (npn > 1) ig_mm_mk(n, 2, wb, xb, x, ldx, w, wps, l0, l1, tile, init); \
        else ig_mm_mk(n, 1, wb, xb, x, ldx, w, wps, l0, l1, tile, init);       \
        break;
    switch (nr) {
        IG_MM_CASE(1)
        IG_MM_CASE(2)
        IG_MM_CASE(3)
        IG_MM_CASE(4)
#if IG_MM_RB > 4
        IG_MM_CASE(5)
        IG_MM_CASE(6)
        IG_MM_CASE(7)
        IG_MM_CASE(8)
        IG_MM_CASE(9)
        IG_MM_CASE(10)
        IG_MM_CASE(11)
        IG_MM_CASE(12)
#endif
    default: break;
    }
#undef IG_MM_CASE
}

/* Epilogue for one row and one panel pair q (npn panels): acc[32] holds the raw sums
 * (acc[16p + j] is packed output row 16(2q+p)+j). */
IG_INLINE void ig_mm_epi(int epi, int ybf16, int nout, int ldy, const float *bias, const float *acc,
                         int q, int npn, void *y, int t) {
    float v[32];
    for (int j = 0; j < 16 * npn; j++) v[j] = acc[j] + (bias ? bias[32 * q + j] : 0.0f);
    if (epi == 2 || epi == 3) { /* SwiGLU / GeGLU: panel 2q is gate, 2q+1 is up, outputs 16q..16q+15 */
        float o[16];
        if (epi == 2) ig_silu_mul16(v, v + 16, o);
        else ig_gelu_mul16(v, v + 16, o);
        if (ybf16) ig_store_row((uint16_t *)y + (size_t)t * ldy + 16 * q, o, 1, 16);
        else memcpy((float *)y + (size_t)t * ldy + 16 * q, o, sizeof o);
        return;
    }
    float *yr = (float *)y + (size_t)t * ldy;
    int n0 = 32 * q, n1 = IG_MIN(nout, n0 + 16 * npn);
    if (epi == 1) {
        for (int n = n0; n < n1; n++) yr[n] += v[n - n0];
    } else {
        for (int n = n0; n < n1; n++) yr[n] = v[n - n0];
    }
}

#endif /* IG_MATMUL_HELPERS */

#if IG_MM_AMXQ
#define MM_AMXQ_NAME IG_PASTE(MM_NAME, _amxq)
/* Q8I / Q8A / Q4I prefill on AMX: per row block and panel pair, each K chunk's weights become bf16
 * k-pair lines (once per row block: int8 codes exactly, their rows' f32 scales multiplying the sums
 * before the epilogue; Q4I's dequantized values) that the tiles multiply against the rows. */
static void MM_AMXQ_NAME(int T, const void *x, const char *wc, size_t wps, const float *bs, void *y, int nth) {
    enum { NP_ = (MM_N + 15) / 16, NPP_ = (NP_ + 1) / 2, KP_ = MM_K / 2 };
#pragma omp parallel num_threads(nth)
    {
        int q0, q1, t0, t1;
        if (ig_grid_share(NPP_, T, &q0, &q1, &t0, &t1)) {
            IG_ALIGN64 float tile[MM_AMX_TB * 32];
            IG_ALIGN64 uint16_t wt[2][MM_KC * 32]; /* the pair's K chunk as bf16 panels */
            int cfg = -1;
            for (int tb = t0; tb < t1; tb += MM_AMX_TB) {
                int tn = IG_MIN(MM_AMX_TB, t1 - tb);
                const uint16_t *xb = (const uint16_t *)x + (size_t)tb * MM_K;
                for (int q = q0; q < q1; q++) {
                    int P = (NP_ % 2 && q == NPP_ - 1) ? 1 : 2;
                    const char *wq = wc + 2 * q * wps;
                    for (int l0 = 0; l0 < KP_; l0 += MM_KC) {
                        int l1 = IG_MIN(KP_, l0 + MM_KC);
                        for (int p = 0; p < P; p++) {
                            if (MM_WQ != IG_WQ_Q4I) ig_amx_q8_pairs(wq + p * wps, l0, l1, wt[p]);
                            else ig_amx_q4i_pairs(wq + p * wps, MM_WG, l0, l1, wt[p]);
                        }
                        ig_amx_rows(tn, P, xb + 2 * l0, MM_K, (const char *)wt[0], sizeof wt[0], (l1 - l0) / 16, tile,
                                    l0 == 0, &cfg);
                    }
                    if (MM_WQ != IG_WQ_Q4I) { /* int8 codes: their rows' f32 scales */
                        IG_ALIGN64 float sc[32];
                        memcpy(sc, wq, 64);
                        if (P > 1) memcpy(sc + 16, wq + wps, 64);
                        for (int r = 0; r < tn; r++)
                            for (int j = 0; j < 16 * P; j++) tile[r * 32 + j] *= sc[j];
                    }
                    for (int r = 0; r < tn; r++)
                        ig_mm_epi(MM_EPI, MM_YBF16, MM_N, MM_LDY, bs, tile + r * 32, q, P, y, tb + r);
                }
            }
            if (cfg >= 0) _tile_release();
        }
    }
}
#endif

static void MM_NAME(int T, const void *x, const void *w, const float *bias, void *y, int nth) {
    enum {
        K_ = MM_K,
        N_ = MM_N,
        NP_ = (MM_N + 15) / 16,  /* panels */
        NPP_ = (NP_ + 1) / 2,    /* panel pairs */
        KP_ = MM_K / 2,          /* k-pairs */
        LB_ = IG_MM_LB(MM_WBF16) /* bytes per k-pair per panel */
    };
    _Static_assert(MM_K % 2 == 0, "MM_K must be even");
    _Static_assert((MM_EPI != MM_EPI_SWIGLU && MM_EPI != MM_EPI_GEGLU) || MM_N % 32 == 0, "SwiGLU needs I % 16 == 0");
    const size_t wps = MM_WQ ? ig_wq_panel_bytes(MM_WQ, K_, MM_WG) : (size_t)KP_ * LB_; /* bytes per panel */
    const char *wc = (const char *)w;
    const float *bs = MM_BIAS ? bias : NULL;
    const size_t xes = MM_XBF16 ? 2 : 4; /* bytes per x element */
    if (T <= 0) return;

#if IG_MM_AMXQ
    if (T >= MM_AMX_TMIN) {
        MM_AMXQ_NAME(T, x, wc, wps, bs, y, nth);
        return;
    }
#endif
#if IG_WQ_XQ(MM_WQ)
    /* a8w8 and the a16 formats with integer activations (Q4I, Q6I, Q8I): rows quantized per token,
     * a block of MM_QRB at a time, then int32 dot products against each panel of the thread's range
     * (the pair's codes stay in L1/L2 across the block), IG_WQ_XR rows per weight load (the
     * register blocking of ig_wq_xgemm; its R is a constant in each call below, so the row loops
     * unroll); decode (T = 1) is the same code, each thread quantizing the row once for its panels */
#pragma omp parallel num_threads(nth)
    {
        int q0, q1, t0, t1;
        if (ig_grid_share(NPP_, T, &q0, &q1, &t0, &t1)) {
            IG_ALIGN64 float xf[MM_K];
            IG_ALIGN64 char xq[MM_QRB][IG_WQ_XQ_BYTES(MM_WQ, MM_K, MM_WG)];
            for (int tb = t0; tb < t1; tb += MM_QRB) {
                int tn = IG_MIN(MM_QRB, t1 - tb);
                for (int r = 0; r < tn; r++) {
                    ig_wq_x_f32(MM_XBF16, (const char *)x + (size_t)(tb + r) * K_ * xes, K_, xf);
                    ig_wq_xquant(MM_WQ, K_, MM_WG, xf, xq[r]);
                }
                for (int q = q0; q < q1; q++) {
                    int P = (NP_ % 2 && q == NPP_ - 1) ? 1 : 2;
                    IG_ALIGN64 float acc[2][16 * MM_QRB];
                    for (int p = 0; p < P; p++)
                        ig_wq_xgemm_rows(MM_WQ, K_, MM_WG, tn, xq[0], sizeof xq[0], wc + (2 * q + p) * wps, acc[p]);
                    for (int i = 0; i < tn; i++) {
                        IG_ALIGN64 float a[32];
                        memcpy(a, acc[0] + 16 * i, 64);
                        if (P > 1) memcpy(a + 16, acc[1] + 16 * i, 64);
                        ig_mm_epi(MM_EPI, MM_YBF16, N_, MM_LDY, bs, a, q, P, y, tb + i);
                    }
                }
            }
        }
    }
#else
#if MM_WQ
    if (T == 1) {
#pragma omp parallel num_threads(nth)
        {
            IG_ALIGN64 float xf[MM_K], gs[(MM_K + MM_WG - 1) / MM_WG];
            ig_wq_x_f32(MM_XBF16, x, K_, xf);
            if (IG_WQ_GSUMS(MM_WQ)) ig_wq_group_sums(xf, K_, MM_WG, gs);
            int lo, hi;
            ig_split(NPP_, ig_omp_nth(), ig_omp_tid(), &lo, &hi);
            for (int q = lo; q < hi; q++) {
                IG_ALIGN64 float acc[32];
                int P = (NP_ % 2 && q == NPP_ - 1) ? 1 : 2;
                ig_wq_gemv(MM_WQ, K_, MM_WG, xf, gs, wc + 2 * q * wps, acc);
                if (P > 1) ig_wq_gemv(MM_WQ, K_, MM_WG, xf, gs, wc + (2 * q + 1) * wps, acc + 16);
                ig_mm_epi(MM_EPI, MM_YBF16, N_, MM_LDY, bs, acc, q, P, y, 0);
            }
        }
        return;
    }
#endif
    if (T == 1) {
#pragma omp parallel num_threads(nth)
        {
            int lo, hi;
            ig_split(NPP_, ig_omp_nth(), ig_omp_tid(), &lo, &hi);
            for (int q = lo; q < hi; q++) {
                IG_ALIGN64 float acc[32];
                int P = (NP_ % 2 && q == NPP_ - 1) ? 1 : 2;
                ig_mm_gemv(MM_WBF16, MM_XBF16, x, wc + 2 * q * wps, KP_, acc);
                if (P > 1) ig_mm_gemv(MM_WBF16, MM_XBF16, x, wc + (2 * q + 1) * wps, KP_, acc + 16);
                ig_mm_epi(MM_EPI, MM_YBF16, N_, MM_LDY, bs, acc, q, P, y, 0);
            }
        }
        return;
    }

#pragma omp parallel num_threads(nth)
    {
        /* Threads form a grid over panel pairs x rows (ig_grid_share). */
        int q0, q1, t0, t1;
        if (ig_grid_share(NPP_, T, &q0, &q1, &t0, &t1)) {
            IG_ALIGN64 float tile[MM_TB * 32];
#if IG_MM_AMX
            int amx_cfg = -1; /* the tile configuration this thread loaded (none yet) */
#endif
#if MM_WQ
            IG_ALIGN64 float wt[2 * MM_KC * 32]; /* the pair's K chunk, dequantized to f32 panels */
#endif
            for (int tb = t0; tb < t1; tb += MM_TB) {
                int tn = IG_MIN(MM_TB, t1 - tb);
                const char *xb = (const char *)x + (size_t)tb * K_ * xes;
                for (int q = q0; q < q1; q++) {
                    int P = (NP_ % 2 && q == NPP_ - 1) ? 1 : 2;
                    const char *wq = wc + 2 * q * wps;
                    int lstart = 0; /* k-pairs done before the chunk loop */
#if IG_MM_AMX
                    /* whole blocks of 16 k-pairs on tiles in one pass; a K tail on the vector micro-kernel */
                    ig_amx_rows(tn, P, (const uint16_t *)xb, K_, wq, wps, KP_ / 16, tile, 1, &amx_cfg);
                    lstart = KP_ / 16 * 16;
#endif
                    for (int l0 = lstart; l0 < KP_; l0 += MM_KC) {
                        int l1 = IG_MIN(KP_, l0 + MM_KC);
#if MM_WQ
                        for (int p = 0; p < P; p++) ig_wq_dequant_chunk(MM_WQ, MM_WG, wq + p * wps, l0, l1, wt + p * MM_KC * 32);
                        for (int r = 0; r < tn; r += IG_MM_RB) {
                            int R = IG_MIN(IG_MM_RB, tn - r);
                            ig_mm_mk_rows(R, P, 0, MM_XBF16, xb + ((size_t)r * K_ + 2 * l0) * xes, K_, (const char *)wt,
                                          (size_t)MM_KC * 128, 0, l1 - l0, tile + r * 32, l0 == 0);
                        }
                        continue;
#endif
                        for (int r = 0; r < tn; r += IG_MM_RB) {
                            int R = IG_MIN(IG_MM_RB, tn - r);
                            ig_mm_mk_rows(R, P, MM_WBF16, MM_XBF16, xb + (size_t)r * K_ * xes, K_, wq,
                                          wps, l0, l1, tile + r * 32, l0 == 0);
                        }
                    }
                    for (int r = 0; r < tn; r++)
                        ig_mm_epi(MM_EPI, MM_YBF16, N_, MM_LDY, bs, tile + r * 32, q, P, y, tb + r);
                }
            }
#if IG_MM_AMX
            if (amx_cfg >= 0) _tile_release();
#endif
        }
    }
#endif /* IG_WQ_XQ(MM_WQ) */
}

#undef MM_NAME
#undef MM_K
#undef MM_N
#undef MM_WBF16
#undef MM_WQ
#undef MM_WG
#undef MM_XBF16
#undef MM_BIAS
#undef MM_EPI
#undef MM_LDY
#undef MM_YBF16
#undef MM_TB
#undef MM_KC
#undef MM_QRB
#undef IG_MM_AMX
#undef IG_MM_AMXQ
#undef IG_WQ_AMXQ
#undef MM_AMXQ_NAME
#undef MM_AMX_TMIN
#undef MM_AMX_TB
