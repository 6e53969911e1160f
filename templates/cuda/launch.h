/* launch.h — launch shapes of the CUDA kernel templates, as plain C macros.
 *
 * The generated model.cu is compiled to a cubin (NVRTC or nvcc); the generated host code that
 * launches its kernels through the driver API (cuLaunchKernel) is a separate C translation unit
 * that never sees the templates' parameter macros (they are #undef'd after each instantiation).
 * So every launch shape here is a function-like macro of the *values* the instantiation used:
 * the host code passes the same constants it wrote before `#include "gemv.cu"`, e.g.
 *
 *     cuLaunchKernel(f_mv_qkv, IG_MV_GRID_X(3072, 2048, 2, max_ctas), 1, 1, IG_MV_BLOCK, 1, 1,
 *                    IG_MV_SMEM(2048, 2), stream, args, NULL);
 *
 * The templates include this header (through common.cuh) and use the same macros for their own
 * tiling, so host and device cannot disagree. Pure C, no device code, include-guarded, never
 * #undef'd: the host side may include it as is.
 *
 * Convention per kernel family <P>: IG_<P>_BLOCK (threads per CTA, x only), IG_<P>_GRID_X/Y/Z(...),
 * IG_<P>_SMEM(...) (dynamic shared memory bytes; when it can exceed 48 KB the host must first set
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES on the function). All values fit in unsigned int.
 */
#ifndef IG_CUDA_LAUNCH_H
#define IG_CUDA_LAUNCH_H

#define IG_CDIV(a, b) (((a) + (b) - 1) / (b))
#define IG_NPAD16(n) (IG_CDIV((n), 16) * 16)

/* ---- gemv.cu: MV_NAME(T, x, gamma, w, bias, y) ----
 * The unit of work is a pair of packed rows (SwiGLU: gate row and up row of one output). A row is
 * IG_MV_NCH chunks of 32 lanes x IG_MV_VPL 16-byte vectors (one chunk = 2048 bf16). KS warps
 * share a pair (split K: KS = chunks per row, at most 8, so a long row's chunks are in flight
 * at once), a CTA of 8 warps takes 8 / KS pairs per step and CTAs stride over the pairs. The grid
 * is one CTA per step's pairs, capped at MAXC (the host passes a few per SM). x is staged in
 * shared memory IG_MV_TG(K, XES) tokens at a time (XES = bytes per x element): 4 tokens while
 * they fit 48 KB, else 2, else 1. WES = bytes per weight element. */
#define IG_MV_BLOCK 256
#define IG_MV_VPL 8
#define IG_MV_TG_MAX 4
#define IG_MV_TG(K, XES) (4 * (K) * (XES) <= 49152 ? 4 : 2 * (K) * (XES) <= 49152 ? 2 : 1)
#define IG_MV_SMEM(K, XES) (IG_MV_TG((K), (XES)) * (K) * (XES))
/* The same shapes in bytes of W per row (CB = K x WES; quantized rows: their code bytes, IG_WQ_CODEB) */
#define IG_MV_NCHB(CB) IG_CDIV((CB) / 16, 32 * IG_MV_VPL)
#define IG_MV_KSB(CB) (IG_MV_NCHB(CB) >= 8 ? 8 : IG_MV_NCHB(CB) >= 4 ? 4 : IG_MV_NCHB(CB) >= 2 ? 2 : 1)
#define IG_MV_CTASB(N, CB) IG_CDIV(IG_NPAD16(N) / 2, 8 / IG_MV_KSB(CB))
#define IG_MV_GRID_XB(N, CB, MAXC) (IG_MV_CTASB(N, CB) < (MAXC) ? IG_MV_CTASB(N, CB) : (MAXC))
#define IG_MV_NCH(K, WES) IG_MV_NCHB((K) * (WES))
#define IG_MV_KS(K, WES) IG_MV_KSB((K) * (WES))
#define IG_MV_CTAS(N, K, WES) IG_MV_CTASB(N, (K) * (WES))
#define IG_MV_GRID_X(N, K, WES, MAXC) IG_MV_GRID_XB(N, (K) * (WES), MAXC)

/* ---- quantized weight rows (wq.cuh): WQ 8 = q8r, 4 = q4r with groups of G */
#define IG_WQ_CODEB(K, WQ) ((WQ) == 8 ? (K) : (K) / 2)
#define IG_WQ_ROWB(K, WQ, G) ((WQ) == 8 ? (K) + 16 : (K) / 2 + IG_CDIV(4 * ((K) / (G)), 16) * 16)

