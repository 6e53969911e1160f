/* driver.h — `ignis compile`: import → passes → weight packing → codegen → C compiler → package.
 *
 * A package directory holds model.so, weights.bin, manifest.json, src/ (the generated model.c
 * and the templates it includes, so a user can read and rebuild what was compiled) and the
 * tokenizer files when the source has them. A package sharded with --tp N holds one weights file
 * per rank (weights.rankR.bin, same layout, each rank's slices) instead of weights.bin, and its
 * manifest records "tp": N and the split of every sliced tensor. */
#ifndef IG_DRIVER_H
#define IG_DRIVER_H

#include <stdio.h>
#include "ir.h"

typedef struct cc_options {
    const char *input;      /* HF folder, .gguf file or .igraph */
    const char *out_dir;    /* package directory (created) */
    const char *target;     /* "cpu", "cpu:avx2", ... (NULL = native) */
    const char *dtype;      /* "f32", "bf16" or "f16" (CUDA only) (NULL = f32) */
    int32_t page_size;      /* KV page size in tokens (0 = 16) */
    int32_t max_context;    /* the package's context in tokens (0 = the model's max_position_embeddings); more
                               than the model's serves positions it was not trained on, as transformers
                               computes them (a warning says so) */
    const char *kv_cache;   /* KV cache format: "f32", "bf16", "f16" (CUDA), "int8", "uint4", "fp8" (CPU);
                               NULL = the package's dtype */
    const char *quant;      /* weight quantization: "a16w8", "a16w4" (CPU targets) or NULL/"none" */
    int32_t quant_group;    /* a16w4: group size along K, 32, 64 or 128 (0 = 128) */
    const char *quant_skip; /* comma-separated matrices kept in 16/32 bits (pk_quant_skips), or NULL */
    const char *cc;         /* C compiler (NULL = $IGNIS_CC or "cc") */
    const char *tune;       /* compile-time tuning, "key=value,key=value" (--tune; docs/TUNING.md);
                               NULL or "" = defaults. Recorded in manifest.json under "tuning" */
    int32_t tp;             /* tensor parallelism: ranks the model is sharded for (0 or 1 = none;
                               compiler/shard.h); CPU targets */
    FILE *dump;             /* graph dumps after each pass, or NULL */
    FILE *log;              /* progress lines, or NULL */
} cc_options;

/* Compiles o->input into the package o->out_dir. A comma list of CPU targets in o->target makes a
 * fat package (fat.c): one model object per target, one weights.bin. */
ig_status cc_compile(const cc_options *o, ig_err *err);
ig_status cc_compile_fat(const cc_options *o, ig_err *err);

#endif
