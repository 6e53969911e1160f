/* stream.cuh — weight streaming for the persistent decode kernel (sm_90; decode_layers.cu): one
 * CTA per SM streams its share of every weight matrix of the step through a ring of shared-memory
 * slots, and the step's phases (GEMVs, attention) run as device functions between grid barriers.
 *
 * Why: at batch 1 a decode step reads ~2.5 GB of weights once. Separate GEMV kernels each pay a
 * ramp (first loads' latency), a tail and a launch, and HBM idles between them: on the H200 the
 * 1B model's layer GEMVs ran at 2.6 TB/s as 64 graph-replayed kernels and 2.7 TB/s as one
 * persistent kernel of the same GEMV code with a grid barrier per phase. Here the loads never wait
 * for activations: a CTA's weight stream is a fixed sequence known before the step (its rows of
 * each matrix, in phase order), so one producer thread issues TMA bulk copies (cp.async.bulk, one
 * instruction per 16 KB slot) as soon as a slot is free, across phase and layer boundaries.
 * Consumers wait for a slot's bytes (mbarrier transaction count), multiply, release it. While
 * they wait at a grid barrier or run attention the ring keeps filling. Streaming alone (consumers
 * only releasing slots) reads at 4.5-4.6 TB/s.
 *
 * CTA layout: IG_ST_CWARPS = 8 consumer warps (threads 0..255) and a producer warp (warp 8, lane 0
 * works). Consumers synchronize among themselves with named barrier 1; the producer never joins,
 * so there is no __syncthreads after the roles split.
 *
 * GEMV phases (ig_st_gemv_tc): a phase's packed rows are divided among the CTAs in units (1 row;
 * 32 rows for SwiGLU, whose gate/up rows are interleaved by 16), balanced, rotated by the phase
 * number. A slot holds R whole rows (the largest power of two <= 8 that fits 16 KB). The dot
 * products run on tensor cores (see ig_st_gemv_tc); x (normalized when the phase fuses RMSNorm)
 * sits in registers for the whole phase. Each warp parks its partial sums in shared memory and
 * releases the slot without a CTA barrier; sums and epilogue stores happen once per phase.
 *
 * Memory ordering: activations written in the kernel are read with ld.global.cg (L2, never a stale
 * L1 line); ig_st_grid_sync's release reduction / acquire poll orders the phases.
 */
#ifndef IG_CUDA_STREAM_CUH
#define IG_CUDA_STREAM_CUH

#include "common.cuh"
#include "mbar.cuh"
#include "mma.cuh"
#include "wq.cuh"

#ifndef IG_ST_CWARPS
#define IG_ST_CWARPS 8
#endif
#define IG_ST_CTHREADS (IG_ST_CWARPS * 32)
#define IG_ST_THREADS (IG_ST_CTHREADS + 32)
#ifndef IG_ST_SLOT /* bytes of a ring slot: 16 KB, and 16 KB + 256 for quantized rows (codegen), so that 8
                    * q8r rows of 2048 codes (2064 bytes with their scale) fill one */
#define IG_ST_SLOT 16384
#endif
#ifndef IG_ST_NSLOT
#define IG_ST_NSLOT 8
#endif
#ifndef IG_ST_MARK
#define IG_ST_MARK(k) /* timing hook (tests/gpu/exp_stream.cu): point k of a GEMV phase */
#endif
#ifndef IG_ST_TIMED
#define IG_ST_TIMED(k, stmt) stmt /* timing hook: a wait (0 consumer slot, 1 producer ring full, 2 in flight) */
#endif
#ifndef IG_ST_SRC
#define IG_ST_SRC(w, r, K) ((w) + (size_t)(r) * (K)) /* where row r of a streamed matrix is read */
#endif
#ifndef IG_ST_SRCQ
#define IG_ST_SRCQ(w, r, RB) ((w) + (size_t)(r) * (RB)) /* ... and row r of a matrix of quantized rows */
#endif
#ifndef IG_ST_FEED
#define IG_ST_FEED(dst, src, bytes, bar) ig_st_bulk(dst, src, bytes, bar) /* how a slot is filled */
#endif
/* Slots in flight at most (issued, not landed): enough for HBM's bandwidth-latency product, few
 * enough that the memory queues stay short for the kernel's own latency-bound accesses (H200, 1B
 * decode: 3 0.743, 4 0.756, 6-12 0.776-0.780 ms/token). */
#ifndef IG_ST_INFLIGHT
#define IG_ST_INFLIGHT 3
#endif
/* Consumer slots per group (1, 2 or 4): a group's mma chains run side by side and its sums share
 * one shuffle reduction; accumulators per slot (1 or 2): shorter mma chains over the windows.
 * H200, 1B decode: 1/1 0.745, 2/2 0.736, 4/2 0.736 ms/token (consumers alone 27.6 -> 25.4 / 23.8
 * us/layer in tests/gpu/exp_stream.cu). */
#ifndef IG_ST_GROUP
#define IG_ST_GROUP 2
#endif
#ifndef IG_ST_ACC
#define IG_ST_ACC 2
#endif
/* A fused RMSNorm phase rounds x * scale * gamma to bf16, as rmsnorm.cu does, so the persistent
 * kernel and the per-op kernels multiply the same operands. (Scaling the sums in the epilogue
 * instead, so the first mma need not wait for the CTA-wide sum of squares, measured 0.726 / 0.738
 * against 0.729 / 0.742 ms/token on the H200 1B decode (context 64-192 / 64-320) with twice the
 * difference between the two paths' logits: dropped, see SPEC.md.) */
#define IG_ST_PSUM 4096 /* warp sums (2 per warp) of up to 256 slots per phase and CTA */
#define IG_ST_MAXCH (IG_ST_PSUM / (2 * IG_ST_CWARPS))
#ifndef IG_ST_MOEK
#define IG_ST_MOEK 16 /* experts a token at most in a MoE layer (stream_moe.cuh) */
#endif

/* Per-CTA state in static shared memory (the ring is the dynamic part, IG_ST_NSLOT x 16 KB). */
struct ig_st {
    unsigned long long full[IG_ST_NSLOT], empty[IG_ST_NSLOT];
    float nred[IG_ST_CWARPS];
    unsigned long long gen; /* grid barriers this CTA has passed, in all launches */
    /* MoE layers (stream_moe.cuh): the token's experts and their weights, which the consumers
     * publish to the producer through selb (one arrival a MoE layer) */
    unsigned long long selb;
    int msel[IG_ST_MOEK];
    float mwt[IG_ST_MOEK + 1]; /* ... and after the top-k's, the shared expert's sigmoid gate */
    __align__(16) float psum[IG_ST_PSUM]; /* a phase's warp sums: [slot of the phase][warp]; x's staging before them */
#ifdef IG_ST_STATS
    unsigned long long stat[IG_ST_STATS]; /* timing harness counters (tests/gpu/exp_stream.cu) */
#endif
};