/* ---- dequant.cu: DQ_NAME(w, out), quantized rows -> the 16-bit type for cuBLAS ----
 * One thread per 16-byte vector of codes of the NP rows. */
#define IG_DQ_BLOCK 256
#define IG_DQ_GRID_X(NP, K, WQ) IG_CDIV((NP) * (IG_WQ_CODEB(K, WQ) / 16), IG_DQ_BLOCK)
/* ---- act8.cu: a8w8's activation rows to int8 (A8_QUANT_NAME, a CTA per token) and the epilogue
 * of cuBLAS's int8 GEMM (A8_DQ_NAME: a thread per output, or per SwiGLU / GeGLU output) */
#define IG_A8_BLOCK 256
#define IG_A8_GBLOCK 1024 /* the quantizer with SwiGLU / GeGLU fused (A8_GQUANT_NAME): its rows are 4x longer */
#define IG_A8_TT 16 /* tokens a dq CTA scales */
#define IG_A8_DQ_GRID_X(N, GLU) IG_CDIV((GLU) ? (N) / 2 : (N), IG_A8_BLOCK)
#define IG_A8_DQ_GRID_Y(T) IG_CDIV((T), IG_A8_TT)
/* A8_WG_NAME (sm_90a): the int8 GEMM with the dq epilogue fused, persistent: tiles of IG_A8_WG_BM tokens x
 * IG_A8_WG_BN weight rows, two consumer warpgroups and a TMA producer warpgroup, K in steps of 128 codes
 * through IG_A8_WG_NST stages (+1 KB to align them to 1024); a grid of at most one CTA an SM (nsm). The
 * generated code takes it for steps of 128+ tokens with at least min_tiles tiles (IG_A8_WG_USE; the
 * run-time key a8_wg_tiles, by default half the SMs: H100, 1B shapes, 8-12 tiles 1.5-3x slower than
 * cuBLAS's int8 GEMM + dq, 64 and more 1.1-1.5x faster; SPEC.md) */
#define IG_A8_WG_THREADS 384
#define IG_A8_WG_BM 128
#define IG_A8_WG_BN 256
#define IG_A8_WG_NST 4
#define IG_A8_WG_SMEM (IG_A8_WG_NST * (IG_A8_WG_BM + IG_A8_WG_BN) * 128 + 1024) /* 197632 bytes */
#define IG_A8_WG_CREGS ((65536 - 128 * 40) / 256 / 8 * 8)
#define IG_A8_WG_TILES(T, N) (IG_CDIV((T), IG_A8_WG_BM) * IG_CDIV(IG_NPAD16(N), IG_A8_WG_BN))
/* clusters of CL CTAs (A8_WG_CL) take CL consecutive token tiles of one weight tile, each split in S
 * ranges of K: a grid of CL x the cluster tiles x S, at most CL x (nsm / CL) */
#define IG_A8_WG_CTILES(T, N, CL) (IG_CDIV(IG_CDIV((T), IG_A8_WG_BM), (CL)) * IG_CDIV(IG_NPAD16(N), IG_A8_WG_BN))
#define IG_A8_WG_GRID(T, N, nsm, CL, S) \
    ((CL) * (IG_A8_WG_CTILES(T, N, CL) * (S) < (nsm) / (CL) ? IG_A8_WG_CTILES(T, N, CL) * (S) : (nsm) / (CL)))
/* K splits of a step with fewer CTA tiles than half the SMs (so one CTA an SM covers them about
 * once): SMs / tiles, at most max_s (the run-time key a8_wg_split; 1: none), half the K steps (two
 * steps of 128 codes a split at least) and IG_A8_WG_PITEMS / tiles (the partial sums' buffer: 128 KB
 * a CTA tile a split, a8_part; a count a CTA tile, a8_cnt). CTA tiles: clusters of CL take CL token
 * tiles, those past T too. */
#define IG_A8_WG_PITEMS 160
#define IG_A8_MIN_(a, b) ((a) < (b) ? (a) : (b))
#define IG_A8_WG_CTAT_(T, N, CL) (IG_A8_WG_CTILES(T, N, CL) * (CL))
#define IG_A8_WG_SPLITS_(T, N, K, nsm, CL, max_s)                                                        \
    IG_A8_MIN_(IG_A8_MIN_((nsm) / IG_A8_WG_CTAT_(T, N, CL), (max_s)),                                     \
               IG_A8_MIN_(IG_CDIV((K), 128) / 2, IG_A8_WG_PITEMS / IG_A8_WG_CTAT_(T, N, CL)))
