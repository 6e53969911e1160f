/* rt_tp.c — tensor parallelism over MPI (see rt_tp.h). */
#include "rt_tp.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_package.h"

#ifndef IGNIS_HAVE_MPI

ig_status rt_tp_open(int32_t ranks, const char *dir, rt_tp **out, ig_err *err) {
    *out = NULL;
    return ig_fail(err, IG_ERR_UNSUPPORTED,
                   "%s is sharded for %d ranks (compiled with --tp %d), and this ignis was built without MPI "
                   "(install Open MPI, libopenmpi-dev, and rebuild)", dir, ranks, ranks);
}
void rt_tp_close(rt_tp *t) { (void)t; }
int32_t rt_tp_rank(const rt_tp *t) { return 0; }
void rt_tp_abandon(rt_tp *t) { (void)t; }
const ig_model_comm *rt_tp_comm(const rt_tp *t) { return NULL; }
ig_status rt_tp_announce_model(rt_tp *t, struct rt_model *m, ig_err *err) { return IG_OK; }
ig_status rt_tp_attach_device(rt_tp *t, int device, ig_err *err) { return IG_OK; }
void rt_tp_announce_free(rt_tp *t, const struct rt_model *m) {}
ig_status rt_tp_step_begin(rt_tp *t, const struct rt_model *m, const ig_fwd_batch *b, ig_err *err) { return IG_OK; }
void rt_tp_step_end(rt_tp *t) {}
ig_status rt_tp_follow(struct rt_package *p, ig_err *err) {
    (void)p;
    return ig_fail(err, IG_ERR_UNSUPPORTED, "this ignis was built without MPI: no tensor-parallel ranks to follow");
}
ig_status rt_tp_job_rank(int32_t ranks, const char *dir, int32_t *rank, int *started, ig_err *err) {
    rt_tp *t;
    *rank = 0, *started = 0;
    return rt_tp_open(ranks, dir, &t, err);
}
void rt_tp_finalize(void) {}

#else

#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <pthread.h>

#define TP_MAX_MODELS 16

/* Commands rank 0 broadcasts: hdr[0] is one of these, hdr[1] the instance. */
enum { TP_CMD_NEW = 1, TP_CMD_FREE = 2, TP_CMD_STEP = 3, TP_CMD_EXIT = 4 };
#define TP_HDR 8

/* NCCL (device targets), opened at run time like the CUDA driver (templates/cuda/host.h), so the
 * runtime builds without it. Types and constants as NCCL's nccl.h declares them (ABI facts). */
typedef struct { char internal[128]; } tp_nccl_id;
typedef struct tp_nccl {
    void *lib;
    void *comm; /* ncclComm_t */
    int (*get_unique_id)(tp_nccl_id *);
    int (*comm_init_rank)(void **, int, tp_nccl_id, int);
    int (*comm_destroy)(void *);
    int (*all_reduce)(const void *, void *, size_t, int, int, void *, void *);
    int (*all_gather)(const void *, void *, size_t, int, void *, void *);
    const char *(*error_string)(int);
} tp_nccl;
#define TP_NCCL_FLOAT32 7
#define TP_NCCL_SUM 0

struct rt_tp {
    MPI_Comm comm;
    int32_t rank, size;
    ig_model_comm hooks;
    tp_nccl nccl;         /* device targets, once a model instance has a device (rt_tp_attach_device) */
    pthread_mutex_t step; /* rank 0: one announced command (and a step's forward) at a time */
    uint32_t used_ids;    /* rank 0: bit i set while instance id i lives (ids are reused) */
    int own_mpi;          /* MPI was initialized here (and is finalized by rt_tp_close) */
    int failed;           /* a follower's command failed: the job is over, MPI is left as it is */
};

static int comm_all_reduce(const ig_model_comm *c, float *buf, int64_t n) {
    const rt_tp *t = c->user;
    for (int64_t done = 0; done < n;) {
        int k = n - done > INT_MAX ? INT_MAX : (int)(n - done);
        if (MPI_Allreduce(MPI_IN_PLACE, buf + done, k, MPI_FLOAT, MPI_SUM, t->comm) != MPI_SUCCESS) return 1;
        done += k;
    }
    return 0;
}

