/* weak_stubs.c — placeholders for functions defined by modules that may not be in the build yet.
 *
 * ir_dequant (dequant.c) and ir_import_gguf (import_gguf.c) are written separately. Until they
 * land, these weak definitions keep the core library linking and answer IG_ERR_UNSUPPORTED.
 *
 * They live in their own file, not next to their callers, on purpose: in a static archive a
 * weak definition inside the caller's object satisfies the reference, so the linker would never
 * pull the real dequant.o / import_gguf.o in. Here the reference stays undefined until archive
 * search, which takes the first member defining the symbol — dequant.o and import_gguf.o sort
 * before weak_stubs.o. Delete this file once both real definitions exist.
 */
#include "dequant.h"
#include "ir.h"

__attribute__((weak)) ig_status ir_dequant(ir_stype t, const void *src, uint64_t src_nbytes,
                                           int64_t n, float *dst, ig_err *err) {
    return ig_fail(err, IG_ERR_UNSUPPORTED,
                   "storage type %s cannot be read: quantized formats need ir/dequant.c",
                   ir_stype_name(t));
}

__attribute__((weak)) ig_status ir_import_gguf(const char *path, ir_graph **out, ig_err *err) {
    *out = NULL;
    return ig_fail(err, IG_ERR_UNSUPPORTED, "%s: GGUF import is not built in (ir/import_gguf.c)",
                   path);
}
