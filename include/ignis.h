/* ignis.h — the public C API of the ignis runtime.
 *
 * An engine serves one compiled package (made by `ignis compile`) to many concurrent requests:
 * continuous batching over a paged KV cache, chunked prefill, preemption by recompute when KV
 * pages run out, and per-request sampling.
 *
 * Threads: every function may be called from any thread, concurrently with any other, with
 * these rules for ig_engine_close:
 *   - once ig_engine_close has begun, ig_request_start / ig_request_start_text on that engine
 *     fail with IG_ERR_CLOSED and ig_engine_get_stats reports the counters with zero KV pages;
 *     ig_engine_vocab / _max_context / _has_tokenizer keep answering;
 *   - close waits for starts already inside the engine, then ends every request (status
 *     STOPPED) and frees the model;
 *   - request handles stay valid after close, until released: read gives what was queued, then
 *     IG_ERR_CLOSED; sync/status/stop answer at once;
 *   - the ig_engine pointer stays valid until ig_engine_close has returned AND every request
 *     handle of the engine has been released; using it after that is a use of freed memory. A
 *     program whose threads may call into an engine while another closes it keeps one request
 *     handle (or joins those threads before close returns) to stay inside that window.
 * Calling ig_engine_close twice is harmless while the pointer is valid.
 *
 * Layout check: ig_engine_config and ig_gen_config begin with struct_size, which their *_default
 * functions set to the size this library was built with. ig_engine_open and ig_request_start
 * reject any other value with IG_ERR_MISMATCH, so a binding built against another ignis.h
 * fails with a message instead of misreading fields: always fill configs with *_default first.
 *
 * Life of a request:
 *   ig_request_start(engine, ids, n, &gen, &req, &err)   → handle (or an error for that request)
 *   ig_request_read(req, timeout_ms, &out, &err)         → new tokens / text / status, repeatedly
 *   ig_request_sync / ig_request_stop                    → wait for the end / end it early
 *   ig_request_release(req)                              → the handle is gone (stops it if running)
 *
 * Errors: functions return ig_status and write a message naming the bad value into an ig_err
 * (see ig_status.h). Strings and arrays passed in are borrowed for the call only.
 *
 * Misuse contract (each case is an error, never a use of freed memory or a crash):
 *   - a NULL out pointer or engine: IG_ERR_INVALID with a message;
 *   - a request handle used after ig_request_release (release twice, stop / read / sync /
 *     status after release): read, stop and release return IG_ERR_INVALID (read with a
 *     message), sync and status return IG_REQ_ERROR. Handles carry a magic, and released ones
 *     are kept on the engine's shelf for at least 256 later releases before their memory is
 *     reused, so a stale handle is recognized rather than dereferenced; a handle of an engine
 *     whose ig_engine_close returned and whose handles are all released is gone (undefined);
 *   - a release while other threads are blocked in ig_request_read / ig_request_sync on the
 *     same handle: those calls return at once (read: IG_ERR_INVALID, "released while this read
 *     waited"; sync: IG_REQ_ERROR) and the handle's memory goes after the last of them;
 *   - max_new_tokens up to INT32_MAX is valid: generation ends at the context length, and a
 *     request's buffers are sized by the context, never by max_new_tokens;
 *   - a temperature in (0, 1e-6) is IG_ERR_INVALID (0 is greedy).
 */
#ifndef IGNIS_H
#define IGNIS_H

#include <stddef.h>
#include <stdint.h>

#include "ig_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* IG_API (the exported functions) comes from ig_status.h */

typedef struct ig_engine ig_engine;
typedef struct ig_request ig_request;

/* "0.1.0" */
IG_API const char *ig_version(void);

