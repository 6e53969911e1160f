/* wgmma.cuh — Hopper's warpgroup tensor-core product (wgmma.mma_async, sm_90a) for the tiled kernels
 * that outgrow mma.sync (moe.cu's expert-grouped products, attention_prefill.cu's _flash_wg): operands in
 * shared memory, K-major
 * (a row's K elements contiguous), in the 128-byte swizzled layout, f32 accumulators in registers.
 *
 * The layout (what ig_wg_desc tells the hardware): a tile of R rows x 64 16-bit elements is R rows of
 * 128 bytes, from an address aligned to 1024; the 16-byte chunk c of row r is stored at chunk
 * c ^ (r % 8) of its row (the swizzle works on address bits, 4..6 ^= 7..9, which is why the tile is
 * aligned to 1024). ig_wg_chunk gives that offset; cp.async writes each chunk there. A product of
 * K 16 reads columns 16 j .. 16 j + 15 of such a tile: its descriptor starts 32 j bytes into the
 * tile (the hardware swizzles the address it computes), rows 8 apart 1024 bytes apart.
 *
 * A tile whose rows run along N instead (MN-major: row k of a 64-column block holds 64 consecutive N
 * elements of K index k, e.g. V's [key][D] as the B operand of P . V) is the same 128-byte swizzled
 * storage; its descriptor (ig_wg_desc_mn) gives the stride between 64-column blocks along N (the
 * leading-dimension field) and 1024 between groups of 8 K rows (the stride field), and the product
 * is told to transpose B.
 *
 * ig_wg_mma_ss<N>(d, a, b): d[64][N] += A[64][16] . B[N][16]^T (N 64, 128 or 256), A and B by descriptor, on the
 * package's 16-bit type (bf16, or half when IG_F16); the 128 threads of a warpgroup each hold N / 2 of d's floats:
 * thread t (warp w = t / 32, lane l) holds d[i] at row 16 w + l / 4 + 8 ((i / 2) % 2), column
 * 8 (i / 4) + 2 (l % 4) + i % 2 (mma.sync m16n8's accumulator layout, once per 8 columns).
 * ig_wg_mma_s8(d, a, b): the int8 form (m64n256k32, s32 accumulators in the same layout; act8.cu's GEMM).
 * ig_wg_mma_rs<N, TB>(d, a, b): d[64][N] += A[64][16] . B (N 64 or 128, N / 2 floats a thread), A from
 * registers: warp w's four words a[] are rows 16 w .. 16 w + 15 in mma.sync m16n8k16's A layout; B
 * by descriptor, K-major (TB 0: B[N][16]^T) or MN-major (TB 1: B[16][N]). Give it values computed
 * afresh in the same loop iteration (P of attention), not loop-invariant registers: ptxas 13.0 gave
 * the registers of a loop-invariant A (attention's Q fragments at D 64) to other values inside the
 * loop, so every product after the first read garbage (seen in the SASS; the host emulation cannot
 * see it). A tile used across iterations goes to shared memory and ig_wg_mma_ss.
 * The products are asynchronous: ig_wg_fence before the first (after the registers were written),
 * ig_wg_commit after the last, ig_wg_wait<N> until at most N committed groups are pending (the
 * registers and the tiles they read are the kernel's again only then), and ig_wg_hold<N>(d) after
 * that wait: the compiler sees the product's asm write d at once, so without it an instruction
 * reading d (a rescale, the softmax, an epilogue) may be scheduled before the wait. Shared memory written by
 * cp.async (the generic proxy) is made visible to the products (the async proxy) by each writer's
 * ig_fence_async after its copies landed and before the barrier that publishes them.
 *
 * IG_WG is 1 where the products compile (sm_90a: __CUDA_ARCH_FEAT_SM90_ALL; the host emulation),
 * 0 elsewhere; the image says which in the global ig_wg_built, which host_runtime.c reads at load
 * (a package's sm_90 cubin is built for sm_90a; its PTX of compute_90 and older cubins have none).
 * tests/cuda_host/cuda_emul.h states the same functions for the host emulation: each thread sums its
 * own d elements from the tiles, read through the descriptors and the swizzle. */
#ifndef IG_CUDA_WGMMA_CUH
#define IG_CUDA_WGMMA_CUH

#include "mma.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(IG_CUDA_EMUL)
#define IG_WG 1
#else
#define IG_WG 0
#endif
#ifndef IG_CUDA_EMUL
__device__ int ig_wg_built = IG_WG; /* a namespace-scope variable: its symbol is its name */
#endif

/* byte offset of 16-byte chunk c (0..7) of row r in a 128-byte swizzled tile */
IG_DEV unsigned ig_wg_chunk(int r, int c) { return (unsigned)(r * 128 + ((c ^ (r & 7)) << 4)); }

/* the descriptor of the tile at shared address saddr: 128-byte swizzle, 8-row groups 1024 bytes
 * apart (the stride field), the leading-dimension field unused by K-major swizzled tiles (1) */
