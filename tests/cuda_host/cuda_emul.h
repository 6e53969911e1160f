/* cuda_emul.h — just enough of CUDA to run the quantized-KV and sampling kernel templates on the host, for tests
 * without a GPU (tests/cuda_host): a CTA is blockDim fibers (ucontext; __syncthreads a barrier of them,
 * __syncwarp a barrier per warp, __shfl_xor_sync / __shfl_up_sync / __shfl_sync through a slot per
 * lane between two warp barriers), __shared__ variables are static storage (one CTA runs at a time), the __f*_rn
 * intrinsics are plain IEEE operations (build with -ffp-contract=off), and common.cuh's helpers are
 * re-stated without PTX. No __CUDA_ARCH__: architecture-specific paths (cp.async, mma) are not
 * compiled; kernels that test IG_CUDA_EMUL (qgemm.cu, moe.cu's grouped products, attention_prefill.cu's
 * tensor-core path) run theirs on the warp-collective stand-ins at the end (ldmatrix and its
 * transposed form, mma.sync through a slot per lane between two warp barriers, cp.async as a plain
 * copy into the dynamic shared memory, where every such kernel keeps its tiles; mbar.cuh's mbarriers,
 * named barriers, setmaxnreg and TMA tile loads, for stream.cuh's ring and attention_prefill.cu's
 * _flash_ws). IG_F16 1 before the include: the 16-bit type is IEEE half. Test code only. */
#ifndef IG_CUDA_EMUL_H
#define IG_CUDA_EMUL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <atomic>
#include <stdio.h>
#include <ucontext.h>
#include <functional>
#include <vector>

#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static
#define __launch_bounds__(...)
#define __grid_constant__
#define IG_CUDA_EMUL 1
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
static float2 make_float2(float a, float b) { return {a, b}; }
static float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
static uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
#include "emul_bits.h" /* __byte_perm, __uint_as_float, __float_as_uint */
struct dim3e { unsigned x, y, z; };
static uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static dim3e threadIdx, blockIdx, gridDim, blockDim;
/* the CTA's threads are fibers (ucontext), switched only at barriers: deterministic and fast on a
 * machine of few cores */
struct emul_fiber {
    ucontext_t ctx;
    int wait; /* 0 running, 1 at __syncthreads, 2 at __syncwarp, 3 done, 4 yielding, 5 at a named barrier */
    unsigned bar; /* which named barrier (when wait is 5) */
};
static std::vector<emul_fiber> g_fib;
static std::vector<std::vector<char>> g_stacks;
static ucontext_t g_sched;
static unsigned g_cur;
static void emul_wait(int kind) {
    g_fib[g_cur].wait = kind;
    swapcontext(&g_fib[g_cur].ctx, &g_sched);
}
static void __syncthreads() { emul_wait(1); }
/* bar.sync id, count (named barrier id, 1 by default, opens when count threads wait at it) and a
 * yield (a fiber polling for another's progress, e.g. an mbarrier's phase: it runs again after
 * every other fiber has had its turn) */
static unsigned g_named_count[16];
static void emul_bar_named(unsigned count, unsigned id = 1) {
    g_named_count[id & 15] = count, g_fib[g_cur].bar = id & 15, emul_wait(5);
}
static void emul_yield() { emul_wait(4); }
static void __syncwarp(unsigned = 0xffffffffu) { emul_wait(2); }
static float g_slot[32][32];
static float __shfl_xor_sync(unsigned, float v, int o) {
    float *s = g_slot[threadIdx.x >> 5];
    s[threadIdx.x & 31] = v;
    __syncwarp();
    const float r = s[(threadIdx.x & 31) ^ (unsigned)o];
    __syncwarp();
    return r;
}
static float __shfl_up_sync(unsigned, float v, int o) {
    float *s = g_slot[threadIdx.x >> 5];
    const unsigned l = threadIdx.x & 31;
    s[l] = v;
    __syncwarp();
    const float r = l >= (unsigned)o ? s[l - o] : v;
    __syncwarp();
    return r;
}
static float __shfl_sync(unsigned, float v, int src) {
    float *s = g_slot[threadIdx.x >> 5];
    s[threadIdx.x & 31] = v;
    __syncwarp();
    const float r = s[src & 31];
    __syncwarp();
    return r;
}
#define __align__(n) __attribute__((aligned(n)))
/* the same for 32- and 64-bit integers (sample.cu's keys, indices and masses) */
static unsigned long long g_slot64[32][32];
template <class T> static T emul_shfl_from(T v, unsigned src) {
    static_assert(sizeof(T) <= 8, "64 bits at most");
    unsigned long long x = 0, *s = g_slot64[threadIdx.x >> 5];
    memcpy(&x, &v, sizeof v);
    s[threadIdx.x & 31] = x;
    __syncwarp();
    x = s[src & 31];
    __syncwarp();
    T r;
    memcpy(&r, &x, sizeof r);
    return r;
}
static unsigned __shfl_sync(unsigned, unsigned v, int src) { return emul_shfl_from(v, (unsigned)src & 31u); }
template <class T> static T __shfl_xor_sync(unsigned, T v, int o) { return emul_shfl_from(v, (threadIdx.x & 31) ^ (unsigned)o); }
template <class T> static T __shfl_up_sync(unsigned, T v, int o) {
    const unsigned lane = threadIdx.x & 31;
    return emul_shfl_from(v, lane >= (unsigned)o ? lane - (unsigned)o : lane);
}
/* __syncthreads_or: every thread ORs in, a barrier, every thread reads, a barrier; thread 0 (the
 * first fiber to run after a barrier) clears the slot for the next call before any thread adds */