typedef struct ig_engine_config {
    uint32_t struct_size;        /* sizeof(ig_engine_config), set by ig_engine_config_default */
    int32_t max_seqs;            /* sequences per step (default 32) */
    int32_t max_tokens_per_step; /* token budget of one step, prefill chunks + decode (default 256) */
    int64_t kv_bytes;            /* KV cache budget in bytes (0: use kv_pages) */
    int32_t kv_pages;            /* KV cache pages (0 and kv_bytes 0: sized by kv_fraction) */
    float kv_fraction;           /* with kv_pages and kv_bytes 0: the share of the memory left after
                                    weights and workspace that the KV pool takes (default 0.85) —
                                    free device memory on GPUs; on CPUs available RAM, the pool
                                    capped at max_seqs full contexts and mapped lazily */
    int32_t n_threads;           /* compute threads (0: all online CPUs). Idle threads spin-wait
                                    between kernels (OpenMP): on a host whose cores are busy with
                                    other work, fewer threads or OMP_WAIT_POLICY=passive do better */
    int32_t max_waiting;         /* requests queued beyond running ones before start says BUSY (default 1024) */
    int verify_hashes;           /* check weight hashes at open (default 1) */
    int prefix_cache;            /* reuse KV pages of shared prompt prefixes across requests (default 1) */
    int device_sampling;         /* on packages that can (CUDA): sample requests without logit bias,
                                    penalties or logprobs on the device, copying back one id per
                                    sequence instead of a row of logits, constrained ones under
                                    their token masks, uploaded as bitmasks (default 1) */
    const char *tune;            /* run-time tuning of the package's code, "key=value,key=value"
                                    (docs/TUNING.md; e.g. "persistent=0,graphs=0" on CUDA);
                                    NULL or "" = defaults. Borrowed for ig_engine_open only */
    int64_t kv_host_bytes;       /* the prefix cache's host tier: host memory (pinned on GPUs) that
                                    keeps KV pages evicted from the pool, brought back on a hit
                                    instead of recomputed. -1 (default): an eighth of the available
                                    RAM on device targets, none on CPU targets (their pool is RAM
                                    already); 0: none; > 0: that many bytes (CPU targets too) */
    int32_t prefix_cache_pages;  /* most KV pages the prefix cache keeps (least recently used go
                                    first; < 0: no bound but the pool). 0: the default — on GPUs
                                    the whole pool (allocated up front, so caching costs no
                                    memory); on CPUs, whose pool is mapped lazily and grows the
                                    resident memory as pages are first written, a sixteenth of
                                    the pool and at least 256 pages (or the whole pool if smaller),
                                    so that a stream of distinct prompts leaves the process's
                                    memory flat */
    const char *device;          /* a fat package's target to load: NULL or "auto" (the best this
                                    machine runs: its CUDA code where a GPU of a compiled
                                    architecture is present, else its best CPU target), "cpu",
                                    "cuda", or a target name ("cpu-x86_64-avx2"); a package of one
                                    target must match it. Borrowed for ig_engine_open only */
} ig_engine_config;

IG_API void ig_engine_config_default(ig_engine_config *cfg);
/* Opens the package in pkg_dir. cfg may be NULL (defaults); otherwise it must come from
 * ig_engine_config_default (IG_ERR_MISMATCH on a struct_size of another layout). *out: close with
 * ig_engine_close. */
IG_API ig_status ig_engine_open(const char *pkg_dir, const ig_engine_config *cfg, ig_engine **out,
                                ig_err *err);
/* Refuses new requests (IG_ERR_CLOSED), waits for starts already inside, stops every request
 * (they end with status STOPPED), joins the scheduler and frees the model. Handles not yet
 * released stay valid for read/release; the engine's memory goes with the last of them (see
 * "Threads" above). Accepts NULL. */
IG_API void ig_engine_close(ig_engine *e);

/* Tensor parallelism (a package compiled with --tp N runs as N processes: mpirun -np N ...). Rank 0
 * is the ordinary engine; the other ranks only follow it. Every process calls this first, with the
 * package it is about to open:
 *   - a package that is not sharded (or no package: opening it will say so), or rank 0 of the job: IG_OK at once with *followed = 0; go on
 *     and open the engine (rank 0: MPI has started; it is finalized when the process exits);
 *   - any other rank: opens the package, runs rank 0's model instances and steps on this rank's
 *     shard until rank 0 closes its engine, then IG_OK with *followed = 1: the process is done.
 * An error (the package cannot open on this rank, the job has another number of ranks, a step
 * failed) returns its status and message: exit with a non-zero status then, which makes mpirun end
 * the job (the other ranks may be waiting on this one). */
