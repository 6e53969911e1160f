/* rt_seq.c — single-sequence prefill/decode driver (see rt_seq.h). */
#include "rt_seq.h"

#include <stdlib.h>
#include <string.h>

int32_t rt_argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static ig_status feed(rt_model *m, kv_pager *p, kv_seq *s, const int32_t *ids, int32_t n, float *all_logits,
                      float *last_logits, const ig_fwd_sample *sample, int32_t *next, ig_err *err) {
    const ig_model_desc *d = m->pkg->desc;
    if (n < 1) return ig_fail(err, IG_ERR_INVALID, "no tokens to feed");
    if ((int64_t)s->len + n > d->max_context)
        return ig_fail(err, IG_ERR_INVALID,
                       "sequence of %d tokens is longer than the model's context of %d tokens",
                       s->len + n, d->max_context);
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= d->vocab)
            return ig_fail(err, IG_ERR_INVALID, "token id %d (at index %d) is out of range: the vocabulary has %d tokens",
                           ids[i], i, d->vocab);
    ig_status st = kv_seq_reserve(p, s, s->len + n, d->page_size, err);
    if (st) return st;
    int32_t step = m->ctx.max_tokens;
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)step * 3);
    if (!pos) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    int32_t *seq = pos + step, *rows = seq + step;
    float *tmp = NULL;
    for (int32_t off = 0; off < n && !st; off += step) {
        int32_t c = n - off < step ? n - off : step;
        for (int32_t i = 0; i < c; i++) {
            pos[i] = s->len + i;
            seq[i] = 0;
            rows[i] = i;
        }
        ig_fwd_batch b = {.n_tokens = c, .token_ids = ids + off, .positions = pos, .token_seq = seq,
                          .n_seqs = 1, .page_table = s->pages, .max_pages_per_seq = s->n_pages};
        int last_chunk = off + c == n;
        if (all_logits) {
            b.n_out = c;
            b.out_rows = rows;
            b.logits = all_logits + (size_t)off * d->vocab;
        } else if ((last_logits || sample) && last_chunk) {
            b.n_out = 1;
            rows[0] = c - 1;
            b.out_rows = rows;
            b.logits = last_logits;
            b.sample = sample;
            b.sampled = next;
        }
        st = rt_model_forward(m, &b, err);
        if (!st) s->len += c;
        if (!st && last_chunk && all_logits && last_logits)
            memcpy(last_logits, all_logits + (size_t)(n - 1) * d->vocab, sizeof(float) * d->vocab);
    }
    free(tmp);
    free(pos);
    if (!st && sample && *next < 0) st = ig_fail(err, IG_ERR_INVALID, "the device found NaN or +inf in the logits");
    return st;
}

ig_status rt_seq_feed(rt_model *m, kv_pager *p, kv_seq *s, const int32_t *ids, int32_t n, float *all_logits,
                      float *last_logits, ig_err *err) {
    return feed(m, p, s, ids, n, all_logits, last_logits, NULL, NULL, err);
}

ig_status rt_seq_feed_sample(rt_model *m, kv_pager *p, kv_seq *s, const int32_t *ids, int32_t n,
                             const ig_fwd_sample *sample, int32_t *next, ig_err *err) {
    if (!(m->pkg->desc->caps & IG_MODEL_CAP_SAMPLE))
        return ig_fail(err, IG_ERR_UNSUPPORTED, "package %s cannot sample on its device", m->pkg->dir);
    return feed(m, p, s, ids, n, NULL, NULL, sample, next, err);
}