static int g_sync_or;
static int __syncthreads_or(int p) {
    if (p) g_sync_or = 1;
    __syncthreads();
    const int r = g_sync_or;
    __syncthreads();
    if (threadIdx.x == 0) g_sync_or = 0;
    return r;
}
static int min(int a, int b) { return a < b ? a : b; }
static int max(int a, int b) { return a > b ? a : b; }
static unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
#define __expf(x) expf(x) /* (glibc declares a __expf of its own) */
static void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static float __fadd_rn(float a, float b) { return a + b; }
static float __fsub_rn(float a, float b) { return a - b; }
static float __fmul_rn(float a, float b) { return a * b; }
static float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static float __fdiv_rn(float a, float b) { return a / b; }
static float __fsqrt_rn(float a) { return sqrtf(a); }
static float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
template <class T> static T __ldg(const T *p) { return *p; }
template <class T> static T __ldcg(const T *p) { return *p; }
template <class T> static void __stcg(T *p, T v) { *p = v; }

/* common.cuh without PTX (bf16 16-bit type) */
#define IG_CUDA_COMMON_CUH 1
#include "launch.h"
typedef unsigned short ig_bf16;
#define IG_DEV static inline
#define IG_CAT_(a, b) a##b
#define IG_CAT(a, b) IG_CAT_(a, b)
#define IG_NEG_INF (-INFINITY)
#define IG_FULL_MASK 0xffffffffu
#ifndef IG_F16
#define IG_F16 0
#endif
IG_DEV float ig_bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
IG_DEV unsigned short ig_f32_to_bf16(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
IG_DEV float ig_f16_to_f32(unsigned short h) { return cpukv::ig_f16_to_f32(h); }
IG_DEV unsigned short ig_f32_to_f16(float f) { return cpukv::ig_f32_to_f16(f); }
IG_DEV float ig_h_to_f32(unsigned short h) { return IG_F16 ? ig_f16_to_f32(h) : ig_bf16_to_f32(h); }
IG_DEV unsigned short ig_f32_to_h(float f) { return IG_F16 ? ig_f32_to_f16(f) : ig_f32_to_bf16(f); }
IG_DEV float ig_round_h(float v) { return ig_h_to_f32(ig_f32_to_h(v)); }
IG_DEV unsigned ig_pack2_h(float a, float b) { return (unsigned)ig_f32_to_h(a) | ((unsigned)ig_f32_to_h(b) << 16); }
IG_DEV unsigned ig_pack2_bf16(float a, float b) { return (unsigned)ig_f32_to_bf16(a) | ((unsigned)ig_f32_to_bf16(b) << 16); }
IG_DEV void ig_unpack8_bf16(uint4 v, float *o) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < 4; i++) o[2 * i] = __uint_as_float(w[i] << 16), o[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
}
IG_DEV void ig_unpack8_h(uint4 v, float *o) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < 4; i++) o[2 * i] = ig_h_to_f32((unsigned short)(w[i] & 0xffffu)), o[2 * i + 1] = ig_h_to_f32((unsigned short)(w[i] >> 16));
}
IG_DEV void ig_unpack16(uint4 v, int es, float *o) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < 4; i++) {
        if (es == 2) o[2 * i] = __uint_as_float(w[i] << 16), o[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        else o[i] = __uint_as_float(w[i]);
    }
}
IG_DEV void ig_unpack4_f32(uint4 v, float *o) {
    o[0] = __uint_as_float(v.x), o[1] = __uint_as_float(v.y), o[2] = __uint_as_float(v.z), o[3] = __uint_as_float(v.w);
}
IG_DEV uint4 ig_ldg16(const void *p) { return *(const uint4 *)p; }
/* common.cuh's release / acquire hand-off between CTAs, as host atomics of the same order (one CTA
 * runs at a time: any order would do) */
