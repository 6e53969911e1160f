/* fuzz_safetensors.c — the safetensors reader (header JSON, dtypes, offsets) on arbitrary files. */
#include "fuzz_util.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    st_file *f = NULL;
    ig_err err;
    if (st_open(fuzz_write("model.safetensors", data, n), &f, &err) == IG_OK) st_close(f);
    return 0;
}