static int comm_all_gather(const ig_model_comm *c, const float *send, float *recv, int64_t n) {
    const rt_tp *t = c->user;
    if (n > INT_MAX) return 1;
    return MPI_Allgather(send, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, t->comm) != MPI_SUCCESS;
}

/* Starts MPI unless something has (*started says whether this call did) and checks the job's size. */
static ig_status join_job(int32_t ranks, const char *dir, int *started, int *rank, ig_err *err) {
    int inited = 0, provided = 0, size = 0;
    *started = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return ig_fail(err, IG_ERR_IO, "%s is sharded for %d ranks: MPI could not start", dir, ranks);
    if (!inited && provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return ig_fail(err, IG_ERR_UNSUPPORTED, "this MPI library cannot be called from the engine's thread "
                       "(MPI_THREAD_SERIALIZED)");
    }
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    if (size != ranks) {
        if (!inited) MPI_Finalize();
        return ig_fail(err, IG_ERR_MISMATCH,
                       "%s is sharded for %d ranks (compiled with --tp %d) but runs on %d MPI rank%s: start it with "
                       "mpirun -np %d, or recompile with --tp %d", dir, ranks, ranks, size, size == 1 ? "" : "s", ranks, size);
    }
    *started = !inited;
    return IG_OK;
}

void rt_tp_finalize(void) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

static void finalize_at_exit(void) { rt_tp_finalize(); }

ig_status rt_tp_job_rank(int32_t ranks, const char *dir, int32_t *rank, int *started, ig_err *err) {
    int r = 0;
    ig_status st = join_job(ranks, dir, started, &r, err);
    *rank = r;
    if (!st && *started && r == 0 && atexit(finalize_at_exit) != 0)
        return ig_fail(err, IG_ERR_INTERNAL, "cannot register MPI's finalization at exit");
    return st;
}

ig_status rt_tp_open(int32_t ranks, const char *dir, rt_tp **out, ig_err *err) {
    *out = NULL;
    int started, rank = 0;
    ig_status st = join_job(ranks, dir, &started, &rank, err);
    if (st) return st;
    rt_tp *t = calloc(1, sizeof *t);
    if (!t) {
        if (started) MPI_Finalize();
        return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    t->own_mpi = started;
    MPI_Comm_dup(MPI_COMM_WORLD, &t->comm);
    t->rank = rank, t->size = ranks;
    t->hooks = (ig_model_comm){.rank = rank, .size = ranks, .user = t, .all_reduce_sum = comm_all_reduce,
                               .all_gather = comm_all_gather};
    pthread_mutex_init(&t->step, NULL);
    *out = t;
    return IG_OK;
}

static void bcast_hdr(rt_tp *t, int64_t *hdr) { MPI_Bcast(hdr, TP_HDR, MPI_INT64_T, 0, t->comm); }

static int nccl_all_reduce(const ig_model_comm *c, uint64_t buf, int64_t n, void *stream) {
    const rt_tp *t = c->user;
    return t->nccl.all_reduce((const void *)(uintptr_t)buf, (void *)(uintptr_t)buf, (size_t)n, TP_NCCL_FLOAT32, TP_NCCL_SUM,
                              t->nccl.comm, stream) != 0;
}

static int nccl_all_gather(const ig_model_comm *c, uint64_t send, uint64_t recv, int64_t n, void *stream) {
    const rt_tp *t = c->user;
    return t->nccl.all_gather((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, (size_t)n, TP_NCCL_FLOAT32, t->nccl.comm,
                              stream) != 0;
}

/* libnccl's entry points into t->nccl; 0 when one is missing. */
static int nccl_load(tp_nccl *n) {
    static const char *const names[] = {"libnccl.so.2", "libnccl.so"};
    for (size_t i = 0; i < 2 && !n->lib; i++) n->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) return 0;
    *(void **)&n->get_unique_id = dlsym(n->lib, "ncclGetUniqueId");
    *(void **)&n->comm_init_rank = dlsym(n->lib, "ncclCommInitRank");
    *(void **)&n->comm_destroy = dlsym(n->lib, "ncclCommDestroy");
    *(void **)&n->all_reduce = dlsym(n->lib, "ncclAllReduce");
    *(void **)&n->all_gather = dlsym(n->lib, "ncclAllGather");
    *(void **)&n->error_string = dlsym(n->lib, "ncclGetErrorString");
    return n->get_unique_id && n->comm_init_rank && n->comm_destroy && n->all_reduce && n->all_gather && n->error_string;
}

ig_status rt_tp_attach_device(rt_tp *t, int device, ig_err *err) {
    tp_nccl *n = &t->nccl;
    if (n->comm) return IG_OK;
    int ok = nccl_load(n); /* every rank reaches the broadcast below, so a rank without NCCL cannot hang the others */
    tp_nccl_id id;
    memset(&id, 0, sizeof id);
    int rc = t->rank == 0 && ok ? n->get_unique_id(&id) : 0, all_ok = 0, mine = ok && rc == 0;
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, t->comm);
    MPI_Allreduce(&mine, &all_ok, 1, MPI_INT, MPI_LAND, t->comm);
    if (!all_ok)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor parallelism on GPUs needs NCCL (libnccl.so.2) on every rank%s%s",
                       ok ? "" : ": not found on rank ", ok ? "" : (t->rank ? "> 0" : "0"));
    if ((rc = n->comm_init_rank(&n->comm, t->size, id, t->rank)) != 0) {
        n->comm = NULL;
        return ig_fail(err, IG_ERR_IO, "ncclCommInitRank (rank %d of %d, GPU %d): %s", t->rank, t->size, device,
                       n->error_string(rc));
    }
    t->hooks.all_reduce_sum_dev = nccl_all_reduce;
    t->hooks.all_gather_dev = nccl_all_gather;
    return IG_OK;
}