IG_DEV unsigned ig_atom_add_acq_rel_gpu(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
IG_DEV unsigned long long ig_atom_add_acq_rel_gpu(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}
IG_DEV void ig_red_add_release_gpu(unsigned *p, unsigned v) { __atomic_fetch_add(p, v, __ATOMIC_RELEASE); }
IG_DEV unsigned ig_ld_acquire_gpu(const unsigned *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
IG_DEV float ig_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(IG_FULL_MASK, v, o);
    return v;
}
IG_DEV float ig_block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ig_warp_sum(v);
    if (lane == 0) red[wid] = v;
    __syncthreads();
    float s = lane < nw ? red[lane] : 0.0f;
    s = ig_warp_sum(s);
    __syncthreads();
    return s;
}
IG_DEV float ig_sm_factor(float m, float M) { return m == IG_NEG_INF ? 0.0f : ig_exp2(m - M); }
IG_DEV float ig_glu(float g, float u, bool gelu) {
    if (!gelu) return g / (1.0f + expf(-g)) * u;
    const float z = 0.7978845608028654f * (g + 0.044715f * g * g * g);
    const float th = z > 20.0f ? 1.0f : z < -20.0f ? -1.0f : 1.0f - 2.0f / (expf(2.0f * z) + 1.0f);
    return 0.5f * g * (1.0f + th) * u;
}
/* greedy keys (common.cuh's, as they are: plain C) */
#define IG_AMAX_BAD 0xff800000u
IG_DEV unsigned long long ig_amax_key(float v, int i) {
    unsigned u = __float_as_uint(v);
    if (u == 0x80000000u) u = 0u;
    const unsigned k = v != v ? 0xffffffffu : (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)k << 32) | (0xffffffffu - (unsigned)i);
}
IG_DEV float ig_amax_value(unsigned long long key) {
    const unsigned k = (unsigned)(key >> 32);
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
IG_DEV int ig_amax_index(unsigned long long key) { return (int)(0xffffffffu - (unsigned)key); }

/* dynamic shared memory of the emulated CTA */
static float ig_emul_dyn[64 * 1024];
#define IG_DYN_SMEM(T, name) T *name = (T *)ig_emul_dyn

/* mma.cuh on the host: shared addresses are offsets into the dynamic shared memory (the only shared
 * memory these paths address), copies happen at once (commit / wait have nothing to wait for), and
 * ldmatrix / mma.sync exchange their operands through per-lane slots between two warp barriers. */
IG_DEV unsigned ig_smem_addr(const void *p) { return (unsigned)((const char *)p - (const char *)ig_emul_dyn); }
IG_DEV void ig_cp_n(unsigned dst, const void *src, int n, int src_bytes) {
    char *d = (char *)ig_emul_dyn + dst;
    memset(d, 0, (size_t)n);
    if (src_bytes) memcpy(d, src, (size_t)src_bytes);
}
IG_DEV void ig_cp16(unsigned dst, const void *src, int src_bytes) { ig_cp_n(dst, src, 16, src_bytes); }
IG_DEV void ig_cp8(unsigned dst, const void *src, int src_bytes) { ig_cp_n(dst, src, 8, src_bytes); }
IG_DEV void ig_cp4(unsigned dst, const void *src, int src_bytes) { ig_cp_n(dst, src, 4, src_bytes); }
IG_DEV void ig_cp_commit() {}
template <int N>
IG_DEV void ig_cp_wait() {}
static unsigned g_lsm[32][32];
static unsigned g_mma[32][32][6];
/* ldmatrix.x4 (b16): lane L gives the row address of row L % 8 of matrix L / 8; lane (g, q) gets, of
 * each matrix i, the 32-bit word q of its row g */
IG_DEV void ig_ldsm4(unsigned a, unsigned *r) {
    unsigned *s = g_lsm[threadIdx.x >> 5];
    const unsigned l = threadIdx.x & 31;
    s[l] = a;
    __syncwarp();
    for (int i = 0; i < 4; i++) memcpy(&r[i], (const char *)ig_emul_dyn + s[8 * i + (l >> 2)] + 4 * (l & 3), 4);
    __syncwarp();
}
/* ldmatrix.x4.trans (b16): the same addresses, each 8 x 8 matrix transposed: lane (g, q) gets, of
 * each matrix i, the elements (2q, g) and (2q + 1, g), the first in the low half */
IG_DEV void ig_ldsm4t(unsigned a, unsigned *r) {
    unsigned *s = g_lsm[threadIdx.x >> 5];
    const unsigned l = threadIdx.x & 31;
    s[l] = a;
    __syncwarp();
    for (int i = 0; i < 4; i++) {
        unsigned short lo, hi;
        memcpy(&lo, (const char *)ig_emul_dyn + s[8 * i + 2 * (l & 3)] + 2 * (l >> 2), 2);
        memcpy(&hi, (const char *)ig_emul_dyn + s[8 * i + 2 * (l & 3) + 1] + 2 * (l >> 2), 2);
        r[i] = (unsigned)lo | (unsigned)hi << 16;
    }
    __syncwarp();
}
/* mma.sync m16n8k32 row.col, s8 A, s8 or u8 B (bs), s32 accumulate: A row r, k: lane (r % 8) 4 +
 * (k % 16) / 4, register (r >= 8) + 2 (k >= 16), byte k % 4; B k, column n: lane 4 n + (k % 16) / 4,
 * register k >= 16; C as m16n8k16's */
IG_DEV void ig_imma32(int *c, const unsigned *a, unsigned b0, unsigned b1, bool bs) {
    unsigned(*s)[6] = g_mma[threadIdx.x >> 5];
    const unsigned l = threadIdx.x & 31;
    for (int i = 0; i < 4; i++) s[l][i] = a[i];
    s[l][4] = b0, s[l][5] = b1;
    __syncwarp();
    for (int e = 0; e < 4; e++) {
        const int row = (int)(l >> 2) + 8 * (e >> 1), col = 2 * (int)(l & 3) + (e & 1);
        long long acc = 0;
        for (int k = 0; k < 32; k++) {
            const unsigned aw = s[(row % 8) * 4 + (k % 16) / 4][(row >= 8) + 2 * (k >= 16)];
            const unsigned bw = s[4 * col + (k % 16) / 4][4 + (k >= 16)];
            const int av = (signed char)(aw >> (8 * (k % 4))), bv = bs ? (int)(signed char)(bw >> (8 * (k % 4))) : (int)((bw >> (8 * (k % 4))) & 255u);
            acc += (long long)av * bv;
        }
        c[e] += (int)acc;
    }
    __syncwarp();
}
/* mma.sync m16n8k16 row.col, f32 accumulate: A row r, k: lane (r % 8) 4 + (k % 8) / 2, register
 * (r >= 8) + 2 (k >= 8), half k % 2; B k, column n: lane 4 n + (k % 8) / 2, register k >= 8; C row
 * g / g + 8, columns 2q, 2q + 1 */
static void emul_mma16(float *c, const unsigned *a, unsigned b0, unsigned b1, bool f16) {
    unsigned(*s)[6] = g_mma[threadIdx.x >> 5];
    const unsigned l = threadIdx.x & 31;
    for (int i = 0; i < 4; i++) s[l][i] = a[i];
    s[l][4] = b0, s[l][5] = b1;
    __syncwarp();
    auto half = [f16](unsigned v, int h) {
        const unsigned short x = (unsigned short)(h ? v >> 16 : v & 0xffffu);
        return f16 ? ig_f16_to_f32(x) : ig_h_to_f32(x);
    };
    for (int e = 0; e < 4; e++) {
        const int row = (int)(l >> 2) + 8 * (e >> 1), col = 2 * (int)(l & 3) + (e & 1);
        double acc = 0.0;
        for (int k = 0; k < 16; k++) {
            const float av = half(s[(row % 8) * 4 + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)], k % 2);
            const float bv = half(s[4 * col + (k % 8) / 2][4 + (k >= 8)], k % 2);
            acc += (double)av * bv;
        }
        c[e] += (float)acc;
    }
    __syncwarp();
}
IG_DEV void ig_mma16(float *c, const unsigned *a, unsigned b0, unsigned b1) { emul_mma16(c, a, b0, b1, false); }
IG_DEV void ig_mma16f(float *c, const unsigned *a, unsigned b0, unsigned b1) { emul_mma16(c, a, b0, b1, true); }
/* wgmma.cuh on the host: each thread of the warpgroup sums its own accumulators from the two tiles,
 * read through the descriptors (start address, 1024-byte row-group stride, the 128-byte swizzle on
 * the address bits), so the kernel's tile layout and the register layout wgmma.cuh states are
 * checked against each other. The products are asynchronous as on the GPU: an issued product is
 * queued (its thread's), commit closes a group, and wait<N> runs the queued groups but the last N,
 * in order, reading the tiles and A registers then, so a kernel that gives a stage back or
 * rewrites an operand's registers before its wait gets other products. Accumulators are written
 * then too: a kernel that touches them between issue and wait aborts (their contents as the pending
 * products left them are kept and compared), as does one that leaves products unwaited at its end. */