IG_API ig_status ig_tp_follow(const char *pkg_dir, int *followed, ig_err *err);

typedef struct ig_engine_stats {
    int32_t running;          /* sequences holding KV pages */
    int32_t waiting;          /* admitted requests not yet scheduled (incl. preempted) */
    int32_t kv_pages_total, kv_pages_used, kv_pages_free;
    int64_t steps;            /* forward steps run */
    int64_t tokens_prefilled; /* prompt tokens processed (recomputed ones too) */
    int64_t tokens_generated;
    int64_t preemptions;
    int32_t kv_pages_cached;  /* pages only the prefix cache holds (free on demand): free + cached
                                 = total when no request runs */
    int64_t prefix_hit_tokens; /* prompt tokens whose KV came from the prefix cache */
    int64_t prefix_host_hit_tokens; /* of those, tokens brought back from the host tier */
    int32_t kv_host_pages_total, kv_host_pages_used; /* the host tier's pages (0: no tier) */
    int64_t kv_bytes_to_host, kv_bytes_from_host;    /* bytes the host tier moved, each way */
} ig_engine_stats;
IG_API void ig_engine_get_stats(ig_engine *e, ig_engine_stats *s); /* e NULL: zeroed stats */
/* Model facts: vocabulary size, context length (tokens), whether a tokenizer is present (0 for
 * a NULL engine). */
IG_API int32_t ig_engine_vocab(const ig_engine *e);
IG_API int32_t ig_engine_max_context(const ig_engine *e);
IG_API int ig_engine_has_tokenizer(const ig_engine *e);
/* The target whose code runs ("cpu-x86_64-avx512bf16", "cuda-sm_80,sm_90"); for a fat package, which
 * of its targets was loaded and why ("cuda-sm_90 (model-cuda.so): GPU 0 is NVIDIA H200 (sm_90), which
 * it runs"). *n_targets (may be NULL): the package's targets, 1 unless fat. Owned by e ("" for NULL). */
IG_API const char *ig_engine_target(const ig_engine *e, int32_t *n_targets);

typedef struct ig_gen_config {
    uint32_t struct_size;     /* sizeof(ig_gen_config), set by ig_gen_config_default */
    int32_t max_new_tokens;   /* default 128 */
    int32_t min_new_tokens;   /* EOS and stop ids are suppressed before this many (default 0) */
    float temperature;        /* 0 = greedy (default) */
    int32_t top_k;            /* 0 = off */
    float top_p;              /* (0, 1], 1 = off */
    float min_p;              /* [0, 1), 0 = off */
    float repetition_penalty; /* > 0, 1 = off */
    float presence_penalty;   /* [-2, 2] */
    float frequency_penalty;  /* [-2, 2] */
    uint64_t seed;            /* same request + same seed = same tokens, whatever runs beside it */
    const int32_t *stop_ids;  int32_t n_stop_ids;            /* extra stop token ids */
    const char *const *stop_strings; int32_t n_stop_strings; /* stop text (needs a tokenizer); not emitted */
    const int32_t *logit_bias_ids; const float *logit_bias_values; int32_t n_logit_bias;
    int32_t top_logprobs;     /* 0..20 */
    int ignore_eos;           /* keep going past the model's EOS tokens */
    int logprobs;             /* 1: ig_output.logprobs holds each token's log-probability (costs a
                                 pass over the vocabulary per token); 0: NaN unless top_logprobs > 0 */
    int32_t constraint;       /* guided decoding, IG_CONSTRAINT_* (default NONE): each step samples
                                 only tokens the constraint allows, and EOS only where it may end.
                                 Needs a tokenizer; on CUDA such requests sample on the host */
    const char *constraint_text; /* the JSON Schema, regex or GBNF grammar (NUL-terminated; borrowed
                                    for ig_request_start, which compiles it: an unsupported schema
                                    keyword is IG_ERR_UNSUPPORTED naming it and its JSON path) */
} ig_gen_config;

