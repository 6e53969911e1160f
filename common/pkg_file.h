/* pkg_file.h — the files of a package, wherever they lie: in the package's directory, or inside a
 * one-file bundle.
 *
 * A bundle (`ignis bundle PKG -o FILE`) is an executable with the package's files appended to it
 * and a directory of them at its very end: a package directory stored in one file. A path
 * "BUNDLE/NAME" names the bundle's file NAME, so every reader of package files (the package
 * loader, the tokenizer, the chat template, the CLI, the server) reads bundles through
 * pkgf_read / pkgf_exists without knowing which kind of package it has. Shared by every layer
 * (the text layer reads tokenizer files through it); includes nothing from runtime/.
 *
 * Layout (little-endian; every offset from the start of the file):
 *   [executable][pad][entry data, each at a 64-byte offset; weights.bin at a page (64 KiB) offset]
 *   [directory: n entries of PKGF_ENTRY_BYTES][trailer: PKGF_TRAILER_BYTES]
 * entry:   name[64] (NUL-padded, no '/'), u64 offset, u64 size, u64 hash, u64 reserved
 * trailer: "IGNISBDL", u32 version (1), u32 n, u64 directory offset, u64 file size, 24 reserved
 *          bytes, "IGNISBDL"
 * The entry "code" is the executable itself (offset 0). Hashes are rt_hash64 values, checked by the
 * package loader (runtime/serving/rt_package.c), not here: this module checks structure only (every
 * entry inside the file, before the directory, entries not overlapping, names unique). */
#ifndef IG_PKG_FILE_H
#define IG_PKG_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "ig_status.h"

enum {
    PKGF_VERSION = 1,
    PKGF_TRAILER_BYTES = 64,
    PKGF_ENTRY_BYTES = 96,
    PKGF_NAME_MAX = 64, /* including the NUL */
    PKGF_MAX_ENTRIES = 64,
    PKGF_WEIGHTS_ALIGN = 65536, /* weights.bin's offset: a multiple of every page size in use (4 KiB, 16 KiB, 64 KiB) */
};
#define PKGF_MAGIC "IGNISBDL"

typedef struct pkgf_entry {
    char name[PKGF_NAME_MAX];
    uint64_t offset, size, hash;
} pkgf_entry;

typedef struct pkgf_bundle {
    uint64_t file_size;
    int32_t n;
    pkgf_entry e[PKGF_MAX_ENTRIES];
} pkgf_bundle;

/* Parses a bundle's directory and trailer from tail, the last tail_len bytes of a file of
 * file_size bytes (tail_len <= file_size; the whole directory must lie in it). Errors (IG_ERR_FORMAT)
 * name what is wrong, prefixed by label. Untrusted input: fuzzed by tests/fuzz/fuzz_bundle.c. */
ig_status pkgf_parse(const char *label, const uint8_t *tail, size_t tail_len, uint64_t file_size, pkgf_bundle *b,
                     ig_err *err);

/* Opens path as a bundle: *b is its directory; *fd (may be NULL: closed) an open read-only
 * descriptor the caller closes. IG_ERR_FORMAT when path is a file but not a (whole) bundle. */
ig_status pkgf_open(const char *path, pkgf_bundle *b, int *fd, ig_err *err);

/* The entry called name, or NULL. */
const pkgf_entry *pkgf_find(const pkgf_bundle *b, const char *name);

/* 1 when path is a regular file (a package given as a file is a bundle), 0 otherwise. */
int pkgf_is_file(const char *path);

/* Reads the file at path, or when a component of path is a file, "BUNDLE/NAME", the entry NAME of
 * that bundle: *data (NUL-terminated, free it) and *len (may be NULL). */
ig_status pkgf_read(const char *path, char **data, size_t *len, ig_err *err);

/* 1 when pkgf_read(path) would find a file (a readable file, or a bundle's entry), 0 otherwise. */
int pkgf_exists(const char *path);

/* The symbol under which a bundle's executable exports the model entry (ig_model_entry) of the
 * package's model object model_file ("model.so" -> "ig_model_entry__model_so"): a fat package's
 * variants are linked side by side under their own names. */
void pkgf_entry_symbol(const char *model_file, char *buf, size_t cap);

/* Writing a bundle: the trailer and directory bytes for b (b->file_size is the file's final size,
 * directory and trailer included) into out, which holds b->n * PKGF_ENTRY_BYTES + PKGF_TRAILER_BYTES
 * bytes. */
void pkgf_encode(const pkgf_bundle *b, uint8_t *out);

#endif