void rt_tp_close(rt_tp *t) {
    if (!t) return;
    if (t->nccl.comm) t->nccl.comm_destroy(t->nccl.comm);
    if (t->nccl.lib) dlclose(t->nccl.lib);
    if (t->rank == 0) {
        int64_t hdr[TP_HDR] = {TP_CMD_EXIT};
        pthread_mutex_lock(&t->step);
        bcast_hdr(t, hdr);
        pthread_mutex_unlock(&t->step);
    }
    if (!t->failed) MPI_Comm_free(&t->comm);
    pthread_mutex_destroy(&t->step);
    int own = t->own_mpi && !t->failed;
    free(t);
    if (own) MPI_Finalize();
}

int32_t rt_tp_rank(const rt_tp *t) { return t ? t->rank : 0; }
void rt_tp_abandon(rt_tp *t) {
    if (t) t->failed = 1;
}
const ig_model_comm *rt_tp_comm(const rt_tp *t) { return t ? &t->hooks : NULL; }

ig_status rt_tp_announce_model(rt_tp *t, rt_model *m, ig_err *err) {
    pthread_mutex_lock(&t->step);
    int id = 0;
    while (id < TP_MAX_MODELS && (t->used_ids >> id & 1u)) id++;
    if (id == TP_MAX_MODELS) {
        pthread_mutex_unlock(&t->step);
        return ig_fail(err, IG_ERR_UNSUPPORTED, "a tensor-parallel package takes at most %d live model instances", TP_MAX_MODELS);
    }
    t->used_ids |= 1u << id;
    m->tp_id = id;
    int64_t hdr[TP_HDR] = {TP_CMD_NEW, id, m->ctx.max_tokens, m->ctx.n_pages, m->ctx.n_threads, m->max_seqs};
    bcast_hdr(t, hdr);
    pthread_mutex_unlock(&t->step);
    return IG_OK;
}

void rt_tp_announce_free(rt_tp *t, const rt_model *m) {
    int64_t hdr[TP_HDR] = {TP_CMD_FREE, m->tp_id};
    pthread_mutex_lock(&t->step);
    bcast_hdr(t, hdr);
    t->used_ids &= ~(1u << m->tp_id);
    pthread_mutex_unlock(&t->step);
}

/* The step's int32 arrays, in one buffer: ids, positions, sequences [T] each, page table
 * [n_seqs][max_pages], logits rows [n_out]. */