#define IG_A8_WG_SPLITS(T, N, K, nsm, CL, max_s)                                                         \
    (IG_A8_WG_CTAT_(T, N, CL) * 2 > (nsm) || IG_A8_WG_SPLITS_(T, N, K, nsm, CL, max_s) < 2 ? 1            \
                                                                : IG_A8_WG_SPLITS_(T, N, K, nsm, CL, max_s))
#define IG_A8_WG_USE(T, N, min_tiles) ((T) >= IG_A8_WG_BM && IG_A8_WG_TILES(T, N) >= (min_tiles))
#define IG_MV_CTAS_PER_SM 4 /* default MAXC = SMs x this (2 resident at a time: 16 warps, 128 KB of W in flight per SM) */

/* ---- qgemm.cu: QG_NAME(T, x, w, bias, y, ws, cnt), quantized rows on tensor cores for steps of
 * 9 .. qg_tmax tokens ----
 * A CTA: 128 packed rows x 64 tokens (8 warps of 16 rows), K in stages of 64 columns through
 * IG_QG_STAGES cp.async buffers of 20 KB; grid z splits K (QG_SPLIT). IG_QG_SPLIT_AUTO is codegen's
 * (and the harness's) choice: enough CTAs for about 128 SMs, at most 8, at least 4 stages a split. */
#define IG_QG_BLOCK 256
#define IG_QG_BM 128
#define IG_QG_BN 64
#define IG_QG_STAGES 4
#define IG_QG_SMEM (IG_QG_STAGES * 20480)
#define IG_QG_GRID_X(N) IG_CDIV(IG_NPAD16(N), IG_QG_BM)
#define IG_QG_GRID_Y(T) IG_CDIV((T), IG_QG_BN)
#define IG_QG_COUNTERS(N, T) (IG_QG_GRID_X(N) * IG_QG_GRID_Y(T))
#define IG_QG_WS_FLOATS(N, T, S) ((S) > 1 ? (unsigned long long)IG_QG_COUNTERS(N, T) * (S) * IG_QG_BLOCK * 32 : 0ull)
#define IG_QG_SPLIT0(N) (IG_QG_GRID_X(N) >= 96 ? 1 : IG_CDIV(128, IG_QG_GRID_X(N)))
#define IG_QG_SPLIT1(N) (IG_QG_SPLIT0(N) < 8 ? IG_QG_SPLIT0(N) : 8)
#define IG_QG_SPLIT_AUTO(N, K) ((K) / 256 < 1 ? 1 : IG_QG_SPLIT1(N) < (K) / 256 ? IG_QG_SPLIT1(N) : (K) / 256)

/* ---- gemv_tc.cu: MV_NAME(T, x, gamma, w, bias, y), 2 <= T <= IG_MVT_TMAX, sm_80+ ----
 * The unit of work is 16 packed rows (SwiGLU: 32, gate and up tiles); KS = IG_MVT_KS(K) warps
 * share a unit (split K over 32-column blocks: 8 when a row has at least 64 blocks, else 4, 2,
 * 1 for 32, 16, fewer), a CTA of 8 warps takes 8 / KS units per step and CTAs stride over the
 * units, the grid capped at MAXC. Dynamic smem: the normalized x of up to 8 tokens when the
 * RMSNorm is fused (rows of IG_MVT_XS(K) elements: padded by 32 when 2K is a multiple of 128). */
#define IG_MVT_BLOCK 256
#define IG_MVT_TMAX 8
#define IG_MVT_KS(K) ((K) / 32 >= 64 ? 8 : (K) / 32 >= 32 ? 4 : (K) / 32 >= 16 ? 2 : 1)
#define IG_MVT_XS(K) ((K) % 64 == 0 ? (K) + 32 : (K))
#define IG_MVT_SMEM(K, NORM) ((NORM) ? IG_MVT_TMAX * IG_MVT_XS(K) * 2 : 0)
#define IG_MVT_CTAS(N, K, SW) IG_CDIV(IG_NPAD16(N) / ((SW) ? 32 : 16), 8 / IG_MVT_KS(K))
#define IG_MVT_GRID_X(N, K, SW, MAXC) (IG_MVT_CTAS(N, K, SW) < (MAXC) ? IG_MVT_CTAS(N, K, SW) : (MAXC))

