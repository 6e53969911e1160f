/* fuzz_config.c — the HF importer's config.json (hyper-parameters, rope scaling, special token
 * ids, layer count) over a real checkpoint: the input is config.json beside the llama-gqa test
 * model's safetensors file. */
#include "fuzz_util.h"
#include "ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    static int linked;
    char dst[600], src[1024];
    if (!linked) {
        snprintf(src, sizeof src, "%s/models/llama-gqa/model.safetensors", fuzz_testdata());
        if (src[0] != '/') { /* symlink targets are relative to the link */
            char cwd[512];
            if (!getcwd(cwd, sizeof cwd)) abort();
            char abs[1600];
            snprintf(abs, sizeof abs, "%s/%s", cwd, src);
            snprintf(src, sizeof src, "%s", abs);
        }
        snprintf(dst, sizeof dst, "%s/model.safetensors", fuzz_dir());
        unlink(dst);
        if (symlink(src, dst)) abort();
        linked = 1;
    }
    fuzz_write("config.json", data, n);
    ir_graph *g = NULL;
    ig_err err;
    if (ir_import_hf(fuzz_dir(), &g, &err) == IG_OK) ir_graph_free(g);
    return 0;
}
