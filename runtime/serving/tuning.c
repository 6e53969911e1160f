/* tuning.c — the table of tuning keys and its parser (see tuning.h). Defaults come with the
 * measurement that chose them (H200, Llama-3.2-1B shape, bf16; templates/cuda/SPEC.md has the
 * full record, including the variants measured and dropped whose knobs were deleted: the late
 * norm scale of the weight stream and programmatic dependent launch). */
#include "tuning.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define C(f) TUNE_COMPILE, offsetof(cg_tuning, f)
#define R(f) TUNE_RUN, offsetof(ig_model_tuning, f)

const tune_key tune_keys[] = {
    {"st_group", C(st_group), 1, 4, 2, 1u << 0 | 1u << 1 | 1u << 3, "IG_ST_GROUP",
     "persistent kernel: consumer slots per group (1, 2, 4); 2 measured 0.736 against 0.745 ms/token for 1"},
    {"st_acc", C(st_acc), 1, 2, 2, 0, "IG_ST_ACC", "persistent kernel: accumulators per consumer slot (1, 2)"},
    {"st_inflight", C(st_inflight), 1, 12, 3, 0, "IG_ST_INFLIGHT", "persistent kernel: weight slots in flight per producer (1..12)"},
    {"st_l2hint", C(st_l2hint), 0, 1, 1, 0, "IG_ST_L2HINT",
     "persistent kernel: weight copies evict-first in L2 (0.720 against 0.730 ms/token at context 64-192)"},
    {"at_split_keys", C(at_split_keys), 1, 65536, 64, 0, NULL,
     "decode attention: a context split takes at least this many keys (1: always every split)"},
    {"dl_quant", C(dl_quant), -1, 1, 1, 0, NULL,
     "persistent kernel for quantized rows: 1 q8r and q4r, 0 neither, -1 q4r only (H200 1B, ms/token persistent / "
     "per-op: a16w8 0.611 / 0.867, a16w4 g32 0.598 / 0.946)"},
    {"qg_tmax", C(qg_tmax), 0, 4096, 128, 0, NULL,
     "matmuls on quantized rows (a16w8 / a16w4; a8w8 and fp8 below a8_tmin) of qg_tmin..n tokens on the quantized "
     "tensor-core GEMM (qgemm.cu), larger steps dequantize each matrix for cuBLAS (0: always); H100, 1B layer "
     "(qkv + o + gate/up + down), q4r g128, us qgemm / dequant + cuBLAS: 71 / 153 at 32 tokens, 124 / 163 at 128, "
     "212 / 175 at 256; engine a16w4 at 128 requests 4.1 -> 3.3 ms a step with 128 instead of 32"},
    {"qg_tmin", C(qg_tmin), 2, 9, 9, 0, NULL,
     "the quantized tensor-core GEMM from this many tokens (smaller steps: the GEMVs; 2..9)"},
    {"a8_tmin", C(a8_tmin), 9, 4096, 33, 0, NULL,
     "a8w8: the layers' matmuls of this many tokens and more quantize activations to int8 for cuBLAS's int8 GEMM "
     "(act8.cu), ahead of qgemm.cu; H100, 1B a8w8 at 128 requests: 2.8 ms a step with 33 against 3.3 with "
     "qgemm.cu up to 128 tokens"},
    {"dl_kvq", C(dl_kvq), 0, 1, 1, 0, NULL,
     "quantized-KV packages (int8 / uint4 / fp8) decode on the persistent kernel (1, the default; attn_decode.cuh's "
     "loop) or on the per-op kernels (0); 1B bf16 after an 8k prompt, H100, against bf16 KV: int8 / uint4 / fp8 "
     "1.011 / 0.997 / 1.015 (persistent), 1.152 / 1.174 / 1.161 (per-op)"},
    {"moe_dec", C(moe_dec), 0, 1, 1, 0, NULL,
     "CUDA MoE steps of up to 8 tokens: 1 two launches over all SMs (router, top-k and gate/up; down into the "
     "residual), 0 the per-op router, gate/up and down kernels"},
    {"ap_wg", C(ap_wg), 0, 1, 1, 0, NULL,
     "CUDA prefill attention on sm_90: 1 runs of 16-bit K/V with D 64 or 128 on warpgroup tensor cores (wgmma: the "
     "Q / K / V tiles from shared memory, P from registers), 0 on mma.sync (FlashAttention-2 with ldmatrix)"},
    {"ap_ws", C(ap_ws), 0, 1, 1, 0, NULL,
     "CUDA prefill attention on sm_90 (with ap_wg): 1 its warp-specialized form where it was measured faster (16-bit "
     "KV of head size 128, or 64 with 4 query heads a KV head) and the KV pool's tensor map is made: a producer "
     "warpgroup loads the K / V tiles by TMA into mbarrier stages and gives its registers to the heads' warpgroups, "
     "which never wait at a block barrier; 0 every warpgroup loads tiles with cp.async between block barriers"},
    {"ap_heads", C(ap_heads), 1, 4, 2, 1u << 0 | 1u << 1 | 1u << 3, NULL,
     "CUDA prefill attention: at most this many query heads of one KV head a CTA (1, 2 or 4 dividing the group, "
     "2 at most for D over 64; 16-bit KV), a warpgroup each, all reading one stream of K/V tiles; H100, 1B shape "
     "(H32 KV8 D64) on wgmma at 8192 tokens: 229.6 / 290.7 / 267.1 TFLOP/s with 1 / 2 / 4"},
    {"moe_wg", C(moe_wg), 0, 1, 1, 0, NULL,
     "CUDA MoE prefill on sm_90: 1 the expert-grouped products on warpgroup tensor cores (wgmma, 128 pairs x 256 rows "
     "a CTA), 0 on mma.sync (128 x 128)"},
    {"a8_wg", C(a8_wg), 0, 2, 2, 0, NULL,
     "CUDA a8w8 prefill matmuls on sm_90: 1 the int8 GEMM on warpgroup tensor cores with the scaling, bias, residual "
     "add or SwiGLU / GeGLU in its epilogue (act8.cu A8_WG_NAME: TMA, persistent) for steps of 128+ tokens with at "
     "least a8_wg_tiles tiles (1B 2048-token prefill: H100 236k -> 270k tokens/s, H200 252k -> 286k), 2 (default) the "
     "same in clusters of two CTAs sharing each weight box by TMA multicast (H100, 1B 2048-token prefill, three runs: "
     "268k with 1 -> 290-296k tokens/s, bf16 241-247k: 1.19x; clusters of four measured slower: 243k), 0 cuBLAS's int8 "
     "GEMM into int32 sums and act8.cu's dq kernel"},
    {"dl_moe", C(dl_moe), 0, 1, 1, 0, NULL,
     "CUDA MoE models (bf16 experts, expert and shared-expert sizes multiples of 128): 1 (default) one-token steps on "
     "the persistent decode kernel (stream_moe.cuh: the router, then only the selected experts' rows streamed; H100, 2 "
     "layers of Qwen3-30B-A3B: 0.164 ms/token, 72.7% of the roofline), 0 the per-op kernels (0.218, 54.7%)"},
    {"cpu_iact", C(cpu_iact), 0, 1, 1, 0, NULL,
     "CPU targets on x86-64 (AVX2 and up) with bf16 activations: 1 (default) packs a16w8 / a16w4 as q8i / q4i (a16w4's vocabulary "
     "q6i), whose matmuls quantize each activation row to int16 per 256 columns / int8 per 32 and sum in int32 (VNNI, or "
     "vpmaddwd / vpmaddubsw on AVX2); 0 keeps q8c / q4k / q6k and their f32 kernels (templates/cpu/quant.h)"},
    {"cpu_attn_tiles", C(cpu_attn_tiles), 0, 1, 1, 0, NULL,
     "CPU prefill attention: 1 (default) runs of consecutive tokens of a sequence in tiles (attention.c: each K / V "
     "chunk made f32 or bf16 once for the tile's rows; SmolLM2 bf16, one Zen 4 thread, 4096-token prefill 12.2 -> 5.5 s), "
     "0 every token on the decode path"},
    {"cpu_amx_q", C(cpu_amx_q), 0, 1, 1, 0, NULL,
     "cpu:amx packages: 1 (default) runs the a16w8 / a8w8 / a16w4 (q8i / q8a / q4i) matmuls of 32+ rows with bf16 "
     "activations on AMX tiles, the weights made bf16 a K chunk at a time (1B shape, prefill about bf16's, 3-4x the "
     "integer path); 0 keeps them on the integer path, whose rows give the same bits alone or in a batch (a preempted "
     "sequence recomputes exactly what it had)"},
    {"persistent", R(persistent), 0, 1, 1, 0, NULL, "one-token steps as one persistent kernel (sm_90, bf16)"},
    {"run_steps", R(run_steps), 0, 64, 0, 0, NULL,
     "a lone greedy sequence decodes up to this many steps per launch (0: the rest of its KV page; 1: off)"},
    {"chain", R(chain), 0, 1, 1, 0, NULL, "queue a lone greedy (or constrained) sequence's next step behind the current one"},
    {"graphs", R(graphs), 0, 1, 1, 0, NULL, "decode steps replay CUDA graphs"},
    {"graph_tmax", R(graph_tmax), -1, 1 << 20, -1, 0, NULL,
     "decode-only steps of up to this many tokens replay graphs (-1: any; 0: only one-token steps)"},
    {"gemv_tmax", R(gemv_tmax), 0, 8, 1, 0, NULL,
     "steps of up to this many tokens on the GEMV kernels, larger on cuBLAS (8 tokens: cuBLAS 2.3 ms, GEMV 4.4)"},
    {"mvt_tmax", R(mvt_tmax), 0, 8, 2, 0, NULL,
     "matmuls of 2..n tokens on the tensor-core GEMV, sm_80+ (0 or 1: off; 2 beats cuBLAS by 8% at 2 requests)"},
    {"mvtq_tmax", R(mvtq_tmax), 0, 8, 8, 0, NULL,
     "matmuls of quantized rows (a16w8 / a8w8 q8r, a16w4 q4r) with 2..n tokens on the tensor-core GEMV, sm_80+ (0 or 1: "
     "off: gemv.cu, whose FMAs bound it at 8 tokens: H100, 8 tokens of an 8192 x 2048 matrix, q8r 27.4 -> 10.0 us, q4r "
     "30.6 us on gemv.cu)"},
    {"a8_wg_tiles", R(a8_wg_tiles), 0, 1 << 20, 0, 0, NULL,
     "CUDA a8w8 packages with --tune a8_wg (sm_90a): the fused int8 GEMM for matmuls of 128+ tokens with at least "
     "this many 128 x 256 tiles, cuBLAS's int8 GEMM + dq below (0: half the SMs; H100, 1B shapes: 8-12 tiles 1.5-3x "
     "slower than cuBLAS, 64 and more 1.1-1.5x faster)"},
    {"a8_wg_split", R(a8_wg_split), 1, 64, 1, 0, NULL,
     "CUDA a8w8 packages with --tune a8_wg (sm_90a): steps of a8_tmin+ tokens whose matmuls have fewer 128 x 256 "
     "tiles than half the SMs take the fused int8 GEMM with each tile's K split in up to this many ranges (SMs / "
     "tiles, two K steps a split at least; the int32 sums meet in a buffer, exact, so the outputs equal the unsplit "
     "kernel's), instead of cuBLAS's int8 GEMM + dq (1: off; H100, 128 tokens: slower than cuBLAS, qkv 23.9 against "
     "16.9 us, down 39.3 against 18.3: the last range reduces the tile alone)"},
    {"mv_ctas_per_sm", R(mv_ctas_per_sm), 0, 32, 0, 0, NULL, "GEMV grid cap per SM (0: the template's default, 4)"},
    {"at_ctas_per_sm", R(at_ctas_per_sm), 0, 16, 0, 0, NULL,
     "decode attention: context splits per (token, KV head) = this many CTAs per SM over KV heads x tokens, "
     "at most ATTN_SPLIT (0: the template's default, 2)"},
    {"dl_keys", R(dl_keys), 1, 1 << 20, 256, 0, NULL, "persistent kernel attention: keys per context split"},
    {"dl_ctx_max", R(dl_ctx_max), 0, 1 << 30, 32768, 0, NULL,
     "one-token steps whose page-table row (the batch's longest sequence, in pages rounded up to a power of two) "
     "spans more tokens leave the persistent kernel for the per-op kernels, whose split attention reads long "
     "contexts faster (H200 1B bf16, ms/token persistent / per-op after a prompt of 16k 1.163 / 1.285, "
     "24k 1.331 / 1.376, 32k 1.509 / 1.453, 128k 3.793 / 2.414)"},
    {"cublas", R(cublas), 0, 1, 1, 0, NULL,
     "CUDA prefill GEMMs on cuBLAS where libcublas loads (0: on the package's own CUDA-core GEMM, gemm.cu, which is "
     "also what runs when no cuBLAS is installed: a bundle on a machine with only the driver)"},
    {"dl_heads", R(dl_heads), 0, 1, 1, 0, NULL,
     "persistent kernel attention: one item per query head where they fit (0: per KV head)"},
    {"sync", R(sync), 0, 1, 0, 0, NULL, "synchronize after every launch, so a faulting kernel is the one named (debug)"},
    {"profile", R(profile), 0, 1, 0, 0, NULL, "time every kernel and print the table when the model closes (no graphs)"},
    {NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
};

const tune_key *tune_find(const char *name) {
    for (const tune_key *k = tune_keys; k->name; k++)
        if (!strcmp(k->name, name)) return k;
    return NULL;
}

int32_t tune_get(const tune_key *k, const void *src) {
    int32_t v;
    memcpy(&v, (const char *)src + k->offset, sizeof v);
    return v;
}

static void defaults(tune_phase phase, void *dst) {
    for (const tune_key *k = tune_keys; k->name; k++)
        if (k->phase == phase) memcpy((char *)dst + k->offset, &k->def, sizeof k->def);
}

void tune_compile_defaults(cg_tuning *t) { defaults(TUNE_COMPILE, t); }
void tune_run_defaults(ig_model_tuning *t) { defaults(TUNE_RUN, t); }

static int accepted(const tune_key *k, long v) {
    if (v < k->min || v > k->max) return 0;
    return !k->only || (k->only >> (v - k->min) & 1u);
}

/* One "key=value" of len bytes. */
static ig_status apply_one(tune_phase phase, const char *e, size_t len, const char *what, void *dst, ig_err *err) {
    char buf[128];
    if (len >= sizeof buf) return ig_fail(err, IG_ERR_INVALID, "%s: entry '%.40s...' is too long", what, e);
    memcpy(buf, e, len);
    buf[len] = 0;
    char *eq = strchr(buf, '=');
    if (!eq) return ig_fail(err, IG_ERR_INVALID, "%s: '%s' is not key=value", what, buf);
    *eq = 0;
    const tune_key *k = tune_find(buf);
    if (!k) return ig_fail(err, IG_ERR_INVALID, "%s: unknown tuning key '%s' (`ignis help tune` lists them)", what, buf);
    if (k->phase != phase)
        return ig_fail(err, IG_ERR_INVALID, "%s: '%s' is a %s key: give it to %s", what, buf,
                       k->phase == TUNE_COMPILE ? "compile-time" : "run-time",
                       k->phase == TUNE_COMPILE ? "`ignis compile --tune`" : "the engine (ig_engine_config.tune, --tune on "
                                                                             "generate / chat / logits / bench)");
    char *end;
    errno = 0;
    long v = strtol(eq + 1, &end, 10);
    if (eq[1] == 0 || *end || errno || !accepted(k, v))
        return ig_fail(err, IG_ERR_INVALID, "%s: %s=%s is not accepted (%s: an integer in %d..%d%s)", what, buf, eq + 1,
                       k->name, k->min, k->max, k->only ? ", from the listed set" : "");
    int32_t v32 = (int32_t)v;
    memcpy((char *)dst + k->offset, &v32, sizeof v32);
    return IG_OK;
}

ig_status tune_apply(tune_phase phase, const char *spec, const char *what, void *dst, ig_err *err) {
    if (!spec) return IG_OK;
    for (const char *p = spec; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len) {
            ig_status st = apply_one(phase, p, len, what, dst, err);
            if (st) return st;
        }
        p += len + (comma ? 1 : 0);
    }
    return IG_OK;
}

