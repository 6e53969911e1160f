/* fuzz_bundle.c — the directory and trailer of a one-file bundle (common/pkg_file.c): the input is a
 * whole bundle file; it is parsed from memory (pkgf_parse) and opened from disk (pkgf_open), and every
 * entry it lists is read through a "BUNDLE/NAME" path (pkgf_read), as the loader and tokenizer do.
 * Seeds: tests/fuzz/seeds/bundle/ (a small valid bundle). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "pkg_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    pkgf_bundle *b = malloc(sizeof *b);
    if (!b) abort();
    ig_err err;
    size_t tail = n < PKGF_MAX_ENTRIES * PKGF_ENTRY_BYTES + PKGF_TRAILER_BYTES ? n : PKGF_MAX_ENTRIES * PKGF_ENTRY_BYTES + PKGF_TRAILER_BYTES;
    int ok = pkgf_parse("input", data + (n - tail), tail, n, b, &err) == IG_OK;
    const char *path = fuzz_write("bundle.bin", data, n);
    if ((pkgf_open(path, b, NULL, &err) == IG_OK) != ok) abort(); /* the same verdict from disk */
    for (int32_t k = 0; ok && k < b->n; k++) {
        char p[1024], *text;
        size_t len;
        snprintf(p, sizeof p, "%s/%s", path, b->e[k].name);
        if (pkgf_read(p, &text, &len, &err) != IG_OK || len != b->e[k].size) abort();
        free(text);
    }
    free(b);
    return 0;
}
