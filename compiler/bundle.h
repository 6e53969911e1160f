/* bundle.h — `ignis bundle PKG -o FILE`: one self-contained executable from a CPU package.
 *
 * The executable is the bundle runtime (bundle-runtime/ of a build: tools/bundle_main.c, the CLI,
 * the server and libignis in one archive, linked with static libprotobuf-c, cJSON, libmicrohttpd
 * and libgomp; glibc stays a shared library) linked with the package's model object(s) (model.o, a
 * fat package's model-TARGET.o of the runtime's architecture: hidden symbols made local, the entry
 * renamed to pkgf_entry_symbol's name and exported), followed by the package's files (manifest,
 * tokenizer files, weights.bin at a page-aligned offset) and the directory of pkg_file.h. */
#ifndef IG_BUNDLE_H
#define IG_BUNDLE_H

#include <stdint.h>
#include <stdio.h>

#include "ig_status.h"

typedef struct bd_options {
    const char *pkg;      /* package directory */
    const char *out;      /* the executable to write */
    const char *runtime;  /* a bundle-runtime folder; NULL: the one beside the running ignis (or its ../lib/ignis/) */
    FILE *log;            /* progress lines, or NULL */
} bd_options;

typedef struct bd_report {
    uint64_t file_bytes;    /* the whole bundle */
    uint64_t weights_bytes; /* weights.bin */
    uint64_t code_bytes;    /* the executable part */
    int32_t n_variants;     /* model objects linked in */
} bd_report;

ig_status bd_bundle(const bd_options *o, bd_report *r, ig_err *err);

#endif
