/* fuzz_igraph.c — the serialized graph reader (.igraph, protobuf) on arbitrary files. */
#include "fuzz_util.h"
#include "ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    ir_graph *g = NULL;
    ig_err err;
    if (ir_load(fuzz_write("model.igraph", data, n), &g, &err) == IG_OK) ir_graph_free(g);
    return 0;
}