/* The PTX primitives below (bulk copies, barrier 1, the grid barrier's arrival and poll, mma; the
 * mbarriers are mbar.cuh's) have host stand-ins in tests/cuda_host/emul_stream.h, which the host emulation includes
 * first: tests/cuda_host/test_stream_gemv.cpp runs the GEMV phases on the host. */
#ifndef IG_CUDA_EMUL
IG_DEV unsigned ig_st_sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

/* 1 (default): the weight copies carry an L2 evict-first policy. The stream is read once per step
 * and is far larger than L2, so with the normal policy it pushed out what is read again: the
 * layer's K/V pages prefetched for attention, the activations, the norms. H200, 1B decode: 0.720 /
 * 0.729 ms/token against 0.730 / 0.744 (context 64-192 / 64-320), 0.834 against 0.843 after a
 * 2048-token prompt. 0: the normal policy (measurement). */
#ifndef IG_ST_L2HINT
#define IG_ST_L2HINT 1
#endif
/* Bulk copy of `bytes` (multiple of 16, both addresses 16-byte aligned) into shared memory, counted
 * against the barrier's expected bytes (ig_mb_expect, before it). */
IG_DEV void ig_st_copy(void *dst, const void *src, unsigned bytes, unsigned long long *bar) {
#if IG_ST_L2HINT
    unsigned long long pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
                 "%4;" ::"r"(ig_st_sa(dst)),
                 "l"(src), "r"(bytes), "r"(ig_st_sa(bar)), "l"(pol)
                 : "memory");
#else
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     ig_st_sa(dst)),
                 "l"(src), "r"(bytes), "r"(ig_st_sa(bar))
                 : "memory");
#endif
}
IG_DEV void ig_st_cbar() { asm volatile("bar.sync 1, %0;" ::"n"(IG_ST_CTHREADS) : "memory"); }
IG_DEV void ig_st_red_release(unsigned long long *bar) {
    asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(bar) : "memory");
}
IG_DEV unsigned long long ig_st_ld_acquire(const unsigned long long *bar) {
    unsigned long long c;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(c) : "l"(bar) : "memory");
    return c;
}
/* a phase's small operand into L2 */
IG_DEV void ig_st_prefetch(const void *p, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
#endif /* !IG_CUDA_EMUL */

/* One bulk copy that fills a slot. */
IG_DEV void ig_st_bulk(void *dst, const void *src, unsigned bytes, unsigned long long *bar) {
    ig_mb_expect(bar, bytes);
    ig_st_copy(dst, src, bytes, bar);
}

/* Called by all threads of the CTA before the roles split. */
IG_DEV void ig_st_init(ig_st *st, const unsigned long long *bar, unsigned n) {
    if (threadIdx.x == 0) {
        /* every barrier of earlier launches is complete, and this launch's first one cannot
         * complete before this CTA arrives: the count is gen * n plus fewer than n arrivals */
        st->gen = bar ? *(volatile const unsigned long long *)bar / n : 0;
        for (int i = 0; i < IG_ST_NSLOT; i++) ig_mb_init(&st->full[i], 1), ig_mb_init(&st->empty[i], IG_ST_CWARPS);
        ig_mb_init(&st->selb, 1);
        ig_mb_fence_init();
    }
    __syncthreads();
}

/* Grid barrier among the consumers of all CTAs (all resident: cooperative launch). bar[0] counts
 * arrivals and only grows (64 bits); a CTA arrives with one release reduction (no round trip)
 * and polls the count until its generation is complete. st->gen counts the barriers this CTA has
 * passed, in all launches. Measured on the H200 with 132 CTAs: 1.06 us per barrier (an atomicAdd
 * arrival with a published generation flag took 1.55 us; one release-stored flag per CTA, all
 * polled by a warp with acquire loads, 2.4 us). */
IG_DEV void ig_st_grid_sync(ig_st *st, unsigned long long *bar, unsigned n) {
    ig_st_cbar();
    if (threadIdx.x == 0) {
        const unsigned long long target = ++st->gen * n;
        ig_st_red_release(bar);
        while (ig_st_ld_acquire(bar) < target) {
        }
    }
    ig_st_cbar();
}

/* Activation loads (written earlier in the same kernel by other CTAs): through L2 only. */
IG_DEV float ig_st_ldf(const float *p) { return __ldcg(p); }

/* This CTA's packed rows [r0, r1) of a phase with n_rows rows split in units of `unit`. */
IG_DEV void ig_st_rows(int n_rows, int unit, int rot, int *r0, int *r1) {
    const int G = gridDim.x, nu = n_rows / unit, v = (int)((blockIdx.x + (unsigned)rot) % (unsigned)G);
    *r0 = (int)((long long)v * nu / G) * unit;
    *r1 = (int)((long long)(v + 1) * nu / G) * unit;
}

/* RMSNorm scale of a phase's x from the warps' sums of squares (st->nred, after a barrier). */
IG_DEV float ig_st_nscale(const ig_st *st, int K, float eps) {
    float tot = 0.0f;
#pragma unroll
    for (int i = 0; i < IG_ST_CWARPS; i++) tot += st->nred[i];
    return 1.0f / sqrtf(tot / (float)K + eps); /* as rmsnorm.cu */
}

/* The RMSNorm scale of the K values the CTA's consumer threads hold as J float4 each (zeros past
 * K): each thread's sum of squares in order, the warps' sums through st->nred. */
template <int J>
IG_DEV float ig_st_rms_scale(ig_st *st, const float4 *xv, int K, float eps) {
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < J; j++)
        ss = fmaf(xv[j].x, xv[j].x, fmaf(xv[j].y, xv[j].y, fmaf(xv[j].z, xv[j].z, fmaf(xv[j].w, xv[j].w, ss))));
    ss = ig_warp_sum(ss);
    if ((threadIdx.x & 31) == 0) st->nred[threadIdx.x >> 5] = ss;
    ig_st_cbar();
    return ig_st_nscale(st, K, eps);
}

/* Rows per slot for rows of K bf16: R whole rows of up to 8192 elements, or (SPLIT = 2) one row of
 * up to 16384 elements as two slots of KS = K / 2 each (e.g. Llama-3-8B's down projection, 14336).
 * Quantized rows (WQ 8 / 4 with groups of G, wq.cuh; 9: f8r, q8r's bytes with e4m3 codes) are whole
 * rows of IG_WQ_ROWB bytes (codes then scales), at most one slot each. */
