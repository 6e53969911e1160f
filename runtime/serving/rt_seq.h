/* rt_seq.h — driving one sequence through a model instance: feed tokens in chunks of the
 * instance's step size (prefill), then one at a time (decode). Used by the CLI's `logits`,
 * `generate` and `bench`; the engine schedules many sequences through the same ABI. */
#ifndef IG_RT_SEQ_H
#define IG_RT_SEQ_H

#include "kv_pager.h"
#include "rt_package.h"

/* Appends ids[0..n) to the sequence. If all_logits is non-NULL it receives [n][vocab] (the
 * next-token logits after each token); if last_logits is non-NULL it receives the logits after
 * the last token. Errors name the bad token or the limit hit (context length, KV pages). */
ig_status rt_seq_feed(rt_model *m, kv_pager *p, kv_seq *s, const int32_t *ids, int32_t n,
                      float *all_logits, float *last_logits, ig_err *err);
/* As rt_seq_feed, but the token after the last one is chosen on the device by *sample (models
 * with IG_MODEL_CAP_SAMPLE) and stored in *next; no logits come back. A device that reports the
 * logits invalid (NaN / inf) is IG_ERR_INVALID. */
ig_status rt_seq_feed_sample(rt_model *m, kv_pager *p, kv_seq *s, const int32_t *ids, int32_t n,
                             const ig_fwd_sample *sample, int32_t *next, ig_err *err);

/* Greedy index of the largest logit (lowest id on ties). */
int32_t rt_argmax(const float *logits, int32_t n);

#endif