/* ---- epilogue.cu ----
 * EP_BIAS_NAME(T, y, bias):        grid (ceil(N/256), T), block 256
 * EP_SWIGLU_NAME(T, gu, bias, out): grid (ceil(I/2048), T), block 256 (8 outputs a thread) */
#define IG_EP_BLOCK 256
#define IG_EP_BIAS_GRID_X(T, N) IG_CDIV((N), 256)
#define IG_EP_BIAS_GRID_Y(T) (T)
#define IG_EP_SWIGLU_GRID_X(T, I) IG_CDIV((I), 8 * 256)
#define IG_EP_SWIGLU_GRID_Y(T) (T)
#define IG_EP_SMEM(T) 0

/* ---- gemm.cu: GM_NAME(N, T, K, w, x, y, ldy, beta, ybf16), the GEMM without cuBLAS: a CTA per
 * 64 x 64 tile of (outputs, tokens), K in slices of 32 ---- */
#define IG_GM_TILE 64
#define IG_GM_BK 32
#define IG_GM_BLOCK 256
#define IG_GM_GRID_X(N) (((N) + IG_GM_TILE - 1) / IG_GM_TILE)
#define IG_GM_GRID_Y(T) (((T) + IG_GM_TILE - 1) / IG_GM_TILE)

/* ---- rmsnorm.cu: RN_NAME(T, x, gamma, out): one CTA per row ---- */
#define IG_RN_BLOCK(D) ((D) >= 4096 ? 1024 : (D) >= 1024 ? 256 : 128)
#define IG_RN_GRID_X(T) (T)
#define IG_RN_GRID_Y(T) 1
#define IG_RN_SMEM(T) 0

/* ---- rope_kv.cu: RK_NAME(...): one CTA of 8 warps per token, a warp per head at a time ---- */
#define IG_RK_BLOCK(D) 256
#define IG_RK_GRID_X(T, H, KV) (T)
#define IG_RK_GRID_Y(T) 1
#define IG_RK_SMEM(T) 0

/* ---- attention.cu ----
 * AT_NAME(...)          direct:  grid (KV, T, 1),     block 256, smem IG_AT_SMEM(H, KV, D)
 * AT_NAME_split(...)    split:   grid (KV, T, SPLIT), block 256, smem IG_AT_SMEM(H, KV, D),
 *                                partial results in ws (IG_AT_WS_FLOATS floats), merged by the
 *                                last CTA of each (token, kv head) (IG_AT_COUNTERS counters)
 * The 8 warps of a CTA each keep an online-softmax state for the G = H/KV heads of the group;
 * the smem holds those states for the final merge. */
#define IG_AT_WARPS 8
#define IG_AT_BLOCK (32 * IG_AT_WARPS)
#define IG_AT_GRID_X(T, KV) (KV)
#define IG_AT_GRID_Y(T) (T)
#define IG_AT_GRID_Z(T, SPLIT) (SPLIT)
/* the split kernels' grid z from the host: CTAS split CTAs aimed at (the SMs x at_ctas_per_sm)
 * over KV x T (token, kv head) pairs, 1..SPLIT; a token with few keys takes fewer (_splits) */
#define IG_AT_CTAS_PER_SM 2
#define IG_AT_SPLITS(T, KV, SPLIT, CTAS) \
    ((CTAS) <= (KV) * (T) ? 1 : IG_CDIV((CTAS), (KV) * (T)) < (SPLIT) ? IG_CDIV((CTAS), (KV) * (T)) : (SPLIT))
#define IG_AT_SMEM(H, KV, D) (IG_AT_WARPS * ((H) / (KV)) * ((D) + 2) * 4)
#define IG_AT_WS_FLOATS(T, H, D, SPLIT) ((unsigned long long)(T) * (H) * (SPLIT) * ((D) + 2))
#define IG_AT_COUNTERS(T, KV) ((unsigned long long)(T) * (KV))