template <int K, int WQ = 0, int G = 32>
struct ig_st_shape {
    static constexpr int SPLIT = !WQ && K * 2 > IG_ST_SLOT ? 2 : 1; /* slots per row */
    static constexpr int KS = K / SPLIT;                              /* elements of a row in one slot */
    static constexpr int RB = WQ ? IG_WQ_ROWB(K, WQ == 9 ? 8 : WQ, G) : KS * 2; /* bytes of a row (piece) in a slot */
    static constexpr int R = SPLIT > 1                ? 1
                             : 8 * RB <= IG_ST_SLOT ? 8
                             : 4 * RB <= IG_ST_SLOT ? 4
                             : 2 * RB <= IG_ST_SLOT ? 2
                                                      : 1;
    static_assert(K % (8 * SPLIT) == 0 && RB <= IG_ST_SLOT, "a row must fit two 16 KB slots");
};

/* Producer (one thread): queue this CTA's rows of a phase of n_rows rows of K (WQ, G as
 * ig_st_shape) in slots, each filled by feed(slot, r, h, n, bar): rows r..r+n-1 (n <= R), piece h
 * of SPLIT, their copies counted on bar (ig_st_bulk, or ig_mb_expect and several ig_st_copy). */
template <int K, int WQ, int G, class FEED>
IG_DEV void ig_st_produce_rows(ig_st *st, unsigned char *ring, int n_rows, int unit, int rot, unsigned *it, FEED feed) {
    typedef ig_st_shape<K, WQ, G> S;
    /* slots in flight: IG_ST_INFLIGHT of 16 KB; quantized rows fill less of a slot, so as many
     * more as keep the same bytes in flight */
    constexpr unsigned INFL = WQ ? (IG_ST_INFLIGHT * 16384u + S::R * S::RB - 1) / (S::R * S::RB) : IG_ST_INFLIGHT;
    int r0, r1;
    ig_st_rows(n_rows, unit, rot, &r0, &r1);
    for (int r = r0; r < r1; r += S::R)
        for (int h = 0; h < S::SPLIT; h++) { /* the row's pieces, one slot each */
            const int n = min(S::R, r1 - r), slot = (int)(*it % IG_ST_NSLOT);
            if (*it >= IG_ST_NSLOT) IG_ST_TIMED(1, ig_mb_wait(&st->empty[slot], ((*it / IG_ST_NSLOT) - 1) & 1));
            if (INFL < IG_ST_NSLOT && *it >= INFL) {
                const unsigned o = *it - INFL;
                IG_ST_TIMED(2, ig_mb_wait(&st->full[o % IG_ST_NSLOT], (o / IG_ST_NSLOT) & 1));
            }
            feed(ring + (size_t)slot * IG_ST_SLOT, r, h, n, &st->full[slot]);
            ++*it;
        }
}

/* Producer (one thread): queue this CTA's rows of a [n_rows][K] bf16 matrix (or of quantized rows:
 * WQ, G as ig_st_shape), R rows a slot in one copy (the phase's small operand pf, its RMSNorm
 * gamma, into L2 first, a ring ahead of the consumers). */
template <int K, int WQ = 0, int G = 32>
IG_DEV void ig_st_produce(ig_st *st, unsigned char *ring, const void *w, int n_rows, int unit, int rot,
                          unsigned *it, const void *pf = 0, unsigned pf_bytes = 0) {
    typedef ig_st_shape<K, WQ, G> S;
    if (pf) ig_st_prefetch(pf, pf_bytes);
    ig_st_produce_rows<K, WQ, G>(st, ring, n_rows, unit, rot, it,
                                 [&](unsigned char *dst, int r, int h, int n, unsigned long long *bar) {
                                     if (WQ) /* whole quantized rows, contiguous */
                                         IG_ST_FEED(dst, IG_ST_SRCQ((const unsigned char *)w, r, S::RB),
                                                    (unsigned)(n * S::RB), bar);
                                     else
                                         IG_ST_FEED(dst, IG_ST_SRC((const ig_bf16 *)w, r, K) + h * S::KS,
                                                    (unsigned)(n * S::KS * 2), bar);
                                 });
}

/* The same phase on tensor cores (sm_80+ mma.sync m16n8k16, bf16 in, f32 accumulate), for
 * K % 128 == 0 and bf16 x. The dot products are the diagonal of a small matrix product: for two
 * rows r of a slot and a window of 8 segments, A row 8r + g holds the weights of segment g of the
 * window and B column j the activations of segment j, so D[8r + g][g] is row r's partial dot
 * over segment g. Within a segment the k order is permuted, the same for A and B, so that A
 * fragments are conflict-free shared loads and x sits in registers for the whole phase: bf16
 * windows are 128 columns (segments of 16, thread q of a group holding columns 4q..4q+3, one
 * mma); q8r windows 256 columns on int8 tensor cores (m16n8k32: segments of 32, thread q holding
 * columns 8q..8q+7, two mma for x's two bytes; see ig_st_slot_q8i); f8r (WQ 9) bf16's windows with
 * its 4 codes a row turned into halves (e4m3 / 2^8, exact) against x / xs in halves (ig_st_xh), f16
 * mma (fp8 mma.sync is emulated through f16 on sm_90); q4r windows are 8 segments of
 * TS::SEG columns, one group's scale and min each (thread q holding SEG / 4 consecutive columns,
 * two mma per 8 of them; see ig_st_q4frag). Warp w owns row pair w / WP of each slot and the
 * windows (w % WP) + WP m of it: its B fragments are loaded once per phase.
 *
 * ig_st_gemv_tc runs one phase: y = x . W^T (+ bias) over this CTA's rows, n_rows packed rows of
 * which the first n_out are real. NORM: x is the f32 residual (EMB: a bf16 embedding row, which
 * CTA 0 also stores to x_out as the f32 residual), RMSNorm'd here with gamma / eps and rounded to
 * bf16 as rmsnorm.cu does; otherwise x is bf16 [K]. EPI 0: y f32 = sum; 1: y f32 += sum (at most
 * IG_ST_CTHREADS rows per CTA); 2: SwiGLU, y bf16 [row / 2] (gate/up rows interleaved by 16).
 * Sums and stores happen once per IG_ST_MAXCH slots. AMAX (EPI 0): the CTA's best key over its
 * stored values (ig_amax_key) goes to amax[blockIdx.x]. SEGW (bf16 rows, a multiple of 128): x's
 * columns are segments of SEGW, each weighted by segw[segment] (a MoE layer's down projection over
 * its experts' concatenated rows, stream_moe.cuh), the columns past SEGN of them one last segment
 * (a shared expert's) weighted by segw[SEGN]: each window's sums are scaled by its segment's weight
 * before they join the row's. */

/* q4r segments: the largest of G, G / 2, ..., 32 columns with 8 of them dividing K; else 32, the
 * last window then partly empty (K % 128 == 0). A segment lies in one group (it divides G). */
