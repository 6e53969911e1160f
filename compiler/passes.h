/* passes.h — graph-to-graph rewrites that turn an imported (unfused) model graph into the fused
 * form codegen lowers. Each pass is named, rewrites nodes in place (dead nodes are dropped by a
 * compaction step) and leaves a graph ir_verify accepts. cp_run_all runs the standard pipeline
 * and can dump the graph after each pass.
 *
 * Fusions (ops in ir/ops.def):
 *   fuse_qkv       q/k/v MATMULs sharing an input → one MATMUL on a row-concatenated weight;
 *                  the following HEAD_RMSNORM/ROPE/KV_WRITE chain → ROPE_KV
 *   fuse_gate_up   gate/up MATMULs + SILU_MUL (GELU_MUL) → MATMUL_EPI(swiglu / geglu) on a
 *                  16-row-interleaved weight
 *   fuse_post_norm RMSNORM of a matmul output + residual ADD → NORM_ADD (GLM-4, Gemma 3)
 *   fuse_residual  MATMUL + ADD into the residual stream → MATMUL_EPI(acc); a tensor-parallel
 *                  ALL_REDUCE + ADD → ALL_REDUCE(acc) (compiler/shard.c)
 *   fuse_moe       MOE / MOE_SHARED + ADD into the residual stream → the same op with epi acc
 *   fuse_norm      RMSNORM feeding exactly one matmul → NORM_MATMUL
 *   lower_matmul   any MATMUL left → MATMUL_EPI(store)
 */
#ifndef IG_PASSES_H
#define IG_PASSES_H

#include <stdio.h>
#include "ir.h"

ig_status cp_fuse_qkv(ir_graph *g, ig_err *err);
ig_status cp_fuse_gate_up(ir_graph *g, ig_err *err);
/* RMSNORM of a layer's matmul output feeding only a residual ADD (post-norms) -> NORM_ADD. */
ig_status cp_fuse_post_norm(ir_graph *g, ig_err *err);
ig_status cp_fuse_residual(ir_graph *g, ig_err *err);
/* MOE / MOE_SHARED + residual ADD -> the MoE op accumulating into the residual stream (epi acc). */
ig_status cp_fuse_moe(ir_graph *g, ig_err *err);
ig_status cp_fuse_norm(ir_graph *g, ig_err *err);
/* Every MATMUL left unfused becomes MATMUL_EPI with the store epilogue. */
ig_status cp_lower_matmul(ir_graph *g, ig_err *err);
/* Runs every pass in order, verifying after each; if dump is non-NULL writes the graph after
 * each pass to it (borrowed). */
ig_status cp_run_all(ir_graph *g, FILE *dump, ig_err *err);
/* IG_OK if every node is an op codegen lowers (after cp_run_all). */
ig_status cp_check_lowered(const ir_graph *g, ig_err *err);

#endif