/* ---- attention_prefill.cu: AP_NAME(...) (same arguments as AT_NAME) ----
 * grid (H / HPC, ceil(T / 64)), block 128 HPC (a warpgroup of 4 warps x 16 query rows for each of
 * the CTA's HPC heads, AP_HPC), dynamic smem IG_AP_SMEM_H(D, HPC), the larger of the two tensor-core
 * paths' needs: _flash's K and V tiles of 64 keys in bf16, rows padded by 16 bytes (IG_AP_SMEM_MMA),
 * and _flash_wg's HPC Q tiles, a K and a V tile of 64 rows plus 1 KB of alignment (IG_AP_SMEM_WG):
 * 33 KB for D 64 with two heads, 65 KB for D 128 with two (over 48 KB: the host's 96 KB attribute
 * covers it); 0 when D > 128, where only the CUDA-core path runs. Heads are the fast axis
 * so the heads of a GQA group share K/V tiles in L2. gridDim.y = ceil(T / 64) <= 65535. */
#define IG_AP_WARPS 4
#define IG_AP_BLOCK (32 * IG_AP_WARPS)
#define IG_AP_BM 64
#define IG_AP_BN 64
#define IG_AP_GRID_Y(T) IG_CDIV((T), IG_AP_BM)
#define IG_AP_SMEM_MMA(D) (2 * IG_AP_BN * ((D) + 8) * 2)
#define IG_AP_SMEM_WG(D, HPC) (1024 + ((HPC) + 2) * IG_AP_BN * (D) * 2)
#define IG_AP_SMEM_H(D, HPC) \
    ((D) <= 128 ? (IG_AP_SMEM_WG(D, HPC) > IG_AP_SMEM_MMA(D) ? IG_AP_SMEM_WG(D, HPC) : IG_AP_SMEM_MMA(D)) : 0)
/* AP_HPC query heads of one KV head a CTA (a warpgroup each, sharing the K/V tiles) */
#define IG_AP_GRID_XH(H, HPC) ((H) / (HPC))
#define IG_AP_BLOCKH(HPC) (IG_AP_BLOCK * (HPC))
/* The warp-specialized form (_flash_ws, sm_90a images, --tune ap_ws): one more warpgroup, which loads the
 * K / V tiles of BN keys (AP_WBN) by TMA into IG_AP_WS_NS stages of each; dynamic smem the HPC Q
 * tiles, the stages and 1 KB of alignment (D 128, 2 heads: 97 KB with BN 64, 161 KB with 128;
 * within the wgmma images' limit). */
#define IG_AP_WS_NS 2
#define IG_AP_BLOCKW(HPC) (IG_AP_BLOCK * ((HPC) + 1))
#define IG_AP_SMEM_WS(D, HPC, BN) (1024 + ((HPC) * IG_AP_BM + 2 * IG_AP_WS_NS * (BN)) * (D) * 2)

/* ---- embed.cu: EM_NAME(T, ids, w, x): one CTA per token ---- */
#define IG_EM_BLOCK 128
#define IG_EM_GRID_X(T) (T)
#define IG_EM_SMEM(T) 0

/* ---- sample.cu: SM_NAME(n, logits, params, out): one CTA per row ---- */
#define IG_SM_BLOCK 1024
#define IG_SM_GRID_X(n) (n)
#define IG_SM_SMEM(n) 0
#define IG_SM_MASK_WORDS(v) (((v) + 31) / 32) /* 32-bit words of one row's token mask */

/* ---- moe.cu: MO_NAME_route (a CTA per token), _gu (a warp per output of a (token, expert) pair),
 * _down (a warp per output row of a token) ---- */
#define IG_MO_BLOCK 256
#define IG_MO_ROUTE_GRID_X(T) (T)
#define IG_MO_LG_GRID_X(E) IG_CDIV((E), 8) /* _logits: a warp per expert */
#define IG_MO_GU_GRID_X(I) IG_CDIV((I), 8)
#define IG_MO_GU_GRID_Y(T, K) ((T) * (K))
#define IG_MO_DN_GRID_X(D) IG_CDIV((D), 8)
#define IG_MO_DN_GRID_Y(T) (T)
/* expert-grouped (prefill): _group grid 1 x 1024 threads; _gu_grouped / _down_grouped a CTA per
 * (4 outputs | 8 rows, expert), 8 staged weight rows of K elements; _sum a thread per (token, column) */