constexpr int ig_st_q4seg(int K, int G) { return G <= 32 ? 32 : K % (8 * G) == 0 ? G : ig_st_q4seg(K, G / 2); }

template <int K, int WQ = 0, int G = 32>
struct ig_st_tshape {
    typedef ig_st_shape<K, WQ, G> S;
    static constexpr int R = S::R, RP = R >= 2 ? R / 2 : 1; /* rows and row pairs per slot */
    static constexpr int SPLIT = S::SPLIT, KS = S::KS, RB = S::RB; /* slots per row, row elements and bytes per slot */
    static constexpr bool Q8I = WQ == 8;                          /* q8r: int8 tensor cores */
    static constexpr bool F8 = WQ == 9; /* f8r: bf16's windows, its codes as halves, f16 mma (fp8 mma.sync is not native on sm_90) */
    static constexpr int SEG = WQ == 4 ? ig_st_q4seg(K, G) : Q8I ? 32 : 16; /* columns of a segment */
    static constexpr int NWD = WQ == 4 ? SEG / 32 : 1;           /* q4r: words of 8 codes per thread and segment */
    static constexpr int NW = (KS + 8 * SEG - 1) / (8 * SEG), WP = IG_ST_CWARPS / RP, MW = (NW + WP - 1) / WP; /* windows of a slot */
    static_assert(KS % 128 == 0, "tensor-core phases need K % 128 == 0 (K % 256 for rows over two slots)");
    static_assert(IG_ST_CWARPS % RP == 0, "row pairs must divide the consumer warps");
    static_assert(WQ == 0 || SPLIT == 1, "a quantized row fits one slot");
};

/* A fragments from q4r rows, built with logic operations only (the cvt instructions of a direct
 * conversion run at a quarter of the rate and could not keep up with the stream): 128 + each code
 * of a word of 8 nibbles (element j at bits 4j; bf16 0x4300 | c is exact) as the pairs (0, 4),
 * (1, 5) (one mma's two k pairs) and (2, 6), (3, 7) (the next mma's), so a segment's dot is
 * scale (D - 128 sum x) + min sum x = scale D + (min - 128 scale) sum x. */
IG_DEV void ig_st_q4frag(unsigned x, unsigned *o) {
    o[0] = ig_andor(x, 0x000f000fu, 0x43004300u), o[1] = ig_andor(x >> 4, 0x000f000fu, 0x43004300u);
    o[2] = ig_andor(x >> 8, 0x000f000fu, 0x43004300u), o[3] = ig_andor(x >> 12, 0x000f000fu, 0x43004300u);
}
/* N (1, 2, 4) consecutive words of shared memory in one load */
template <int N>
IG_DEV void ig_st_ldw(const unsigned char *p, unsigned *o) {
    if (N == 4) {
        const uint4 v = *(const uint4 *)p;
        o[0] = v.x, o[1] = v.y, o[N > 2 ? 2 : 0] = v.z, o[N > 3 ? 3 : 0] = v.w;
    } else if (N == 2) {
        const uint2 v = *(const uint2 *)p;
        o[0] = v.x, o[N > 1 ? 1 : 0] = v.y;
    } else {
        o[0] = *(const unsigned *)p;
    }
}

/* q4r: the (scale, min) of column k's group in a row of a slot (IEEE half pairs after the codes). */
template <int K, int G>
IG_DEV float2 ig_st_q4sm(const unsigned char *row, int k) {
    const unsigned u = *(const unsigned *)(row + K / 2 + 4 * (k / G));
    return make_float2(ig_f16_to_f32((unsigned short)(u & 0xffffu)), ig_f16_to_f32((unsigned short)(u >> 16)));
}
/* Two bf16 of a word as floats. */
IG_DEV void ig_unpack2_bf16_(unsigned w, float *o) { o[0] = __uint_as_float(w << 16), o[1] = __uint_as_float(w & 0xffff0000u); }

