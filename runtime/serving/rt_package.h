/* rt_package.h — opening a compiled package: manifest, model.so, weights.
 *
 * Opening checks, in order, each with an error naming what failed: the manifest parses and has
 * this ABI version; this CPU has the features the package was compiled for (checked before the
 * code is loaded, so a mismatch is an error, not SIGILL); model.so loads and its weight table
 * matches the manifest; weights.bin has the manifest's size and every tensor's hash matches.
 * A fat package (compiler/fat.c) holds several targets' model objects ("variants", best first) and
 * one weights file per distinct layout: the loader takes the first CUDA variant whose cubins or PTX
 * run on the GPU (the driver probed by rt_gpu.h), else the best CPU variant this CPU runs (or what
 * rt_open_opts.device asks for), maps that variant's weights, and records what it chose and why in
 * rt_package.choice.
 * A package given as a file is a one-file bundle (pkg_file.h): the same checks, with the model code
 * the bundle's own executable holds (the bundle must be this process's executable), the weights
 * mapped in place at their offset of it, and every other file of it (the executable included)
 * checked against its hash in the bundle's directory.
 *
 * rt_model then runs forward steps over a paged KV pool it owns (rt_kv), with a workspace sized
 * for the limits given at open. It is not thread-safe: one engine thread drives it. */
#ifndef IG_RT_PACKAGE_H
#define IG_RT_PACKAGE_H

#include <stdint.h>
#include "ig_model_abi.h"
#include "ig_status.h"

typedef struct rt_package {
    char *dir;                 /* owned */
    void *dl;                  /* dlopen handle */
    const ig_model_desc *desc; /* borrowed from model.so */
    const uint8_t *weights;    /* mmap of weights.bin */
    uint64_t weights_bytes;
    int has_tokenizer;
    int tie_embeddings;        /* lm_head shares the embedding table */
    int32_t kv_window;         /* > 0: every layer attends only the last kv_window keys (sliding
                                  windows on all layers): older KV pages can be released */
    int32_t n_experts;         /* mixture-of-experts packages: experts per layer and selected per token (0 0: dense) */
    int32_t experts_per_token;
    int32_t bos_id;            /* -1 if none */
    int32_t n_eos;
    int32_t eos_ids[8];
    char target[64], dtype[16], kv_dtype[16]; /* from the manifest ("?" when absent) */
    char model_file[80];       /* the model object loaded: model.so, or a fat package's variant */
    char weights_file[80];     /* fat packages: the weights file the chosen variant reads ("": the manifest's) */
    int32_t n_variants;        /* fat packages: how many targets the package holds (0: one) */
    char choice[640];          /* fat packages: the target loaded and why ("cuda-sm_80 (model-cuda.so): GPU 0 is
                                  ..."); "" for a package of one target */
    void *gpu_lib;             /* fat packages whose CUDA code was chosen: the driver the probe opened (rt_gpu.h) */
    struct rt_tp *tp;          /* tensor-parallel packages (desc->tp > 1): the MPI job (rt_tp.h); else NULL */
    int32_t numa_node;         /* tensor-parallel CPU ranks: the NUMA node this process pinned itself to, -1 none */
} rt_package;

typedef struct rt_open_opts {
    int verify_hashes; /* 1 (default when opts is NULL): check every weight's hash */
    int tp_follower;   /* tensor parallel: the caller is a rank > 0 that will run rt_tp_follow (ig_tp_follow) */
    const char *device; /* which target of a fat package to load: NULL or "auto" (the best this machine runs:
                           CUDA where a GPU of a compiled arch is present, else the best CPU target), "cpu",
                           "cuda", or a target's name ("cpu-x86_64-avx2"); a one-target package must match it */
    int device_index;   /* the GPU whose architecture decides a fat package's CUDA code (default 0) */
} rt_open_opts;

/* Opens the package in dir. *out: free with rt_package_close. opts may be NULL. */
/* A package sharded for tensor parallelism (desc->tp > 1) joins the MPI job (rt_tp.h) and maps
 * its rank's weights.rankR.bin. Ranks other than 0 only follow rank 0 (ig_tp_follow opens the
 * package with opts->tp_follower and runs rt_tp_follow); without that flag they get an error that
 * says so, and rank 0 with it gets one too. */
ig_status rt_package_open(const char *dir, const rt_open_opts *opts, rt_package **out, ig_err *err);
void rt_package_close(rt_package *p);

/* A model instance: KV pool + workspace for the given limits. */
typedef struct rt_model {
    const rt_package *pkg;     /* borrowed */
    ig_model_ctx ctx;          /* owns kv_pool and workspace; ctx.tuning points at tuning */
    size_t kv_map_bytes;       /* host targets: the mapping that holds ctx.kv_pool */
    int32_t max_seqs;
    ig_model_tuning tuning;    /* run-time tuning of device code (defaults, then opts.tune) */
    int32_t tp_id;             /* tensor parallel: the instance's id among the ranks, -1 before it is announced */
    /* the prefix cache's host tier: n_host_pages pages (0: none); device targets keep them in the
     * model (desc->kv_page_copy), host targets here, in chunks allocated as pages first go there */
    int32_t n_host_pages;
    uint8_t **host_chunks;     /* host targets: [n_host_chunks] chunks of RT_HOST_CHUNK_PAGES pages */
    int32_t n_host_chunks;
} rt_model;
#define RT_HOST_CHUNK_PAGES 64

typedef struct rt_model_opts {
    int32_t max_tokens;  /* tokens per forward step (default 512) */
    int32_t n_pages;     /* KV pages; 0: kv_fraction of the memory left (GPU: free device memory
                            after weights and workspace; CPU: available RAM, capped at max_seqs full
                            contexts), or with kv_fraction 0 enough for max_seqs full contexts
                            capped at 1 GiB */
    float kv_fraction;   /* see n_pages */
    int32_t n_threads;   /* default: online CPUs */
    int32_t max_seqs;    /* default 1 */
    int32_t device_index; /* device targets: GPU index (default 0) */
    const char *tune;     /* run-time tuning "key=value,..." (tuning.h; borrowed; NULL: defaults). Keys
                             tune device code: on a CPU package any key is an error */
    int64_t kv_host_bytes; /* the prefix cache's host tier: bytes of host memory for KV pages evicted
                              from the pool (0: none; < 0: an eighth of the available RAM on device
                              targets, none on host targets, whose pool is host memory already;
                              tensor-parallel packages: none) */
} rt_model_opts;

/* *out: free with rt_model_free. */
ig_status rt_model_new(const rt_package *pkg, const rt_model_opts *o, rt_model **out, ig_err *err);
void rt_model_free(rt_model *m);
/* Copies KV page `page` (all layers) to host-tier page host_page (to_host 1) or back (0). Device
 * targets queue it behind the steps already queued (ig_model_desc.kv_page_copy); host targets copy
 * now. IG_ERR_NOMEM when the host page's memory cannot be had, IG_ERR_INVALID on bad ids. */
ig_status rt_model_kv_copy(rt_model *m, int to_host, int32_t page, int32_t host_page, ig_err *err);
/* Validates the batch (token ids, positions, pages, rows) with messages naming the bad entry,
 * then runs it. */
ig_status rt_model_forward(rt_model *m, const ig_fwd_batch *b, ig_err *err);

#endif