static int64_t step_ints(const int64_t *hdr) { return 3 * hdr[2] + hdr[3] * hdr[4] + hdr[5]; }

ig_status rt_tp_step_begin(rt_tp *t, const rt_model *m, const ig_fwd_batch *b, ig_err *err) {
    int64_t hdr[TP_HDR] = {TP_CMD_STEP, m->tp_id, b->n_tokens, b->n_seqs, b->max_pages_per_seq, b->n_out};
    int64_t n = step_ints(hdr);
    int32_t *buf = malloc(sizeof *buf * (size_t)(n > 0 ? n : 1));
    if (!buf || n > INT_MAX) {
        free(buf);
        return ig_fail(err, IG_ERR_NOMEM, "tensor parallel: no room for the step's description");
    }
    int32_t T = b->n_tokens, *p = buf;
    memcpy(p, b->token_ids, sizeof *p * T), p += T;
    memcpy(p, b->positions, sizeof *p * T), p += T;
    memcpy(p, b->token_seq, sizeof *p * T), p += T;
    memcpy(p, b->page_table, sizeof *p * (size_t)b->n_seqs * b->max_pages_per_seq), p += (size_t)b->n_seqs * b->max_pages_per_seq;
    memcpy(p, b->out_rows, sizeof *p * b->n_out);
    pthread_mutex_lock(&t->step);
    bcast_hdr(t, hdr);
    MPI_Bcast(buf, (int)n, MPI_INT32_T, 0, t->comm);
    free(buf);
    return IG_OK;
}

void rt_tp_step_end(rt_tp *t) { pthread_mutex_unlock(&t->step); }

/* ---- followers */

/* A follower's command failed: the job cannot go on (see rt_tp_follow). */
static ig_status follow_fail(rt_tp *t, ig_err *err, ig_status st, const char *what, const char *msg) {
    t->failed = 1;
    return ig_fail(err, st, "tensor-parallel rank %d: %s: %s", t->rank, what, msg);
}

/* The step's arrays and its logits rows, grown as steps need (kept across steps). */
typedef struct follow_bufs {
    int32_t *ints;
    float *logits;
    int64_t ints_cap, logits_cap;
} follow_bufs;

static int grow(void **p, int64_t *cap, int64_t n, size_t elem) {
    if (n <= *cap) return 1;
    void *q = realloc(*p, elem * (size_t)n);
    if (!q) return 0;
    *p = q, *cap = n;
    return 1;
}

/* One step of instance m as rank 0 described it in hdr (the arrays follow). */
static ig_status follow_step(rt_tp *t, rt_model *m, const int64_t *hdr, follow_bufs *fb, ig_err *err) {
    int64_t n = step_ints(hdr), V = m->pkg->desc->vocab;
    if (!grow((void **)&fb->ints, &fb->ints_cap, n > 0 ? n : 1, sizeof *fb->ints) ||
        !grow((void **)&fb->logits, &fb->logits_cap, hdr[5] * V > 0 ? hdr[5] * V : 1, sizeof *fb->logits))
        return follow_fail(t, err, IG_ERR_NOMEM, "step", "out of memory");
    int32_t *buf = fb->ints;
    MPI_Bcast(buf, (int)n, MPI_INT32_T, 0, t->comm);
    int32_t T = (int32_t)hdr[2];
    ig_fwd_batch b = {.n_tokens = T, .token_ids = buf, .positions = buf + T, .token_seq = buf + 2 * T,
                      .n_seqs = (int32_t)hdr[3], .page_table = buf + 3 * T, .max_pages_per_seq = (int32_t)hdr[4],
                      .n_out = (int32_t)hdr[5], .out_rows = buf + 3 * T + hdr[3] * hdr[4], .logits = fb->logits};
    int rc = m->pkg->desc->forward(&m->ctx, &b);
    if (rc) {
        char msg[64];
        snprintf(msg, sizeof msg, "the model rejected rank 0's step (code %d)", rc);
        return follow_fail(t, err, IG_ERR_INTERNAL, "step", msg);
    }
    return IG_OK;
}