IG_DEV void ig_wg_fence() {}
IG_DEV void ig_fence_async() {}
struct emul_wg_op {
    int kind, n, tb;          /* 0 ss (f32), 1 rs (f32, A from registers), 2 s8 (int32); N; rs's B MN-major */
    void *d;                  /* the accumulators (n / 2 floats, or 128 ints) */
    const unsigned *ar;       /* rs: the A registers, read when the product runs ... */
    unsigned ar_copy[4];      /* ... which must still hold what they held at issue */
    unsigned long long a, b;  /* descriptors */
    int group;                /* the commit group it belongs to */
    std::vector<unsigned char> d_copy; /* the accumulators as the products before it on d leave them */
};
static std::vector<emul_wg_op> g_wg_q[1024];
static int g_wg_open[1024]; /* a thread's groups committed so far */
static size_t emul_wg_dbytes(const emul_wg_op &o) { return o.kind == 2 ? 128 * 4 : (size_t)o.n / 2 * 4; }
static void emul_wg_issue(emul_wg_op o) {
    std::vector<emul_wg_op> &q = g_wg_q[threadIdx.x];
    o.group = g_wg_open[threadIdx.x];
    const size_t nb = emul_wg_dbytes(o);
    const emul_wg_op *prev = nullptr;
    for (const emul_wg_op &p : q)
        if (p.d == o.d) prev = &p;
    if (prev && memcmp(prev->d_copy.data(), o.d, nb)) {
        fprintf(stderr, "wgmma emulation: thread %u wrote accumulators of a product still pending\n", threadIdx.x);
        abort();
    }
    o.d_copy.assign((const unsigned char *)o.d, (const unsigned char *)o.d + nb);
    q.push_back(std::move(o));
}
IG_DEV void ig_wg_commit() { g_wg_open[threadIdx.x]++; }
static void emul_wg_run(const emul_wg_op &o);
template <int N>
IG_DEV void ig_wg_wait() {
    const unsigned t = threadIdx.x;
    std::vector<emul_wg_op> &q = g_wg_q[t];
    const int upto = g_wg_open[t] - N; /* groups below this one run now */
    size_t i = 0;
    for (; i < q.size() && q[i].group < upto; i++) {
        if (memcmp(q[i].d_copy.data(), q[i].d, emul_wg_dbytes(q[i]))) { /* as the products before it left them */
            fprintf(stderr, "wgmma emulation: thread %u wrote accumulators of a product before waiting for it\n", t);
            abort();
        }
        if (q[i].kind == 1 && memcmp(q[i].ar_copy, q[i].ar, sizeof q[i].ar_copy)) {
            fprintf(stderr, "wgmma emulation: thread %u rewrote a product's A registers before waiting for it\n", t);
            abort();
        }
        emul_wg_run(q[i]);
        for (size_t j = i + 1; j < q.size(); j++) /* a later product on them chains onto this one's sums */
            if (q[j].d == q[i].d) q[j].d_copy.assign((const unsigned char *)q[i].d, (const unsigned char *)q[i].d + emul_wg_dbytes(q[i]));
    }
    q.erase(q.begin(), q.begin() + (long)i);
}
/* a thread's end: no product left unwaited (its registers are gone) */
static void emul_wg_exit() {
    if (!g_wg_q[threadIdx.x].empty()) {
        fprintf(stderr, "wgmma emulation: thread %u ended with %zu products never waited for\n", threadIdx.x, g_wg_q[threadIdx.x].size());
        abort();
    }
    g_wg_open[threadIdx.x] = 0;
}
template <int N>
IG_DEV void ig_wg_hold(float *) {}
/* the shared-memory offset of element (n, k) of a B operand (or (m, k) of A), of esz bytes, by its
 * descriptor: K-major (mn 0: rows of K) or MN-major (mn 1, 16-bit: rows of 64 N elements a K index,
 * blocks of 64 columns the leading-dimension field apart); emul_wg_elem reads a 16-bit one */