#ifndef IG_CUDA_EMUL
IG_DEV void ig_st_mma(float *d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* int8 tensor cores, m16n8k32, s32 accumulate: s8 weights times s8 (the high bytes of x) or u8
 * (its low bytes) */
IG_DEV void ig_st_imma_s8(int *d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
IG_DEV void ig_st_imma_u8(int *d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

#endif /* !IG_CUDA_EMUL */

/* q8r on int8 tensor cores: the D fragments of rows ra, rb (pa, pb) over this warp's windows of
 * 256 columns, dh with the high bytes of x, dl with the low ones (exact integer sums). A row
 * 8r + g of a window is segment g (32 columns) of row r; the k order within a segment is
 * permuted so that thread q holds its 8 consecutive columns 8q..8q+7 (mma k 4q..4q+3 and
 * 16+4q..16+4q+3): one 8-byte load per row, conflict-free, and the codes go to the mma as they
 * are stored. Rows past the slot's and lanes past the row's end read as ig_st_slot_dots says.
 * (Replaced bf16 fragments made from the codes by logic operations and one fma per pair, wq.cuh's
 * ig_wq8_frag: H100, tests/gpu/exp_stream.cu, 16 layers of the 1B GEMVs: gate/up slots 7.7 -> 6.1
 * us a layer, the layers 32.6 -> 32.1 us with x still loaded per warp.) */
template <int K, class CCOL>
IG_DEV void ig_st_slot_q8i(int *dh, int *dl, const unsigned char *pa, const unsigned char *pb, CCOL ccol,
                           const unsigned (*xr)[4]) {
    typedef ig_st_tshape<K, 8, 32> TS;
#pragma unroll
    for (int m = 0; m < TS::MW; m++) {
        const int c0 = ccol(m);
        if (c0 == -2) continue; /* warp-uniform: the window lies past the row */
        const int cl = c0 < 0 ? 0 : c0;
        const uint2 wa = *(const uint2 *)(pa + cl);
        const uint2 wb = TS::R >= 2 ? *(const uint2 *)(pb + cl) : make_uint2(0u, 0u);
        ig_st_imma_s8(dh, wa.x, wb.x, wa.y, wb.y, xr[m][0], xr[m][1]);
        ig_st_imma_u8(dl, wa.x, wb.x, wa.y, wb.y, xr[m][2], xr[m][3]);
    }
}

/* The biased exponent eb of the warp's largest |v| over its NC chunks of CW (at least 14): |v| <
 * 2^E with E = eb - 126, for ig_st_x16's and ig_st_xh's power-of-two scales. */
template <int NC, int CW>
IG_DEV int ig_st_xexp(const float (*v)[CW]) {
    float mx = 0.0f;
#pragma unroll
    for (int i = 0; i < NC; i++)
#pragma unroll
        for (int e = 0; e < CW; e++) mx = fmaxf(mx, fabsf(v[i][e]));
    return max((__float_as_int(ig_warp_max(mx)) >> 23) & 0xff, 14);
}

/* f8r's x as IEEE halves for ig_st_slot_dots' f16 mma: v / xs with xs = 2^(E - 15) for the warp's
 * largest |v| < 2^E, so every bf16 value v within 2^24 of it is exact in half (11 significant bits,
 * normal down to 2^-14 of 2^15); xr[i][0] / [1] hold columns (0, 1) / (2, 3) of chunk i (CW 4), as
 * the bf16 path's pairs. Returns xs. */
template <int NC>
IG_DEV float ig_st_xh(const float (*v)[4], unsigned (*xr)[4]) {
    const int eb = ig_st_xexp<NC, 4>(v);
    const float qs = __int_as_float((268 - eb) << 23);                        /* 2^(15 - E), E = eb - 126 */
#pragma unroll
    for (int i = 0; i < NC; i++)
#pragma unroll
        for (int w = 0; w < 2; w++) /* exact: v qs is a bf16 value times a power of two */
            xr[i][w] = (unsigned)ig_f32_to_f16(v[i][2 * w] * qs) | (unsigned)ig_f32_to_f16(v[i][2 * w + 1] * qs) << 16;
    return __int_as_float((eb - 14) << 23); /* 2^(E - 15) */
}

/* q8r's x as 16-bit fixed point for ig_st_slot_q8i: v (the bf16-rounded values of this thread's
 * chunks) = xs (256 h + l), h signed and l unsigned bytes, xs = 2^(E - 15) for the warp's largest
 * |v| < 2^E, so every v within 2^8 of it is exact (bf16 has 8 significant bits) and the others are
 * off by at most 2^(E - 16). v 2^(15 - E) + 1.5 2^23 is 1.5 2^23 + round(v 2^(15 - E)) (|v 2^(15 - E)| <
 * 2^15), whose bytes 0 and 1 are l and h: no conversion instruction. Returns xs. */
template <int NC>
IG_DEV float ig_st_x16(const float (*v)[8], unsigned (*xr)[4]) {
    const int eb = ig_st_xexp<NC, 8>(v);
    const float qs = __int_as_float((268 - eb) << 23);                        /* 2^(15 - E), E = eb - 126 */
#pragma unroll
    for (int i = 0; i < NC; i++)
#pragma unroll
        for (int w = 0; w < 2; w++) { /* columns 4w..4w+3 of the chunk */
            unsigned t[4];
#pragma unroll
            for (int e = 0; e < 4; e++) t[e] = __float_as_uint(fmaf(v[i][4 * w + e], qs, 12582912.0f));
            const unsigned p01 = __byte_perm(t[0], t[1], 0x5140), p23 = __byte_perm(t[2], t[3], 0x5140); /* l l h h */
            xr[i][w] = __byte_perm(p01, p23, 0x7632), xr[i][2 + w] = __byte_perm(p01, p23, 0x5410);
        }
    return __int_as_float((eb - 14) << 23); /* 2^(E - 15) */
}

/* The D fragment of rows ra, rb (pa, pb; row rb only when R >= 2) of a slot over this warp's
 * windows (column chunk i at ccol(i), its x pairs xr[i]; q4r: xsum per window). The loads do not
 * look at how many rows the slot holds: a row past them reads what the slot held before (or never
 * written shared memory), whose sums land in its own D rows and are never stored, and branches
 * around each load would keep the loads from running ahead of the mma chain (the consumers of
 * quantized rows, whose fragments take several operations per word, ran 1.5-2x slower so). */
template <int K, int WQ, int QG, int SEGW, class CCOL>
IG_DEV void ig_st_slot_dots(float (*d)[4], const unsigned char *pa, const unsigned char *pb, int h, CCOL ccol,
                            const unsigned (*xr)[4], const float *xsum, const float *ww) {
    typedef ig_st_tshape<K, WQ, QG> TS;
    constexpr int MW = TS::MW, NWD = TS::NWD;
#pragma unroll
    for (int m = 0; m < MW; m++) {
        if (WQ == 4) {
            float e[2][4] = {}; /* two mma chains over the segment's words (one scale) */
            const int c0 = ccol(m * NWD);
            if (c0 == -2) continue; /* warp-uniform: the window lies past the row */
            /* -1: this lane's segment is past the row; its x is zero, so it reads column 0 */
            const int cl = c0 < 0 ? 0 : c0;
            unsigned ua[NWD], ub[NWD];
#pragma unroll
            for (int w = 0; w < NWD; w++) ub[w] = 0u;
            ig_st_ldw<NWD>(pa + cl / 2, ua);
            if (TS::R >= 2) ig_st_ldw<NWD>(pb + cl / 2, ub);
#pragma unroll
            for (int w = 0; w < NWD; w++) {
                unsigned fa[4], fb[4];
                ig_st_q4frag(ua[w], fa), ig_st_q4frag(ub[w], fb);
                const int i = m * NWD + w;
                ig_st_mma(e[w & 1], fa[0], fb[0], fa[1], fb[1], xr[i][0], xr[i][1]);
                ig_st_mma(e[w & 1], fa[2], fb[2], fa[3], fb[3], xr[i][2], xr[i][3]);
            }
            if (NWD > 1)
#pragma unroll
                for (int k = 0; k < 4; k++) e[0][k] += e[1][k];
            const float2 sa = ig_st_q4sm<K, QG>(pa, cl), sb = TS::R >= 2 ? ig_st_q4sm<K, QG>(pb, cl) : make_float2(0.0f, 0.0f);
            float *a = d[m % IG_ST_ACC];
            a[0] = fmaf(sa.x, e[0][0], fmaf(sa.y - 128.0f * sa.x, xsum[m], a[0]));
            a[1] = fmaf(sa.x, e[0][1], fmaf(sa.y - 128.0f * sa.x, xsum[m], a[1]));
            a[2] = fmaf(sb.x, e[0][2], fmaf(sb.y - 128.0f * sb.x, xsum[m], a[2]));
            a[3] = fmaf(sb.x, e[0][3], fmaf(sb.y - 128.0f * sb.x, xsum[m], a[3]));
        } else {
            const int cs = ccol(m); /* the column within the slot's row piece */
            if (cs < 0) continue;   /* warp-uniform: the window lies past the row */
            /* the piece's x (a select, not a dynamic index: xr stays in registers) */
            const unsigned b0 = TS::SPLIT > 1 && h ? xr[(TS::SPLIT - 1) * MW + m][0] : xr[m][0];
            const unsigned b1 = TS::SPLIT > 1 && h ? xr[(TS::SPLIT - 1) * MW + m][1] : xr[m][1];
            if (TS::F8) { /* 4 e4m3 codes a row: columns (0, 1) and (2, 3) as halves e4m3 / 2^8, exact */
                const uint2 fa = ig_wf8_adj_h(*(const unsigned *)(pa + cs));
                const uint2 fb = ig_wf8_adj_h(TS::R >= 2 ? *(const unsigned *)(pb + cs) : 0u);
                const unsigned a[4] = {fa.x, fb.x, fa.y, fb.y};
                ig_mma16f(d[m % IG_ST_ACC], a, b0, b1);
                continue;
            }
            const uint2 wa = *(const uint2 *)(pa + cs * 2);
            const uint2 wb = TS::R >= 2 ? *(const uint2 *)(pb + cs * 2) : make_uint2(0u, 0u);
            if (SEGW) { /* the window's own sums, times its segment's weight */
                float e[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                ig_st_mma(e, wa.x, wb.x, wa.y, wb.y, b0, b1);
                const float sw = TS::SPLIT > 1 && h ? ww[(TS::SPLIT - 1) * MW + m] : ww[m];
                float *a = d[m % IG_ST_ACC];
#pragma unroll
                for (int k = 0; k < 4; k++) a[k] = fmaf(sw, e[k], a[k]);
            } else {
                ig_st_mma(d[m % IG_ST_ACC], wa.x, wb.x, wa.y, wb.y, b0, b1);
            }
        }
    }
}

/* The x of a NORM phase is staged once per CTA: each consumer thread loads the columns
 * 4 (t + 256 j) .. +3 (coalesced, every column once) and sums their squares, scales them and rounds
 * them to bf16 as rmsnorm.cu does, and they go to shared memory (psum's space, free between
 * phases), IG_ST_XS columns at a time, for the warps to load their chunks from. (Each warp loading
 * its own chunks of the f32 residual from L2 read it RP times over, from half-used sectors where a
 * chunk is 8 f32: 1.8-2.8 us a normed phase on the H100 with q8r rows, 0.9 with bf16 rows; staged,
 * 0.95.) Phases of bf16 x load their chunks directly (staging them too cost 1.6 us more in the down
 * phase of K 8192: the loads' latency no longer overlapped the first slot's wait). */
#define IG_ST_XS (IG_ST_PSUM * 2)
template <int K>
struct ig_st_xstage {
    static constexpr int J = (K + 4 * IG_ST_CTHREADS - 1) / (4 * IG_ST_CTHREADS); /* 4-column blocks per thread */
    static constexpr int NP = (K + IG_ST_XS - 1) / IG_ST_XS;                       /* pieces of IG_ST_XS columns */
    static_assert(IG_ST_XS % (4 * IG_ST_CTHREADS) == 0, "a thread's block lies in one piece");
};

/* The CW (4 or 8) bf16 at p as floats; CG: global memory written in this kernel, loaded through L2
 * only; else shared memory. */
template <int CW, bool CG>
IG_DEV void ig_st_chunk(const ig_bf16 *p, float *o) {
    if (CW == 8) {
        ig_unpack8_bf16(CG ? __ldcg((const uint4 *)p) : *(const uint4 *)p, o);
    } else {
        const uint2 u = CG ? __ldcg((const uint2 *)p) : *(const uint2 *)p;
        ig_unpack2_bf16_(u.x, o), ig_unpack2_bf16_(u.y, o + 2);
    }
}

/* The chunks of a NORM phase's x, staged as described above (EMB: x is a bf16 row, which CTA 0
 * also stores to x_out as the f32 residual; gm: gamma at this thread's staged columns). */
template <int K, bool EMB, int NC, int CW, class CCOL>
IG_DEV void ig_st_xnorm(ig_st *st, const void *x, const float4 *gm, float eps, float *x_out, CCOL ccol, float (*xf)[CW]) {
    typedef ig_st_xstage<K> XS;
    const int t = threadIdx.x;
    float4 xv[XS::J];
#pragma unroll
    for (int j = 0; j < XS::J; j++) {
        const int c = 4 * (t + IG_ST_CTHREADS * j);
        xv[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (c >= K) continue;
        if (EMB) { /* a bf16 row */
            const uint2 u = __ldg((const uint2 *)((const ig_bf16 *)x + c));
            xv[j] = make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                                __uint_as_float(u.y & 0xffff0000u));
            if (blockIdx.x == 0) *(float4 *)(x_out + c) = xv[j];
        } else {
            xv[j] = __ldcg((const float4 *)((const float *)x + c));
        }
    }
    const float scale = ig_st_rms_scale<XS::J>(st, xv, K, eps);
    ig_bf16 *xs = (ig_bf16 *)st->psum;
#pragma unroll
    for (int p = 0; p < XS::NP; p++) {
#pragma unroll
        for (int j = 0; j < XS::J; j++) {
            const int c = 4 * (t + IG_ST_CTHREADS * j);
            if (c / IG_ST_XS == p && c < K)
                *(uint2 *)(xs + c - p * IG_ST_XS) = make_uint2(ig_pack2_bf16(xv[j].x * scale * gm[j].x, xv[j].y * scale * gm[j].y),
                                                               ig_pack2_bf16(xv[j].z * scale * gm[j].z, xv[j].w * scale * gm[j].w));
        }
        ig_st_cbar(); /* the piece is staged */
#pragma unroll
        for (int i = 0; i < NC; i++) {
            const int c = ccol(i);
            if (p == 0)
#pragma unroll
                for (int e = 0; e < CW; e++) xf[i][e] = 0.0f;
            if (c < 0 || c / IG_ST_XS != p) continue;
            ig_st_chunk<CW, false>(xs + c - p * IG_ST_XS, xf[i]);
        }
        ig_st_cbar(); /* psum is free again (for the next piece, or the phase's sums) */
    }
}

/* This thread's x of a phase as mma B pairs: chunk i of CW columns (4 for bf16 / q8r, 8 for q4r and
 * q8r on int8 tensor cores) at ccol(i) (< 0: past the row, zeros). NORM: the f32 residual (EMB: a
 * bf16 row, stored by CTA 0 to x_out) times the RMSNorm scale and gm (gamma at this thread's staged
 * columns), rounded to bf16; else bf16 x. q4r also gets the sum of each window's segment (the
 * rounded values, over the 4 threads of the segment); q8r on int8 tensor cores x's scale in xsum[0]. */
template <int K, int WQ, int QG, bool NORM, bool EMB, int NC, int CW, class CCOL>
IG_DEV void ig_st_xregs(ig_st *st, const void *x, const float4 *gm, float eps, float *x_out, CCOL ccol, unsigned (*xr)[4],
                        float *xsum) {
    typedef ig_st_tshape<K, WQ, QG> TS;
    float xf[NC][CW];
    if (NORM) ig_st_xnorm<K, EMB, NC, CW>(st, x, gm, eps, x_out, ccol, xf);
    else /* bf16 x, loaded as chunks: their L2 latency overlaps the first slot's wait */
#pragma unroll
        for (int i = 0; i < NC; i++) {
            const int c = ccol(i);
#pragma unroll
            for (int e = 0; e < CW; e++) xf[i][e] = 0.0f;
            if (c < 0) continue;
            ig_st_chunk<CW, true>((const ig_bf16 *)x + c, xf[i]);
        }
    if (TS::Q8I) { /* 16-bit fixed point */
        xsum[0] = ig_st_x16<NC>((const float (*)[8])xf, xr);
    } else if (TS::F8) { /* halves of x / xs */
        xsum[0] = ig_st_xh<NC>((const float (*)[4])xf, xr);
    } else {
#pragma unroll
        for (int i = 0; i < NC; i++) {
            const float *v = xf[i];
            if (CW == 8) /* q4r pairs (c, c+4), (c+1, c+5), (c+2, c+6), (c+3, c+7) */
#pragma unroll
                for (int e = 0; e < 4; e++) xr[i][e] = ig_pack2_bf16(v[e], v[CW > 4 ? e + 4 : 0]);
            else
                xr[i][0] = ig_pack2_bf16(v[0], v[1]), xr[i][1] = ig_pack2_bf16(v[2], v[3]);
        }
    }
    if (WQ == 4) { /* the segment sums of the rounded x, per window */
#pragma unroll
        for (int m = 0; m < TS::MW; m++) {
            float sx = 0.0f;
#pragma unroll
            for (int w = 0; w < TS::NWD; w++) {
                float f[8];
#pragma unroll
                for (int e = 0; e < 4; e++) ig_unpack2_bf16_(xr[m * TS::NWD + w][e], f + 2 * e);
                sx += ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7]));
            }
            sx += __shfl_xor_sync(IG_FULL_MASK, sx, 1);
            xsum[m] = sx + __shfl_xor_sync(IG_FULL_MASK, sx, 2);
        }
    }
}

template <int K, int EPI, bool NORM, bool BIAS, bool EMB = false, bool AMAX = false, int WQ = 0, int QG = 32, int SEGW = 0,
          int SEGN = 1 << 30>
IG_DEV void ig_st_gemv_tc(ig_st *st, const unsigned char *ring, int n_rows, int n_out, int rot, const void *x,
                          const float *gamma, float eps, const float *bias, void *y, unsigned *it,
                          unsigned long long *bar, float *x_out = 0, unsigned long long *amax = 0,
                          const float *segw = 0) {
    typedef ig_st_tshape<K, WQ, QG> TS;
    constexpr int R = TS::R, WP = TS::WP, MW = TS::MW, SP = TS::SPLIT, KS = TS::KS, G = IG_ST_GROUP;
    constexpr int SEG = TS::SEG, NWD = TS::NWD;
    constexpr int CW = WQ == 4 || TS::Q8I ? 8 : 4, NC = WQ == 4 ? MW * NWD : SP * MW; /* x chunks: columns, chunks per thread */
    static_assert(G == 1 || G == 2 || G == 4, "IG_ST_GROUP is 1, 2 or 4");
    static_assert(SEGW == 0 || (WQ == 0 && SEGW % 128 == 0), "weighted segments: bf16 rows, whole windows");
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int g = lane >> 2, q = lane & 3, rp = warp / WP, wq = warp % WP;
    const int unit = EPI == 2 ? 32 : 1;
    int r0, r1;
    ig_st_rows(n_rows, unit, rot, &r0, &r1);
    /* the column of this thread's x chunk i: bf16 / q8r chunk h MW + m is columns 4q..4q+3 of
     * segment g of window m of row piece h; q4r chunk m NWD + w is word w of this thread's SEG / 4
     * columns of segment g of window m. -2: the window is past the row (the whole warp), -1: only
     * this lane's segment is (q4r). */
    auto ccol = [&](int i) -> int {
        if (WQ == 4) {
            const int j = wq + WP * (i / NWD), k0 = j * 8 * SEG + g * SEG;
            return j >= TS::NW ? -2 : k0 >= K ? -1 : k0 + q * (SEG / 4) + 8 * (i % NWD);
        }
        if (TS::Q8I) {
            const int j = wq + WP * i, k0 = j * 256 + g * 32;
            return j >= TS::NW ? -2 : k0 >= K ? -1 : k0 + 8 * q;
        }
        const int h = i / MW, j = wq + WP * (i % MW);
        return j >= TS::NW ? -2 : h * KS + j * 128 + g * 16 + 4 * q;
    };

    IG_ST_MARK(0);
    constexpr int XJ = ig_st_xstage<K>::J;
    float4 gm[NORM ? XJ : 1]; /* gamma at the columns this thread stages */
    if (NORM)
#pragma unroll
        for (int j = 0; j < XJ; j++) {
            const int c = 4 * (t + IG_ST_CTHREADS * j);
            gm[j] = c < K ? __ldg((const float4 *)(gamma + c)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    if (bar) ig_st_grid_sync(st, bar, gridDim.x); /* x and y are the previous phase's results */
    else ig_st_cbar();                              /* psum (x's staging) is free */
    IG_ST_MARK(1);
    float yold = 0.0f;
    if (EPI == 1 && t < r1 - r0 && r0 + t < n_out) yold = ig_st_ldf((const float *)y + r0 + t);
    unsigned xr[NC][4];
    float xsum[WQ == 4 ? MW : 1];
    ig_st_xregs<K, WQ, QG, NORM, EMB, NC, CW>(st, x, gm, eps, x_out, ccol, xr, xsum);
    float ww[SEGW ? NC : 1]; /* SEGW: the weight of each x chunk's segment */
    if (SEGW)
#pragma unroll
        for (int i = 0; i < NC; i++) {
            const int c = ccol(i);
            ww[i] = c >= 0 ? segw[min(c / (SEGW ? SEGW : 1), SEGN)] : 0.0f;
        }
    IG_ST_MARK(2);

    const int nch = (r1 - r0 + R - 1) / R * SP, nr = r1 - r0; /* slots, rows */
    unsigned long long best = 0ull; /* AMAX: this thread's best key */
    for (int cb = 0; cb < nch; cb += IG_ST_MAXCH) { /* batches of slots whose sums fit psum */
        const int ce = min(nch, cb + IG_ST_MAXCH);
        for (int c0 = cb; c0 < ce; c0 += G) { /* a group of G slots: G independent mma chains, one reduction */
            float u[G][2]; /* per slot, the diagonal partials of rows ra (u[j][0]) and rb (u[j][1]) */
#pragma unroll
            for (int j = 0; j < G; j++) {
                const int ci = c0 + j;
                u[j][0] = u[j][1] = 0.0f;
                if (G > 1 && ci >= ce) continue;
                const int n = min(R, nr - ci / SP * R), slot = (int)((*it + ci) % IG_ST_NSLOT), h = ci % SP;
                IG_ST_TIMED(0, ig_mb_wait(&st->full[slot], ((*it + ci) / IG_ST_NSLOT) & 1));
                const unsigned char *sb = ring + (size_t)slot * IG_ST_SLOT;
                const int ra = 2 * rp, rb = 2 * rp + 1; /* rows of this warp's pair */
                float d[IG_ST_ACC][4] = {}; /* IG_ST_ACC accumulators over the windows: shorter mma chains */
                const unsigned char *pa = sb + (size_t)ra * TS::RB, *pb = sb + (size_t)rb * TS::RB;
                if (TS::Q8I) {
                    int dh[4] = {0, 0, 0, 0}, dl[4] = {0, 0, 0, 0};
                    ig_st_slot_q8i<K>(dh, dl, pa, pb, ccol, xr);
#pragma unroll
                    for (int e = 0; e < 4; e++) d[0][e] = 256.0f * (float)dh[e] + (float)dl[e];
                } else {
                    ig_st_slot_dots<K, WQ, QG, SEGW>(d, pa, pb, h, ccol, xr, xsum, ww);
#pragma unroll
                    for (int a = 1; a < IG_ST_ACC; a++)
#pragma unroll
                        for (int e = 0; e < 4; e++) d[0][e] += d[a][e];
                }
                /* lanes q == g / 2 hold the diagonal: D[g][g] (row ra) and D[8 + g][g] (row rb) */
                const bool diag = q == (g >> 1);
                u[j][0] = diag ? ((g & 1) ? d[0][1] : d[0][0]) : 0.0f;
                u[j][1] = diag ? ((g & 1) ? d[0][3] : d[0][2]) : 0.0f;
                if (TS::Q8I || TS::F8) { /* q8r / f8r: the rows' scales (and x's), read before the slot goes back */
                    const float xs = TS::F8 ? xsum[0] * IG_KVQ_E4M3_UNIT : xsum[0]; /* f8r: its halves are e4m3 / 2^8 */
                    if (ra < n) u[j][0] *= *(const float *)(pa + K) * xs;
                    if (R >= 2 && rb < n) u[j][1] *= *(const float *)(pb + K) * xs;
                }
                __syncwarp(); /* every lane's loads of the slot are done: it goes back to the producer */
                if (lane == 0) ig_mb_arrive(&st->empty[slot]);
            }
            /* the group's 2G sums in log2(2G) halving exchanges and then plain butterflies: lane bit 16
             * takes the row, bits 8, 4 the slot's bits 0, 1; lane 16 r + 32 j / (2 G) ends with sum (j, r) */
            float v[2 * G];
#pragma unroll
            for (int j = 0; j < G; j++) v[2 * j] = u[j][0], v[2 * j + 1] = u[j][1];
#pragma unroll
            for (int n2 = 2 * G, bit = 16; n2 > 1; n2 >>= 1, bit >>= 1) {
                const bool up = lane & bit;
#pragma unroll
                for (int i = 0; i < n2 / 2; i++)
                    v[i] = (up ? v[2 * i + 1] : v[2 * i]) + __shfl_xor_sync(IG_FULL_MASK, up ? v[2 * i] : v[2 * i + 1], bit);
            }
#pragma unroll
            for (int o = 16 / G / 2; o > 0; o >>= 1) v[0] += __shfl_xor_sync(IG_FULL_MASK, v[0], o);
            const int low = 32 / (2 * G), sj = (lane & 15) / low, sr = lane >> 4; /* this lane's sum */
            const int sjs = G == 4 ? ((sj & 1) << 1 | sj >> 1) : sj; /* bit 8 is slot bit 0 */
            if (lane % low == 0 && c0 + sjs < ce) st->psum[((c0 + sjs - cb) * IG_ST_CWARPS + warp) * 2 + sr] = v[0];
        }
        IG_ST_MARK(3);
        ig_st_cbar(); /* every slot's sums of the batch are in */
        /* local row k of the batch, in its slots (k / R) SP + h: pair (k % R) / 2, row (k % R) % 2; the sums
         * of its pieces' warps */
        auto rowsum = [&](int k) {
            const int kr = k % R, p = kr >> 1, r = kr & 1;
            float s = 0.0f;
#pragma unroll
            for (int h = 0; h < SP; h++) {
                const int ci = k / R * SP + h;
#pragma unroll
                for (int i = 0; i < WP; i++) s += st->psum[(ci * IG_ST_CWARPS + p * WP + i) * 2 + r];
            }
            return s;
        };
        const int k0 = cb / SP * R, k1 = min(nr, ce / SP * R); /* the batch's local rows */
        if (EPI == 2) {
            for (int k = t; k < (k1 - k0) / 2; k += IG_ST_CTHREADS) {
                const int lg = (k >> 4) * 32 + (k & 15), lu = lg + 16; /* the batch's gate / up rows */
                float ga = rowsum(lg), u = rowsum(lu);
                if (BIAS) ga += bias[r0 + k0 + lg], u += bias[r0 + k0 + lu];
                const int j = (r0 + k0) / 2 + k;
                if (j < n_out) ((ig_bf16 *)y)[j] = ig_f32_to_bf16(ga / (1.0f + expf(-ga)) * u);
            }
        } else {
            for (int k = t; k < k1 - k0; k += IG_ST_CTHREADS) { /* EPI 1: one batch of <= IG_ST_CTHREADS rows */
                float s = rowsum(k);
                const int row = r0 + k0 + k;
                if (BIAS) s += bias[row];
                if (row < n_out) {
                    ((float *)y)[row] = EPI == 1 ? yold + s : s;
                    if (AMAX) best = max(best, ig_amax_key(s, row));
                }
            }
        }
        if (ce < nch) ig_st_cbar(); /* psum is free for the next batch */
    }
    *it += nch;
    if (AMAX) { /* the CTA's best key */
        __shared__ unsigned long long ig_st_best[IG_ST_CWARPS];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) best = max(best, __shfl_xor_sync(IG_FULL_MASK, best, o));
        if (lane == 0) ig_st_best[warp] = best;
        ig_st_cbar();
        if (t == 0) {
            for (int i = 1; i < IG_ST_CWARPS; i++) best = max(best, ig_st_best[i]);
            amax[blockIdx.x] = best;
        }
    }
    IG_ST_MARK(4);
}

#endif /* IG_CUDA_STREAM_CUH */
