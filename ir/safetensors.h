/* safetensors.h — reading the header of a .safetensors file.
 *
 * A safetensors file is an 8-byte little-endian header length n, n bytes of JSON mapping each
 * tensor name to {dtype, shape, data_offsets: [begin, end]} (offsets relative to the first byte
 * after the header) plus an optional "__metadata__" object of strings, then the data. st_open
 * maps the file, parses the header and validates every entry against the file size, so that a
 * tensor's byte range can be trusted afterwards: errors name the file and the tensor.
 *
 * Sharded checkpoints list their shards in model.safetensors.index.json ("weight_map": tensor
 * name -> shard file name); st_index_load reads that map.
 */
#ifndef IG_SAFETENSORS_H
#define IG_SAFETENSORS_H

#include <stdint.h>
#include "ig_status.h"

typedef enum st_dtype {
    ST_BOOL, ST_U8, ST_I8, ST_I16, ST_U16, ST_I32, ST_U32, ST_I64, ST_U64,
    ST_F16, ST_BF16, ST_F32, ST_F64, ST_F8_E4M3, ST_F8_E5M2,
    ST_DTYPE_COUNT
} st_dtype;

const char *st_dtype_name(st_dtype d); /* "F32", as written in headers */
int st_dtype_size(st_dtype d);         /* bytes per element */

#define ST_MAX_RANK 8

typedef struct st_tensor {
    char *name;
    st_dtype dtype;
    int32_t rank;                  /* 0 (scalar) .. ST_MAX_RANK */
    int64_t shape[ST_MAX_RANK];
    uint64_t offset;               /* absolute byte offset of the data in the file */
    uint64_t nbytes;               /* == product(shape) * st_dtype_size(dtype), checked */
} st_tensor;

typedef struct st_file {
    char *path;                    /* as given to st_open */
    uint64_t size;                 /* file size in bytes */
    uint64_t data_start;           /* 8 + header length */
    const uint8_t *map;            /* whole file, read-only */
    int32_t n_tensors;
    st_tensor *tensors;            /* sorted by name */
} st_file;

/* Maps and validates `path`. *out: free with st_close. */
ig_status st_open(const char *path, st_file **out, ig_err *err);
void st_close(st_file *f);
/* Borrowed from f; NULL when absent. */
const st_tensor *st_find(const st_file *f, const char *name);

/* A model.safetensors.index.json weight map. */
typedef struct st_index {
    int32_t n;                     /* entries */
    char **names;                  /* [n] tensor names */
    int32_t *shard;                /* [n] index into shards */
    int32_t n_shards;
    char **shards;                 /* [n_shards] shard file names (relative to the index's folder),
                                      in sorted order */
} st_index;

/* Reads `path`. *out: free with st_index_free. */
ig_status st_index_load(const char *path, st_index **out, ig_err *err);
void st_index_free(st_index *ix);
/* Shard index for `name`, or -1. */
int32_t st_index_lookup(const st_index *ix, const char *name);

#endif