IG_DEV unsigned long long ig_wg_desc(unsigned saddr) {
    return (unsigned long long)((saddr & 0x3ffffu) >> 4) | 1ull << 16 | (unsigned long long)(1024 >> 4) << 32 | 1ull << 62;
}

/* the descriptor of an MN-major tile: 64-column blocks lbo bytes apart, 8-row groups 1024 apart */
IG_DEV unsigned long long ig_wg_desc_mn(unsigned saddr, unsigned lbo) {
    return (unsigned long long)((saddr & 0x3ffffu) >> 4) | (unsigned long long)((lbo >> 4) & 0x3fffu) << 16 |
           (unsigned long long)(1024 >> 4) << 32 | 1ull << 62;
}

#if IG_WG && !defined(IG_CUDA_EMUL)
IG_DEV void ig_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
IG_DEV void ig_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
IG_DEV void ig_wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
IG_DEV void ig_fence_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
template <int N>
IG_DEV void ig_wg_hold(float *d) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* the operand list of 128 accumulator registers (m64n256: both element types) */
#define IG_WG_R128                                                                                                     \
    "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,"  \
    "%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57," \
    "%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85," \
    "%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,"  \
    "%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
#define IG_WG_D8(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), "+f"(d[b + 6]), "+f"(d[b + 7])
#define IG_WG_D32(b) IG_WG_D8(b), IG_WG_D8(b + 8), IG_WG_D8(b + 16), IG_WG_D8(b + 24)
#if IG_F16
#define IG_WG_TYPES ".f32.f16.f16"
#else
#define IG_WG_TYPES ".f32.bf16.bf16"
#endif
/* both operands by descriptor, K-major: N 64 (32 floats a thread) or 256 (128) */
template <int N>
IG_DEV void ig_wg_mma_ss(float *d, unsigned long long a, unsigned long long b) {
    static_assert(N == 64 || N == 128 || N == 256, "m64n64k16, m64n128k16 or m64n256k16");
    if constexpr (N == 64) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16" IG_WG_TYPES " {"
                     "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                     "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
                     "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : IG_WG_D32(0)
                     : "l"(a), "l"(b), "r"(1));
    } else if constexpr (N == 128) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16" IG_WG_TYPES " {"
                     "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                     "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                     "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                     "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
                     "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : IG_WG_D32(0), IG_WG_D32(32)
                     : "l"(a), "l"(b), "r"(1));
    } else {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16" IG_WG_TYPES " {"
                     IG_WG_R128
                     "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                     : IG_WG_D32(0), IG_WG_D32(32), IG_WG_D32(64), IG_WG_D32(96)
                     : "l"(a), "l"(b), "r"(1));
    }
}
/* A from registers: N 64 (32 floats) or 128 (64 floats) */
template <int N, int TB>
IG_DEV void ig_wg_mma_rs(float *d, const unsigned *a, unsigned long long b) {
    static_assert(N == 64 || N == 128, "m64n64k16 or m64n128k16");
    if constexpr (N == 64) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16" IG_WG_TYPES " {"
                     "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                     "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
                     "}, {%32,%33,%34,%35}, %36, p, 1, 1, %37;\n}\n"
                     : IG_WG_D32(0)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(TB), "r"(1));
    } else {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %70, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16" IG_WG_TYPES " {"
                     "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                     "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                     "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                     "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
                     "}, {%64,%65,%66,%67}, %68, p, 1, 1, %69;\n}\n"
                     : IG_WG_D32(0), IG_WG_D32(32)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(TB), "r"(1));
    }
}
/* int8: d[64][256] (s32) += A[64][32] . B[256][32]^T, both operands s8 by descriptor, K-major (a
 * tile row of 128 bytes holds 128 codes, so a product of K 32 starts 32 bytes further, as the 16-bit
 * form's K 16); d's layout is ig_wg_mma_ss's, 128 ints a thread */
IG_DEV void ig_wg_mma_s8(int *d, unsigned long long a, unsigned long long b) {
#define IG_WG_I8(b) "+r"(d[b]), "+r"(d[b + 1]), "+r"(d[b + 2]), "+r"(d[b + 3]), "+r"(d[b + 4]), "+r"(d[b + 5]), "+r"(d[b + 6]), "+r"(d[b + 7])
#define IG_WG_I32(b) IG_WG_I8(b), IG_WG_I8(b + 8), IG_WG_I8(b + 16), IG_WG_I8(b + 24)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {"
                 IG_WG_R128
                 "}, %128, %129, p;\n}\n"
                 : IG_WG_I32(0), IG_WG_I32(32), IG_WG_I32(64), IG_WG_I32(96)
                 : "l"(a), "l"(b), "r"(1));
#undef IG_WG_I8
#undef IG_WG_I32
}
/* ig_wg_hold for int accumulators */
template <int N>
IG_DEV void ig_wg_hold_i(int *d) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+r"(d[i])::"memory");
}
#undef IG_WG_D8
#undef IG_WG_R128
#undef IG_WG_D32
#undef IG_WG_TYPES
#endif
#endif /* IG_CUDA_WGMMA_CUH */