static unsigned emul_wg_addr(unsigned long long desc, int row, int k, int esz, int mn = 0) {
    if ((desc >> 62) != 1 || ((desc >> 32) & 0x3fff) != 1024 >> 4) {
        fprintf(stderr, "wgmma emulation: only 128-byte swizzled tiles with 1024-byte row groups\n");
        abort();
    }
    unsigned a = (unsigned)(desc & 0x3fff) << 4;
    if (mn)
        a += (unsigned)(row / 64) * ((unsigned)((desc >> 16) & 0x3fff) << 4) + (unsigned)(k / 8) * 1024u + (unsigned)(k % 8) * 128u +
             2u * (unsigned)(row % 64);
    else
        a += (unsigned)(row / 8) * 1024u + (unsigned)(row % 8) * 128u + (unsigned)(esz * k);
    return a ^ ((a >> 7) & 7u) << 4;
}
static float emul_wg_elem(unsigned long long desc, int row, int k, int mn = 0) {
    unsigned short v;
    memcpy(&v, (const char *)ig_emul_dyn + emul_wg_addr(desc, row, k, 2, mn), 2);
    return ig_h_to_f32(v);
}
/* the int8 form: element (row, k) of an s8 K-major tile */
static int emul_wg_s8(unsigned long long desc, int row, int k) {
    return (int)((const signed char *)ig_emul_dyn)[emul_wg_addr(desc, row, k, 1)];
}
static void emul_wg_do_s8(int *d, unsigned long long a, unsigned long long b) {
    const int t = (int)(threadIdx.x & 127), w = t >> 5, l = t & 31;
    for (int i = 0; i < 128; i++) {
        const int row = 16 * w + l / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (l % 4) + (i & 1);
        int acc = 0;
        for (int k = 0; k < 32; k++) acc += emul_wg_s8(a, row, k) * emul_wg_s8(b, col, k);
        d[i] += acc;
    }
}
template <int N>
IG_DEV void ig_wg_hold_i(int *) {}
static void emul_wg_do_ss(int N, float *d, unsigned long long a, unsigned long long b) {
    const int t = (int)(threadIdx.x & 127), w = t >> 5, l = t & 31;
    for (int i = 0; i < N / 2; i++) {
        const int row = 16 * w + l / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (l % 4) + (i & 1);
        double acc = 0.0;
        for (int k = 0; k < 16; k++) acc += (double)emul_wg_elem(a, row, k) * emul_wg_elem(b, col, k);
        d[i] += (float)acc;
    }
}
/* A from registers: the warp's words through per-lane slots (mma.sync's A layout), B by descriptor */
static unsigned g_wga[32][32][4];
static void emul_wg_do_rs(int N, int TB, float *d, const unsigned *a, unsigned long long b) {
    unsigned(*s)[4] = g_wga[threadIdx.x >> 5];
    const int l = (int)(threadIdx.x & 31);
    for (int i = 0; i < 4; i++) s[l][i] = a[i];
    __syncwarp();
    for (int i = 0; i < N / 2; i++) {
        const int r = l / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (l % 4) + (i & 1);
        double acc = 0.0;
        for (int k = 0; k < 16; k++) {
            const unsigned wd = s[(r % 8) * 4 + (k % 8) / 2][(r >= 8) + 2 * (k >= 8)];
            const float av = ig_h_to_f32((unsigned short)(k % 2 ? wd >> 16 : wd & 0xffffu));
            acc += (double)av * emul_wg_elem(b, col, k, TB);
        }
        d[i] += (float)acc;
    }
    __syncwarp();
}
/* the products as the kernels issue them: queued, run by ig_wg_wait */
IG_DEV void ig_wg_mma_s8(int *d, unsigned long long a, unsigned long long b) {
    emul_wg_op o{};
    o.kind = 2, o.n = 256, o.d = d, o.a = a, o.b = b;
    emul_wg_issue(std::move(o));
}
template <int N>
IG_DEV void ig_wg_mma_ss(float *d, unsigned long long a, unsigned long long b) {
    emul_wg_op o{};
    o.kind = 0, o.n = N, o.d = d, o.a = a, o.b = b;
    emul_wg_issue(std::move(o));
}
template <int N, int TB>
IG_DEV void ig_wg_mma_rs(float *d, const unsigned *a, unsigned long long b) {
    emul_wg_op o{};
    o.kind = 1, o.n = N, o.tb = TB, o.d = d, o.ar = a, o.b = b;
    memcpy(o.ar_copy, a, sizeof o.ar_copy);
    emul_wg_issue(std::move(o));
}
static void emul_wg_run(const emul_wg_op &o) {
    if (o.kind == 0) emul_wg_do_ss(o.n, (float *)o.d, o.a, o.b);
    else if (o.kind == 1) emul_wg_do_rs(o.n, o.tb, (float *)o.d, o.ar, o.b);
    else emul_wg_do_s8((int *)o.d, o.a, o.b);
}
/* mbar.cuh on the host: an mbarrier is a 64-bit word (arrivals left in bits 0..31, the arrival
 * count in bits 32..62, the completed-phase parity in bit 63); a waiter yields its fiber until the
 * phase it waits for has completed; copies land at once, so the arrival that ig_mb_expect makes
 * for them completes the phase (the copies follow it with no yield in between, so no waiter runs
 * before they have landed). */