enum {
    IG_CONSTRAINT_NONE = 0,
    IG_CONSTRAINT_JSON_SCHEMA = 1, /* constraint_text: a JSON Schema */
    IG_CONSTRAINT_JSON = 2,        /* any JSON object (constraint_text unused) */
    IG_CONSTRAINT_REGEX = 3,       /* the whole output matches the regular expression */
    IG_CONSTRAINT_GBNF = 4         /* a GBNF grammar (llama.cpp syntax), start rule root */
};
IG_API void ig_gen_config_default(ig_gen_config *g);

typedef enum ig_req_status {
    IG_REQ_QUEUED = 0,
    IG_REQ_PREFILLING = 1,
    IG_REQ_GENERATING = 2,
    IG_REQ_FINISHED = 3,   /* see ig_finish_reason */
    IG_REQ_STOPPED = 4,    /* ig_request_stop or engine close */
    IG_REQ_ERROR = 5       /* message in ig_output.error */
} ig_req_status;

typedef enum ig_finish_reason {
    IG_FINISH_NONE = 0,
    IG_FINISH_EOS = 1,
    IG_FINISH_STOP = 2,    /* a stop id or stop string */
    IG_FINISH_LENGTH = 3,  /* max_new_tokens or the context length */
    IG_FINISH_KV = 4,      /* the KV cache could not hold the sequence, alone in it: it was cut
                              before max_new_tokens and before the context length */
    IG_FINISH_INCOMPLETE = 5 /* max_new_tokens or the context length, inside a constraint's
                                structure: the output is cut */
} ig_finish_reason;

typedef struct ig_logprob {
    int32_t id;
    float logprob;
} ig_logprob;

/* One element of a request's result queue: what happened since the previous element. */
typedef struct ig_output {
    ig_req_status status;     /* status after these tokens */
    ig_finish_reason finish;  /* when status == FINISHED */
    int32_t n_tokens;
    int32_t *tokens;          /* [n_tokens] new token ids */
    float *logprobs;          /* [n_tokens] log-probability of each (raw model distribution); NaN
                                 unless the request asked for logprobs or top_logprobs */
    int32_t n_top;            /* top_logprobs of the request */
    ig_logprob *top;          /* [n_tokens][n_top] */
    char *text;               /* new text (NUL-terminated; empty without a tokenizer) */
    size_t text_len;
    char error[256];          /* when status == ERROR */
} ig_output;
IG_API void ig_output_free(ig_output *o); /* accepts NULL */

/* Starts a request. ids are copied; g may be NULL (defaults) or must come from
 * ig_gen_config_default (IG_ERR_MISMATCH otherwise); IG_ERR_CLOSED once close has begun. Errors (invalid parameters, unknown ids, a prompt longer
 * than the model or the KV cache can hold, BUSY when too many are waiting) concern this request
 * only. *out: release with ig_request_release. */
IG_API ig_status ig_request_start(ig_engine *e, const int32_t *ids, int32_t n_ids,
                                  const ig_gen_config *g, ig_request **out, ig_err *err);
/* Same, from text (the package's tokenizer, special tokens parsed, BOS added as the tokenizer's
 * post-processor says). */
IG_API ig_status ig_request_start_text(ig_engine *e, const char *text, const ig_gen_config *g,
                                       ig_request **out, ig_err *err);
/* Takes the next queue element: timeout_ms < 0 waits as long as needed, 0 does not wait, > 0
 * waits that long. IG_ERR_TIMEOUT when nothing came; IG_ERR_CLOSED when the request has ended
 * and every element was read. *out: free with ig_output_free. */
IG_API ig_status ig_request_read(ig_request *r, int timeout_ms, ig_output **out, ig_err *err);
/* Waits until the request has ended; returns its final status (IG_REQ_ERROR for a NULL or
 * released handle, or when the handle is released during the wait). */
