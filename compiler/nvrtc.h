/* nvrtc.h — compiling generated CUDA C to cubin/PTX at package-build time through NVRTC.
 *
 * NVRTC is opened with dlopen, so ignis builds and runs (for CPU targets) where no CUDA toolkit
 * is installed; only `--target cuda:...` needs it, and its absence is a clear error. No GPU is
 * needed: NVRTC compiles for any architecture. */
#ifndef IG_NVRTC_H
#define IG_NVRTC_H

#include <stddef.h>
#include "ig_status.h"

/* Compiles `source` (named `name` in messages) for `arch`: "sm_80" → cubin, "compute_90" → PTX
 * (NUL-terminated). include_dir: where the templates are. *out: malloc'd, free(). */
ig_status nv_compile(const char *source, const char *name, const char *arch, const char *include_dir,
                     unsigned char **out, size_t *out_len, ig_err *err);

#endif