/* One command of rank 0 (hdr) on the instances it made. */
static ig_status follow_command(rt_package *p, rt_model **models, const int64_t *hdr, follow_bufs *fb, ig_err *err) {
    rt_tp *t = p->tp;
    int64_t id = hdr[1];
    if (id < 0 || id >= TP_MAX_MODELS) return follow_fail(t, err, IG_ERR_INTERNAL, "command", "model instance out of range");
    if (hdr[0] == TP_CMD_NEW) {
        rt_model_opts o = {.max_tokens = (int32_t)hdr[2], .n_pages = (int32_t)hdr[3], .n_threads = (int32_t)hdr[4],
                           .max_seqs = (int32_t)hdr[5]};
        ig_status st = rt_model_new(p, &o, &models[id], err);
        if (st) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            return follow_fail(t, err, st, "model instance", why);
        }
        return IG_OK;
    }
    if (hdr[0] == TP_CMD_FREE) {
        rt_model_free(models[id]);
        models[id] = NULL;
        return IG_OK;
    }
    if (hdr[0] == TP_CMD_STEP && models[id]) return follow_step(t, models[id], hdr, fb, err);
    return follow_fail(t, err, IG_ERR_INTERNAL, "command", "unknown command or instance");
}

ig_status rt_tp_follow(rt_package *p, ig_err *err) {
    rt_tp *t = p->tp;
    if (!t || t->rank == 0) return ig_fail(err, IG_ERR_INVALID, "rt_tp_follow: not a follower rank of a tensor-parallel package");
    rt_model *models[TP_MAX_MODELS] = {0};
    follow_bufs fb = {0};
    int64_t hdr[TP_HDR];
    ig_status st = IG_OK;
    for (;;) {
        bcast_hdr(t, hdr);
        if (hdr[0] == TP_CMD_EXIT) break;
        if ((st = follow_command(p, models, hdr, &fb, err))) break;
    }
    for (int i = 0; i < TP_MAX_MODELS; i++) rt_model_free(models[i]);
    free(fb.ints);
    free(fb.logits);
    return st;
}

#endif

/* ---- NUMA placement (both builds) */

/* Adds the CPUs of a sysfs list ("0-3,8,10-11") to *set; the number added, -1 if malformed. */
static int parse_cpulist(const char *s, cpu_set_t *set) {
    int n = 0;
    while (*s && *s != '\n') {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0) return -1;
        if (*end == '-') {
            s = end + 1;
            b = strtol(s, &end, 10);
            if (end == s || b < a) return -1;
        }
        for (long c = a; c <= b && c < CPU_SETSIZE; c++, n++) CPU_SET((int)c, set);
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',' && *end != '\n') return -1;
    }
    return n;
}

/* The CPUs of node k under sys_root into *set (cleared first); their number, 0 none, -1 unreadable. */
static int node_cpus(const char *sys_root, int k, cpu_set_t *set) {
    char path[512], line[4096];
    snprintf(path, sizeof path, "%s/devices/system/node/node%d/cpulist", sys_root, k);
    FILE *f = fopen(path, "r");
    CPU_ZERO(set);
    if (!f) return -1;
    int n = fgets(line, sizeof line, f) ? parse_cpulist(line, set) : 0;
    fclose(f);
    return n;
}

int rt_tp_numa_cpus(const char *sys_root, int32_t rank, cpu_set_t *cpus) {
    int with_cpus[256], n = 0;
    cpu_set_t set;
    for (int k = 0; k < 256; k++) /* node ids may have holes: look at every possible one */
        if (node_cpus(sys_root, k, &set) > 0) with_cpus[n++] = k;
    if (n < 2 || rank < 0) return -1;
    return node_cpus(sys_root, with_cpus[rank % n], cpus) > 0 ? with_cpus[rank % n] : -1;
}

void rt_tp_pin_numa(const rt_tp *t, int32_t *node) {
    *node = -1;
    cpu_set_t want, have;
    int k = t ? rt_tp_numa_cpus("/sys", rt_tp_rank(t), &want) : -1;
    if (k < 0) return;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (sched_getaffinity(0, sizeof have, &have) != 0 || CPU_COUNT(&have) < online) return; /* bound by the launcher */
    if (sched_setaffinity(0, sizeof want, &want) == 0) *node = k;
}