IG_DEV void ig_mb_init(unsigned long long *b, unsigned n) { *b = (unsigned long long)n << 32 | n; }
IG_DEV void ig_mb_arrive(unsigned long long *b) {
    const unsigned long long v = *b, n = (v >> 32) & 0x7fffffffull;
    const unsigned left = (unsigned)v - 1u;
    *b = left ? (v & ~0xffffffffull) | left : ((v & (1ull << 63)) ^ (1ull << 63)) | n << 32 | n;
}
/* returns once the phase of this parity has completed (the current parity differs) */
IG_DEV void ig_mb_wait(unsigned long long *b, unsigned parity) {
    while ((unsigned)(*(volatile unsigned long long *)b >> 63) == parity) emul_yield();
}
IG_DEV void ig_mb_expect(unsigned long long *bar, unsigned) { ig_mb_arrive(bar); }
IG_DEV void ig_mb_fence_init() {}
#define ig_bar_named(id, n) emul_bar_named((n), (id))
template <int N>
IG_DEV void ig_setmaxnreg_dec() {}
template <int N>
IG_DEV void ig_setmaxnreg_inc() {}
/* A 2-D tensor map of esz-byte elements (2, or 1: int8 codes): cols x rows, row_bytes apart, boxes of
 * box_cols x box_rows in the 128-byte swizzle (the only kind the kernels encode); emul_tmap2 fills one. */