IG_API ig_req_status ig_request_sync(ig_request *r);
IG_API ig_req_status ig_request_status(ig_request *r); /* IG_REQ_ERROR for a NULL or released handle */
/* Asks the request to end (status STOPPED); returns at once. IG_OK (also for NULL), or
 * IG_ERR_INVALID for a released handle. */
IG_API ig_status ig_request_stop(ig_request *r);
/* Drops the handle (stopping the request if it runs; waking the calls blocked in it). Accepts
 * NULL (IG_OK); a second release of the same handle is IG_ERR_INVALID, and changes nothing. Once it returns,
 * r's notify callback (below) is never called again. */
IG_API ig_status ig_request_release(ig_request *r);


/* Teacher-forced logits: out[i * vocab + j] is the logit of token j after ids[0..i] (a fresh
 * sequence; out is the caller's, n_ids * ig_engine_vocab floats, float32 on the host). Runs on a
 * second model instance of the engine's package, beside the scheduler's requests (weights
 * shared on CPU packages; a device package holds a second copy while the instance lives), in
 * steps of max_tokens_per_step tokens, so the values equal `ignis logits`. Calls serialize.
 * Errors name the bad id or the limit (context length); IG_ERR_CLOSED once close has begun. */
IG_API ig_status ig_engine_logits(ig_engine *e, const int32_t *ids, int32_t n_ids, float *out, ig_err *err);

/* ---- Text: a package's tokenizer and chat template.
 *
 * An ig_tokenizer is opened from a package or from any HuggingFace tokenizer folder
 * (tokenizer.json, and tokenizer_config.json for bos/eos tokens and the chat template; a folder
 * without a template gets ChatML). It is immutable once open: any number of threads may use it
 * at once. Buffers it returns are the caller's: free them with ig_free. */
typedef struct ig_tokenizer ig_tokenizer;

/* *out: close with ig_tokenizer_close. */
IG_API ig_status ig_tokenizer_open(const char *dir, ig_tokenizer **out, ig_err *err);
IG_API void ig_tokenizer_close(ig_tokenizer *t); /* accepts NULL */
/* Ids the tokenizer knows (model vocabulary + added tokens); its BOS / EOS ids, -1 if none. */
IG_API int32_t ig_tokenizer_vocab(const ig_tokenizer *t);
IG_API int32_t ig_tokenizer_bos(const ig_tokenizer *t);
IG_API int32_t ig_tokenizer_eos(const ig_tokenizer *t);
/* Encodes len bytes of UTF-8 text (as HF: add_special runs the post-processor, e.g. BOS;
 * parse_special turns special tokens written in the text into their ids). *ids: ig_free. */
IG_API ig_status ig_tokenize(const ig_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                             int32_t **ids, int32_t *n_ids, ig_err *err);
/* Decodes ids (out-of-range ids are skipped, as HF). *text: NUL-terminated, *len bytes; ig_free. */
IG_API ig_status ig_detokenize(const ig_tokenizer *t, const int32_t *ids, int32_t n_ids, int skip_special, char **text,
                               size_t *len, ig_err *err);
/* Renders a conversation with the chat template, as transformers' apply_chat_template:
 * messages_json is a JSON array of {"role", "content", ...}; tools_json a JSON array or NULL.
 * *text: NUL-terminated, *len bytes; ig_free. Errors name the JSON fault or the template line. */
IG_API ig_status ig_chat_template_apply(const ig_tokenizer *t, const char *messages_json, const char *tools_json,
                                        int add_generation_prompt, char **text, size_t *len, ig_err *err);
/* Frees a buffer libignis returned (accepts NULL). */
IG_API void ig_free(void *p);

/* For event loops that serve many requests from one thread (the HTTP server): fn(user) is called
 * each time an element is queued on r (new tokens, the end), and once at once from this call when
 * elements are already waiting. It runs on the engine's scheduler thread with engine locks held:
 * it must return quickly and call nothing of this API (set a flag, write to an eventfd). fn NULL
 * removes the callback; after this call returns the previous callback is never called again.
 * user is borrowed. */
IG_API void ig_request_set_notify(ig_request *r, void (*fn)(void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