#define IG_MO_GGU_GRID_X(I) IG_CDIV((I), 4)
#define IG_MO_GDN_GRID_X(D) IG_CDIV((D), 8)
#define IG_MO_GSMEM(K, WES) (8 * (K) * 4)
#define IG_MO_SUM_GRID_X(D) IG_CDIV((D), 256)
/* the tensor-core grouped products (_gu_tc, _down_tc; 16-bit types, MO_D and MO_I multiples of
 * IG_MO_TC_BK, sm_80+): a CTA is a tile of IG_MO_TC_BM pairs of one expert x IG_MO_TC_BN weight rows;
 * block IG_MO_TC_THREADS; grid y bounds the tiles over all experts (each expert's last tile
 * partial), dynamic smem IG_MO_TC_SMEM (the host allows every kernel 96 KB), static 1.5 KB.
 * _group writes the tiles' scan after the pairs' offsets: off holds 2 (MO_E + 1) ints. */
#define IG_MO_TC_WM 2 /* warps of 64 x 64 outputs: WM along the pairs, WN along the weight rows */
#define IG_MO_TC_WN 2
#define IG_MO_TC_THREADS (32 * IG_MO_TC_WM * IG_MO_TC_WN)
#define IG_MO_TC_BM (64 * IG_MO_TC_WM)
#define IG_MO_TC_BN (64 * IG_MO_TC_WN)
#define IG_MO_TC_BK 32
#define IG_MO_TC_LD 40 /* smem row stride in elements: 80 bytes, conflict-free ldmatrix */
#define IG_MO_TC_NST 4 /* cp.async stages */
#define IG_MO_TC_SMEM (IG_MO_TC_NST * (IG_MO_TC_BM + IG_MO_TC_BN) * IG_MO_TC_LD * 2) /* 81920 bytes */
#define IG_MO_TC_GU_GRID_X(I) IG_CDIV(2 * (I), IG_MO_TC_BN)
#define IG_MO_TC_DN_GRID_X(D) IG_CDIV((D), IG_MO_TC_BN)
#define IG_MO_TC_GRID_Y(T, K, E) (IG_CDIV((T) * (K), IG_MO_TC_BM) + (E))
/* the same products on Hopper's warpgroup tensor cores (_gu_wg, _down_wg; sm_90a images, where
 * the host read ig_wg_built and encoded the operands' tensor maps): the row tiles as above
 * (IG_MO_TC_BM pairs, _group's scan), each CTA IG_MO_WG_BN weight rows, two consumer warpgroups of
 * 64 pairs and a producer warpgroup (TMA), K in steps of 64 through IG_MO_WG_NST stages of 128-byte
 * swizzled tiles (wgmma.cuh); dynamic smem IG_MO_WG_SMEM (with 1 KB to align the tiles to 1024; the
 * host allows these kernels IG_MO_WG_SMEM), one CTA an SM. _xgather (their gate/up's rows in the
 * pairs' order): a thread per 16-byte chunk of a row. */
#define IG_MO_WG_THREADS 384
#define IG_MO_WG_BN 256
#define IG_MO_WG_BK 64
#define IG_MO_WG_NST 4
#define IG_MO_WG_SMEM (IG_MO_WG_NST * (IG_MO_TC_BM + IG_MO_WG_BN) * 128 + 1024) /* 197632 bytes */
#define IG_MO_WG_GU_GRID_X(I) IG_CDIV(2 * (I), IG_MO_WG_BN)
#define IG_MO_WG_DN_GRID_X(D) IG_CDIV((D), IG_MO_WG_BN)
#define IG_MO_XG_GRID(T, K, D) IG_CDIV((long long)(T) * (K) * ((D) / 8), IG_MO_BLOCK)
/* decode-sized steps (T <= IG_MO_DTMAX) in two launches over the whole GPU: _dgu (router, top-k,
 * the selected experts' gate/up with SwiGLU) and _ddown (their down rows, weighted, summed into the
 * residual): grid = any count of CTAs that are all resident at once (the host: its SM count), block
 * IG_MO_DBLOCK, _dgu's dynamic smem IG_MO_DSMEM(T, D, AES) (the token rows, AES bytes an element),
 * _ddown's 0. sync: 2 unsigned, zero before the first launch, shared by every _dgu launch on the
 * stream (each launch leaves the first at zero again and bumps the second). */
#define IG_MO_DBLOCK 512
#define IG_MO_DTMAX 8
#define IG_MO_DSMEM(T, D, AES) ((T) * (D) * (AES))

#endif /* IG_CUDA_LAUNCH_H */