struct ig_tmap {
    const unsigned char *base;
    unsigned long long cols, rows, row_bytes;
    unsigned box_cols, box_rows, esz;
};
static ig_tmap emul_tmap2(const void *base, unsigned long long cols, unsigned long long rows, unsigned long long row_bytes,
                          unsigned box_cols, unsigned box_rows, unsigned esz = 2) {
    return ig_tmap{(const unsigned char *)base, cols, rows, row_bytes, box_cols, box_rows, esz};
}
/* the box at (x, y) into shared address dst: row r's 16-byte chunk c at chunk c ^ (address bits 7..9)
 * of its 128-byte line, as the hardware swizzles; elements past the tensor's edges are zeros */
IG_DEV void ig_tma_load2(unsigned dst, const ig_tmap *m, int x, int y, unsigned long long *) {
    for (unsigned r = 0; r < m->box_rows; r++) {
        unsigned char line[128] = {0};
        const long long gy = (long long)y + r;
        for (unsigned e = 0; e < m->box_cols && e * m->esz < 128; e++) {
            const long long gx = (long long)x + e;
            if (gy >= 0 && gy < (long long)m->rows && gx >= 0 && gx < (long long)m->cols)
                memcpy(line + m->esz * e, m->base + (unsigned long long)gy * m->row_bytes + m->esz * (unsigned long long)gx, m->esz);
        }
        const unsigned at = dst + 128 * r;
        for (unsigned c = 0; c < 8; c++)
            memcpy((char *)ig_emul_dyn + (at & ~127u) + ((c ^ ((at >> 7) & 7u)) << 4), line + 16 * c, 16);
    }
}

