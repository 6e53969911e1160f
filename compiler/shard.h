/* shard.h — the tensor-parallel sharding pass: turns an imported (unfused) decoder graph into
 * one rank's shard of `ranks`, decided at compile time (`ignis compile --tp N`).
 *
 * Megatron-style split, every rank with the same shapes (so one model.so serves them all and only
 * the weights differ):
 *   attention  q rows by query heads (H / N per rank), k/v rows by KV-head groups (KV / N per rank;
 *              when N > KV each KV head is replicated on the N / KV ranks whose query heads read
 *              it), o columns by the same query heads;
 *   MLP        gate / up rows and down columns by intermediate (I / N per rank);
 *   MoE        every expert's gate / up rows and down columns by its intermediate (and the shared
 *              expert's alike), each rank's share zero-padded to a multiple of 16 rows (moe.c's
 *              panels; zero rows add nothing); the router and the shared expert's gate replicated
 *              (f32, so every rank picks the same experts); the block's output is the rank's
 *              partial sum, all-reduced like the down projection's;
 *   vocabulary embedding rows and lm_head rows by vocab / N (rounded up; the last rank's slice is
 *              padded with zero rows, whose logits are dropped);
 *   norms      replicated; biases of o / down only on rank 0 (they are added once, after the sum).
 * Collectives (ops ALL_REDUCE / ALL_GATHER, lowered to calls of the runtime's ig_model_comm hook):
 * an all-reduce after the embedding, after the attention output projection and after the MLP down
 * projection or MoE block (fused into the residual add by cp_fuse_residual), and an all-gather of
 * the logits.
 * Numerics equal TP 1's up to the order of the partial sums.
 *
 * The pass matches build_decoder.c's graph by its activation names (layers.L.q / k / v / o / g /
 * u / d, logits) and its MoE ops, so it runs right after import, before the fusions. */
#ifndef IG_SHARD_H
#define IG_SHARD_H

#include "ir.h"

/* How one source weight is split: rank r holds [start, start + count) of `axis` (1 rows, 2 cols);
 * axis 0: replicated. */
typedef struct cp_tp_split {
    const char *name; /* borrowed from the graph */
    int32_t axis;
    int64_t full;     /* the dimension's size in the checkpoint */
    int64_t start, count;
} cp_tp_split;

typedef struct cp_tp_plan {
    int32_t n, cap;
    cp_tp_split *v; /* malloc'd; free with cp_tp_plan_free */
} cp_tp_plan;

/* Checks that the model splits over `ranks` (heads, KV heads, intermediate or expert sizes divisible);
 * IG_ERR_UNSUPPORTED naming what does not, else IG_OK. */
ig_status cp_shard_check(const ir_hparams *hp, int32_t ranks, ig_err *err);
/* Rewrites g (unfused, as imported) into rank `rank`'s shard of `ranks` and records the split of
 * every weight it slices in plan (may be NULL). ranks <= 1: nothing to do. */
ig_status cp_shard(ir_graph *g, int32_t rank, int32_t ranks, cp_tp_plan *plan, ig_err *err);
void cp_tp_plan_free(cp_tp_plan *plan);

#endif
