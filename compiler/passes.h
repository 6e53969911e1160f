/* passes.h — graph-to-graph rewrites that turn an imported (unfused) model graph into the fused
 * form codegen lowers. Each pass is named, rewrites nodes in place (dead nodes are dropped by a
 * compaction step) and leaves a graph ir_verify accepts. cp_run_all runs the standard pipeline
 * and can dump the graph after each pass.
 *
 * Fusions (ops in ir/ops.def):
 *   fuse_qkv       q/k/v MATMULs sharing an input → one MATMUL on a row-concatenated weight;
 *                  the following HEAD_RMSNORM/ROPE/KV_WRITE chain → ROPE_KV
 *   fuse_gate_up   gate/up MATMULs + SILU_MUL → MATMUL_EPI(swiglu) on a 16-row-interleaved weight
 *   fuse_residual  MATMUL + ADD into the residual stream → MATMUL_EPI(acc)
 *   fuse_norm      RMSNORM feeding exactly one matmul → NORM_MATMUL
 */
#ifndef IG_PASSES_H
#define IG_PASSES_H

#include <stdio.h>
#include "ir.h"

ig_status cp_fuse_qkv(ir_graph *g, ig_err *err);
ig_status cp_fuse_gate_up(ir_graph *g, ig_err *err);
ig_status cp_fuse_residual(ir_graph *g, ig_err *err);
ig_status cp_fuse_norm(ir_graph *g, ig_err *err);
/* Runs every pass in order, verifying after each; if dump is non-NULL writes the graph after
 * each pass to it (borrowed). */
ig_status cp_run_all(ir_graph *g, FILE *dump, ig_err *err);
/* IG_OK if every node is an op codegen lowers (after cp_run_all). */
ig_status cp_check_lowered(const ir_graph *g, ig_err *err);

#endif