/* f16x2 a - b (each half rounded to nearest, as sub.f16x2) */
IG_DEV unsigned ig_hsub2(unsigned a, unsigned b) {
    const float lo = ig_f16_to_f32((unsigned short)(a & 0xffffu)) - ig_f16_to_f32((unsigned short)(b & 0xffffu));
    const float hi = ig_f16_to_f32((unsigned short)(a >> 16)) - ig_f16_to_f32((unsigned short)(b >> 16));
    return (unsigned)ig_f32_to_f16(lo) | (unsigned)ig_f32_to_f16(hi) << 16;
}

/* Runs kernel body f on grid g with block b, one CTA at a time (f reads threadIdx / blockIdx):
 * fibers run in turn until each waits at a barrier or ends; a warp's barrier opens when all its
 * live lanes wait there, the CTA's when all live threads do. Returns false on a deadlock. */
static const std::function<void()> *g_body;
static void emul_entry() {
    (*g_body)();
    emul_wg_exit();
    g_fib[g_cur].wait = 3;
    swapcontext(&g_fib[g_cur].ctx, &g_sched);
}
static bool emul_launch(dim3e g, dim3e b, const std::function<void()> &f) {
    gridDim = g, blockDim = b;
    const unsigned n = b.x, nw = (n + 31) / 32;
    g_body = &f;
    g_fib.assign(n, emul_fiber{});
    g_stacks.resize(n);
    for (auto &st : g_stacks) st.resize(256 * 1024);
    for (unsigned z = 0; z < g.z; z++)
        for (unsigned y = 0; y < g.y; y++)
            for (unsigned x = 0; x < g.x; x++) {
                blockIdx = {x, y, z};
                for (unsigned i = 0; i < n; i++) {
                    getcontext(&g_fib[i].ctx);
                    g_fib[i].ctx.uc_stack.ss_sp = g_stacks[i].data();
                    g_fib[i].ctx.uc_stack.ss_size = g_stacks[i].size();
                    g_fib[i].ctx.uc_link = nullptr;
                    makecontext(&g_fib[i].ctx, emul_entry, 0);
                    g_fib[i].wait = 0;
                }
                unsigned long long spins = 0; /* rounds in which only yielding fibers ran */
                for (;;) {
                    bool ran = false;
                    for (unsigned i = 0; i < n; i++)
                        if (g_fib[i].wait == 0) {
                            g_cur = i, threadIdx = {i, 0, 0};
                            swapcontext(&g_sched, &g_fib[i].ctx);
                            ran = true;
                        }
                    if (ran) continue;
                    unsigned live = 0, at_cta = 0, at_named = 0, yielding = 0;
                    bool opened = false;
                    for (unsigned w = 0; w < nw; w++) {
                        unsigned wl = 0, ww = 0;
                        for (unsigned i = 32 * w; i < 32 * w + 32 && i < n; i++)
                            wl += g_fib[i].wait != 3, ww += g_fib[i].wait == 2, at_cta += g_fib[i].wait == 1,
                            at_named += g_fib[i].wait == 5, yielding += g_fib[i].wait == 4;
                        live += wl;
                        if (ww && ww == wl) {
                            for (unsigned i = 32 * w; i < 32 * w + 32 && i < n; i++) g_fib[i].wait = 0;
                            opened = true;
                        }
                    }
                    if (opened) continue;
                    if (!live) break;
                    if (at_cta == live) {
                        for (unsigned i = 0; i < n; i++)
                            if (g_fib[i].wait == 1) g_fib[i].wait = 0;
                        continue;
                    }
                    if (at_named) {
                        unsigned at_id[16] = {0};
                        for (unsigned i = 0; i < n; i++)
                            if (g_fib[i].wait == 5) at_id[g_fib[i].bar]++;
                        for (unsigned id = 0; id < 16; id++)
                            if (at_id[id] && at_id[id] == g_named_count[id]) {
                                for (unsigned i = 0; i < n; i++)
                                    if (g_fib[i].wait == 5 && g_fib[i].bar == id) g_fib[i].wait = 0;
                                opened = true;
                            }
                        if (opened) {
                            spins = 0;
                            continue;
                        }
                    }
                    if (yielding && ++spins < 100000000ull) {
                        for (unsigned i = 0; i < n; i++)
                            if (g_fib[i].wait == 4) g_fib[i].wait = 0;
                        continue;
                    }
                    fprintf(stderr, "emul_launch: deadlock in CTA (%u, %u, %u)\n", x, y, z);
                    return false;
                }
            }
    return true;
}

#endif
