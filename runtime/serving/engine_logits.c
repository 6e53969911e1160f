/* engine_logits.c — ig_engine_logits: teacher-forced logits of a token sequence, computed beside
 * the scheduler's requests.
 *
 * The scheduler's model instance samples only the last row of each sequence and is the
 * scheduler thread's alone, so scoring runs on a second instance of the same package (CPU:
 * the weights are the same mmap; the KV pool and workspace are its own). It is made on the
 * first call and grown when a longer sequence comes (its KV pool holds one sequence), in steps
 * of the engine's max_tokens_per_step tokens: the same chunks as `ignis logits`, hence the same
 * values. One lock serializes the calls; ig_engine_close frees the instance after the calls
 * inside the engine have left (engine.c's enter/leave). */
#include <stdlib.h>

#include "rt_seq.h"
#include "scheduler.h"

typedef struct eng_scorer {
    pthread_mutex_t mu;
    rt_model *m;     /* NULL until the first call */
    kv_pager *pager; /* pages of m's KV pool */
} eng_scorer;

ig_status eng_scorer_new(struct ig_engine *e, ig_err *err) {
    eng_scorer *s = calloc(1, sizeof *s);
    if (!s) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    e->scorer = s;
    return IG_OK;
}

static void drop_model(eng_scorer *s) {
    kv_pager_free(s->pager);
    rt_model_free(s->m);
    s->pager = NULL;
    s->m = NULL;
}

void eng_scorer_free(eng_scorer *s) {
    if (!s) return;
    drop_model(s);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Makes sure s holds a model instance with KV room for n tokens (s->mu held). */
static ig_status ensure_model(struct ig_engine *e, eng_scorer *s, int32_t n, ig_err *err) {
    const ig_model_desc *d = e->pkg->desc;
    int32_t pages = (n + d->page_size - 1) / d->page_size;
    if (s->m && s->pager->n_pages >= pages) return IG_OK;
    drop_model(s);
    rt_model_opts mo = {.max_tokens = e->cfg.max_tokens_per_step, .n_pages = pages, .n_threads = e->cfg.n_threads,
                        .max_seqs = 1, .tune = NULL};
    ig_status st = rt_model_new(e->pkg, &mo, &s->m, err);
    if (!st) st = kv_pager_new(s->m->ctx.n_pages, &s->pager, err);
    if (st) drop_model(s);
    return st;
}

ig_status eng_scorer_run(struct ig_engine *e, const int32_t *ids, int32_t n_ids, float *out, ig_err *err) {
    if (n_ids < 1 || !ids) return ig_fail(err, IG_ERR_INVALID, "no token ids to score");
    if (n_ids > e->max_context)
        return ig_fail(err, IG_ERR_INVALID, "%d token ids are more than the model's context of %d tokens", n_ids,
                       e->max_context);
    eng_scorer *s = e->scorer;
    pthread_mutex_lock(&s->mu);
    ig_status st = ensure_model(e, s, n_ids, err);
    kv_seq seq = {0};
    if (!st) st = rt_seq_feed(s->m, s->pager, &seq, ids, n_ids, out, NULL, err);
    if (s->pager) kv_seq_free(s->pager, &seq);
    pthread_mutex_unlock(&s->mu);
    return st;
}
