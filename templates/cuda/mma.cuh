/* mma.cuh — the sm_80+ tensor-core building blocks shared by the tiled kernels (attention_prefill.cu's
 * prefill attention, moe.cu's expert-grouped products, qgemm.cu): a shared-memory address for PTX, 16-byte
 * cp.async copies global -> shared (16 bytes bypassing L1, or 4 / 8; src_bytes 0 writes zeros and reads nothing) with
 * their commit / wait, ldmatrix x4 (plain and transposed), and mma.sync m16n8k16 on the package's
 * 16-bit type (bf16, or half when IG_F16) with f32 accumulate: c += a (16x16, row) . b (16x8, col),
 * or on halves (ig_mma16f), with ig_hsub2 (f16x2 subtraction) for codes turned into halves.
 * Device code for sm_80 and newer (and declared in nvcc's host pass, where templates that use it are
 * parsed); elsewhere, and in the host emulation, the file is empty (tests/cuda_host/cuda_emul.h states
 * the same functions for the host emulation). */
#ifndef IG_CUDA_MMA_CUH
#define IG_CUDA_MMA_CUH

#include "common.cuh"

#if defined(__CUDACC__) && !defined(IG_CUDA_EMUL) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
IG_DEV unsigned ig_smem_addr(const void *p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
IG_DEV void ig_cp16(unsigned dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
/* 4- and 8-byte copies (through L1: .cg takes 16 bytes only), e.g. a row's scale words */
IG_DEV void ig_cp4(unsigned dst, const void *src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
IG_DEV void ig_cp8(unsigned dst, const void *src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
IG_DEV void ig_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
IG_DEV void ig_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
IG_DEV void ig_ldsm4(unsigned a, unsigned *r) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
IG_DEV void ig_ldsm4t(unsigned a, unsigned *r) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
/* c += a . b on IEEE halves whatever the package's type (quantized KV codes: exact in f16). */
IG_DEV void ig_mma16f(float *c, const unsigned *a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* c += a . b on the package's 16-bit type */
IG_DEV void ig_mma16(float *c, const unsigned *a, unsigned b0, unsigned b1) {
#if IG_F16
    ig_mma16f(c, a, b0, b1);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
/* a - b on two IEEE halves at once */
IG_DEV unsigned ig_hsub2(unsigned a, unsigned b) {
    unsigned r;
    asm("sub.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
#endif

#endif /* IG_CUDA_MMA_CUH */
