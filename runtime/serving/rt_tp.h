/* rt_tp.h — tensor parallelism over MPI: the runtime side of a package sharded with
 * `ignis compile --tp N` (desc.tp == N), started as `mpirun -np N ignis ...`.
 *
 * Rank 0 is the ordinary runtime: engine, scheduler, API and server run there unchanged. Every
 * model instance it makes, every step it runs and every instance it frees is broadcast first
 * (MPI_Bcast of a small command + the step's arrays: token ids, positions, sequences, page table,
 * logits rows), so the other ranks, which run rt_tp_follow, make the same instances (same KV pool
 * size, same threads) and run the same forward on their shard. The generated code's collectives
 * (ig_model_comm) are MPI_Allreduce / MPI_Allgather on a duplicate of MPI_COMM_WORLD. Steps are
 * serialized across the package's instances (one mutex), so the ranks' collectives always match.
 *
 * CUDA packages: the same over MPI, and the device collectives over NCCL (rt_tp_attach_device);
 * rank r uses GPU device_index + r. Built without MPI (CMake found none), rt_tp_open fails with a
 * message saying so. */
#ifndef IG_RT_TP_H
#define IG_RT_TP_H

#include "ig_model_abi.h"
#include "ig_status.h"

typedef struct rt_tp rt_tp;
struct rt_package;
struct rt_model;

/* Joins the MPI job (MPI_Init_thread on first use) for a package of dir sharded over `ranks`;
 * IG_ERR_MISMATCH naming both numbers when the job has another size. *out: free with rt_tp_close. */
ig_status rt_tp_open(int32_t ranks, const char *dir, rt_tp **out, ig_err *err);
/* Rank 0: tells the followers to stop. Every rank: leaves MPI if rt_tp_open started it, except after
 * a failed rt_tp_follow (finalizing would wait for ranks stuck in a collective). NULL is a no-op. */
void rt_tp_close(rt_tp *t);
int32_t rt_tp_rank(const rt_tp *t);
/* A rank > 0 that cannot take part (its package failed to open): rt_tp_close will leave MPI as it
 * is, since finalizing waits for rank 0, which waits for this rank; the process should exit with a
 * non-zero status (mpirun then ends the job). NULL is a no-op. */
void rt_tp_abandon(rt_tp *t);
/* The collectives handed to the generated code (borrowed from t). */
const ig_model_comm *rt_tp_comm(const rt_tp *t);

/* Rank 0, called by rt_model_new / rt_model_free / rt_model_forward (rt_package.c): announce
 * instance m (its opts: max_tokens, n_pages, n_threads, max_seqs), its end, or one step of it,
 * run while holding the step lock (rt_tp_step_end releases it). */
ig_status rt_tp_announce_model(rt_tp *t, struct rt_model *m, ig_err *err);
void rt_tp_announce_free(rt_tp *t, const struct rt_model *m);
ig_status rt_tp_step_begin(rt_tp *t, const struct rt_model *m, const ig_fwd_batch *b, ig_err *err);
void rt_tp_step_end(rt_tp *t);

/* Device targets (CUDA), every rank, after its instance's init (a current device context): the
 * NCCL communicator of the job (libnccl.so.2 opened at run time; its id broadcast over MPI), whose
 * collectives become the device hooks of rt_tp_comm. Once per job; an error when a rank lacks NCCL
 * or the communicator cannot start. */
ig_status rt_tp_attach_device(rt_tp *t, int device, ig_err *err);

/* Ranks > 0, on a package opened with rt_open_opts.tp_follower: serve rank 0's commands on p until
 * rank 0 closes its package (IG_OK), or until a command cannot be carried out (its status and
 * message; the job cannot go on, since rank 0 waits in a collective this rank will not join: the
 * process should exit with a non-zero status, which makes mpirun end the job). Does not close p. */
ig_status rt_tp_follow(struct rt_package *p, ig_err *err);

/* The rank of this process in the MPI job that runs a package sharded over `ranks`, starting MPI if
 * nothing has (*started = 1). Rank 0 that started it: MPI is finalized when the process exits.
 * Other ranks that started it call rt_tp_finalize once they have followed rank 0 to its end (and
 * not after a failure: finalizing waits for every rank). IG_ERR_MISMATCH naming both numbers when
 * the job has another size; without MPI, the error rt_tp_open gives. */
ig_status rt_tp_job_rank(int32_t ranks, const char *dir, int32_t *rank, int *started, ig_err *err);
void rt_tp_finalize(void);

/* NUMA placement of a CPU rank (the seed's one-process-per-node mode): when the machine under
 * sys_root ("/sys" in use; a test gives a fake tree) has more than one NUMA node with CPUs, rank r
 * of the job gets the CPUs of the r-th such node (wrapping) in *cpus; returns that node's id, or -1
 * when there is nothing to pin (one node, or no NUMA information). */
#include <sched.h>
int rt_tp_numa_cpus(const char *sys_root, int32_t rank, cpu_set_t *cpus);
/* Pins this process to its node's CPUs (rt_tp_numa_cpus on /sys) before the weights are mapped,
 * so its threads and its first-touch pages (weights, KV, workspace) are local, unless the launcher
 * has bound it already (e.g. mpirun --bind-to numa: the affinity mask is narrower than the
 * machine). Silent when there is nothing to do; a failed pin is not an error (the run is correct,
 * only slower). Fills *node with the node index used, -1 when not pinned. */
void rt_tp_pin_numa(const rt_tp *t, int32_t *node);

#endif
