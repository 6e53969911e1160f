/* fuzz_manifest.c — the package loader's manifest.json (ABI version, CPU features, generation
 * ids, weight table and hashes) over a real package: the input replaces manifest.json of the
 * llama-gqa package compiled at start-up. */
#include "fuzz_util.h"
#include "rt_package.h"

static char pkg[600];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *p = fuzz_package("manifest-pkg");
    if (!p) abort();
    snprintf(pkg, sizeof pkg, "%s", p);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char path[700];
    snprintf(path, sizeof path, "%s/manifest.json", pkg);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n) fwrite(data, 1, n, f);
    fclose(f);
    rt_package *p = NULL;
    ig_err err;
    rt_open_opts o = {.verify_hashes = 1};
    if (rt_package_open(pkg, &o, &p, &err) == IG_OK) rt_package_close(p);
    return 0;
}
