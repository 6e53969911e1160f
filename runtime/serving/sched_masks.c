/* sched_masks.c — guided decoding's token masks computed beside the forward pass (see
 * scheduler.h, "provided by sched_masks.c").
 *
 * A constrained sequence's mask for the logits a step produces depends only on its matcher's
 * state after the token the previous step sampled, which is known when the step is launched. So
 * the scheduler hands the step's constrained rows to one helper thread just before it calls the
 * model, and waits for it just before sampling: the masks cost nothing while the forward takes
 * longer than they do. On a CUDA package the forward waits on the GPU, so the CPU is free; on a
 * CPU package the forward's OpenMP team holds every CPU it was given, so the helper runs only
 * when the team leaves a CPU of the process's affinity free (else sample_one computes the masks
 * after the step, as before, in parallel over the step's sequences).
 *
 * Where the model applies masks itself (CUDA: IG_MODEL_CAP_MASK), a constrained row is sampled on
 * the device: the scheduler passes its mask buffer in the batch and sched_masks_ready as the
 * batch's masks_wait, which forward calls once the step's kernels are queued; the model then
 * uploads the masks as bitmasks and its sampling kernel applies them, so only the token comes
 * back. Rows the device sampler cannot take (logit bias, penalties, logprobs) still copy their
 * logits back and take their masks in sample_one (the host fallback).
 *
 * The helper touches only the handed-over requests' matcher, mask buffer and mask status, and
 * their step slots' error strings, none of which the scheduler reads until sched_masks_end; the
 * requests cannot end meanwhile (only the scheduler thread ends them). It sleeps on a condition
 * variable between steps: no polling. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "scheduler.h"

struct sched_masks {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* a job was posted, or the job is done, or quit */
    int quit;
    uint64_t posted, done; /* job counters: a job is pending while done != posted */
    ig_engine *e;
    int32_t n;             /* slots in the pending job */
    int32_t *slots;        /* [max_seqs] step slots (indices into e->b_reqs) of the job */
};

static void *masks_main(void *arg) {
    sched_masks *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->quit && w->done == w->posted) pthread_cond_wait(&w->cv, &w->mu);
        if (w->quit) break;
        ig_engine *e = w->e;
        int32_t n = w->n;
        pthread_mutex_unlock(&w->mu);
        for (int32_t i = 0; i < n; i++) {
            int32_t s = w->slots[i];
            ig_request *r = e->b_reqs[s];
            r->gmask_st = gr_matcher_mask(r->gm, r->gmask, &e->b_errs[s]);
            r->gmask_ready = 1;
        }
        pthread_mutex_lock(&w->mu);
        w->done = w->posted;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* The helper, started; NULL when a thread or memory is not to be had (the masks are then
 * computed after the step). */
static sched_masks *masks_new(ig_engine *e) {
    sched_masks *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->slots = malloc(sizeof(int32_t) * (size_t)e->cfg.max_seqs);
    if (!w->slots) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, masks_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w->slots);
        free(w);
        return NULL;
    }
    return w;
}

void sched_masks_free(sched_masks *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->slots);
    free(w);
}

int sched_masks_overlap(const ig_engine *e) {
    if (e->pkg->desc->device != IG_DEVICE_CPU) return 1;
    cpu_set_t have;
    long cpus = sched_getaffinity(0, sizeof have, &have) == 0 ? CPU_COUNT(&have) : sysconf(_SC_NPROCESSORS_ONLN);
    return e->model->ctx.n_threads < cpus;
}

int32_t sched_masks_begin(ig_engine *e, const ig_fwd_batch *b) {
    if (!e->masks_overlap) return 0;
    int32_t n = 0;
    for (int32_t s = 0; s < b->n_seqs; s++) {
        ig_request *r = e->b_reqs[s];
        if (r->gm && r->step_row >= 0) n++;
    }
    if (!n) return 0;
    if (!e->masks && !(e->masks = masks_new(e))) {
        e->masks_overlap = 0; /* no helper to be had: after the step from now on */
        return 0;
    }
    sched_masks *w = e->masks;
    pthread_mutex_lock(&w->mu);
    w->e = e;
    w->n = 0;
    for (int32_t s = 0; s < b->n_seqs; s++) {
        ig_request *r = e->b_reqs[s];
        if (r->gm && r->step_row >= 0) w->slots[w->n++] = s;
    }
    w->posted++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return n;
}

void sched_masks_end(ig_engine *e) {
    sched_masks *w = e->masks;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    while (w->done != w->posted) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

/* r's mask as the device reads it: no bits at ids the constraint's vocabulary lacks (the model's
 * may be larger), and before min_new_tokens none at EOS or the stop ids (as sample_one bans them). */
static void device_mask(const ig_engine *e, const ig_request *r) {
    uint32_t *bits = r->gmask;
    const int32_t words = IG_MASK_WORDS(e->vocab), nv = gr_vocab_size(e->gvocab);
    for (int32_t w = nv < 0 ? 0 : nv / 32; w < words; w++) {
        const int32_t lo = w * 32;
        bits[w] &= nv >= lo + 32 ? 0xFFFFFFFFu : nv > lo ? (1u << (nv - lo)) - 1u : 0u;
    }
    if (r->n_gen >= r->g.min_new_tokens) return;
    for (int32_t i = 0; i < e->pkg->n_eos; i++) {
        int32_t id = e->pkg->eos_ids[i];
        if (id >= 0 && id < e->vocab) bits[id >> 5] &= ~(1u << (id & 31));
    }
    for (int32_t i = 0; i < r->g.n_stop_ids; i++) {
        int32_t id = r->stop_ids[i];
        if (id >= 0 && id < e->vocab) bits[id >> 5] &= ~(1u << (id & 31));
    }
}

void sched_masks_ready(void *user) {
    ig_engine *e = user;
    sched_masks_end(e);
    for (int32_t s = 0; s < e->b_n_seqs; s++) {
        ig_request *r = e->b_reqs[s];
        if (r->step_row < 0 || !e->b_masks[r->step_row]) continue;
        if (!r->gmask_ready) { /* not handed to the helper (no overlap): now */
            r->gmask_st = gr_matcher_mask(r->gm, r->gmask, &e->b_errs[s]);
            r->gmask_ready = 1;
        }
        if (!r->gmask_st) device_mask(e, r);
    }
}
