/* fuzz_gguf.c — the GGUF reader and the GGUF importer (metadata, tensor infos, tokenizer arrays,
 * hyper-parameters) on arbitrary files. */
#include "fuzz_util.h"
#include "gguf.h"
#include "ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *path = fuzz_write("model.gguf", data, n);
    gguf_file *f = NULL;
    ig_err err;
    if (gguf_open(path, &f, &err) == IG_OK) gguf_close(f);
    ir_graph *g = NULL;
    if (ir_import_gguf(path, &g, &err) == IG_OK) ir_graph_free(g);
    return 0;
}
