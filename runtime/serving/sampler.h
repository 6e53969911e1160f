/* sampler.h — picks the next token of one sequence from the model's logits: greedy, temperature,
 * top-k, top-p, min-p, repetition / presence / frequency penalties, logit bias, a per-request seed,
 * and the raw log-probabilities of the chosen and of the n most likely tokens.
 *
 * The engine's scheduler thread owns one smp_state per sequence and calls smp_sample once per
 * step. A state is not thread-safe, but states share nothing, so different states may be used
 * from different threads; a state's draws depend only on its params, seed, prompt and the logits
 * it is given (never on other sequences), which is what makes a seeded request reproducible.
 *
 * Order of operations in smp_sample (the HuggingFace / vLLM order):
 *   1. logit bias: logits[id] += bias (a bias of -inf or a large negative one bans a token);
 *   2. repetition penalty (HF): for every id seen in the prompt or the output so far,
 *      logit > 0 ? logit / rp : logit * rp;
 *      presence / frequency penalties (OpenAI): for every id generated c > 0 times so far,
 *      logit -= presence + frequency * c;
 *   3. temperature == 0: greedy, the argmax of the penalized logits (lowest id on ties); stop;
 *   4. temperature: logits / T, softmax;
 *   5. top-k: keep the k largest (ties with the k-th are kept, as in HF);
 *   6. top-p: of what is left (renormalized), keep the smallest prefix in descending order whose
 *      mass reaches top_p (the token that crosses top_p is kept; HF semantics);
 *   7. min-p: drop tokens with p < min_p * p_max;
 *   8. draw one uniform double u in [0, 1) from the state's RNG (xoshiro256** seeded with
 *      splitmix64(seed)) and take the token where the cumulative kept mass first exceeds
 *      u * (kept mass). Greedy steps draw nothing.
 * Logprobs never see steps 1-8: they are the log-softmax of the logits as given.
 *
 * Cost per call at vocab 128k: a few linear passes (max, exp into a histogram of -log p in
 * 1/32-nat buckets, one pass that collects the candidate buckets). Only the bucket where the top-k
 * or top-p boundary falls is sorted; no full sort of the vocabulary, no malloc.
 */
#ifndef IG_SAMPLER_H
#define IG_SAMPLER_H

#include <stdint.h>
#include "ig_model_abi.h"
#include "ig_status.h"

#define SMP_MAX_TOP_LOGPROBS 20

typedef struct smp_params {
    float temperature;        /* 0 = greedy (argmax, lowest id on ties); > 0 sample; < 0 invalid */
    int32_t top_k;            /* 0 = off; else keep the k most likely (k >= vocab = off) */
    float top_p;              /* (0, 1]; 1 = off */
    float min_p;              /* [0, 1); 0 = off: drop tokens with p < min_p * p_max */
    float repetition_penalty; /* > 0; 1 = off. HF: for ids seen in prompt or output,
                                 logit > 0 ? logit / rp : logit * rp */
    float presence_penalty;   /* [-2, 2]; OpenAI: logit -= presence if the output count > 0 */
    float frequency_penalty;  /* [-2, 2]; logit -= frequency * count (count in the output so far) */
    uint64_t seed;            /* per-request RNG seed */
    int32_t n_logit_bias;     /* entries in the two arrays below; an id may repeat (biases add) */
    const int32_t *logit_bias_ids;    /* [n_logit_bias] ids < vocab; borrowed until smp_new returns */
    const float *logit_bias_values;   /* [n_logit_bias] added to the logits first; finite or -inf */
    int32_t top_logprobs;     /* 0..20: also report the n most likely tokens with logprobs */
    int logprobs;             /* 1: report the chosen token's logprob (a pass of exp over the vocab);
                                 0: smp_result.logprob is NaN unless top_logprobs > 0 */
} smp_params;

/* Greedy, no penalties, no bias, seed 0, no top logprobs. */
void smp_params_default(smp_params *p);

/* Checks every field of p (borrowed) against vocab; the message names the field and the allowed
 * range ("top_p must be in (0, 1], got 1.5"). IG_ERR_INVALID on failure. */
ig_status smp_validate(const smp_params *p, int32_t vocab, ig_err *err);

typedef struct smp_state smp_state;

/* Per-sequence state: validates and copies p (the bias arrays too), seeds the RNG, and records the
 * prompt ids (borrowed, [n_prompt], each < vocab) for the repetition penalty. Everything
 * smp_sample needs is allocated here. *out: free with smp_free. */
ig_status smp_new(const smp_params *p, int32_t vocab, const int32_t *prompt, int32_t n_prompt,
                  smp_state **out, ig_err *err);
void smp_free(smp_state *s); /* accepts NULL */

typedef struct smp_logprob {
    int32_t id;
    float logprob; /* natural log */
} smp_logprob;

typedef struct smp_result {
    int32_t token;   /* chosen id */
    float logprob;   /* log-softmax of the chosen token under the unmodified logits ("raw") */
    int32_t n_top;   /* min(params.top_logprobs, vocab) */
    smp_logprob top[SMP_MAX_TOP_LOGPROBS]; /* [n_top] most likely under the unmodified logits,
                                              descending, lowest id first on ties */
} smp_result;

/* Samples one token from logits [vocab] (borrowed; used as scratch during the call, and holds the
 * caller's values again when it returns) and records it for the penalties (there is no separate
 * accept call). Deterministic: the same params, seed, prompt and sequence of logits give the same
 * tokens. Logits may hold -inf (masked tokens); NaN or +inf is IG_ERR_INVALID naming the index,
 * as is a step where every token is banned. No allocation. */
ig_status smp_sample(smp_state *s, float *logits, smp_result *r, ig_err *err);

/* Tokens sampled so far by s. */
int64_t smp_n_sampled(const smp_state *s);

/* Device sampling (ig_fwd_sample, for models with IG_MODEL_CAP_SAMPLE). When s's params need
 * nothing the device sampler lacks (logit bias, penalties, logprobs), fills d for this step,
 * drawing u from the state's RNG exactly where smp_sample would (greedy draws nothing), and
 * returns 1; otherwise returns 0 and leaves s and d untouched. After the step, the caller passes
 * the device's choice to smp_device_accept. Whether a request samples on the device depends only
 * on its own params, so a seeded request draws the same tokens beside any other traffic. */
int smp_device_step(smp_state *s, ig_fwd_sample *d);
/* Records the token the device chose for s's step; fills r (logprob NaN, no top logprobs). */
void smp_device_accept(smp_state *s, int32_t token, smp_result *r);

#endif
