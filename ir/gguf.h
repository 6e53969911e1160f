/* gguf.h — reading GGUF files (llama.cpp's single-file model format), versions 2 and 3.
 *
 * gguf_open maps the file read-only and parses its header: the metadata key/value pairs (every
 * value type, arrays of strings included) and the tensor infos (name, dims, ggml type, offset).
 * Every length, count and offset is checked against the file size before it is used, so a
 * truncated or corrupt file gives IG_ERR_FORMAT naming the file and the field, never a crash.
 * Strings point into the mapping and are NOT NUL-terminated (gguf_str has the length); keys and
 * tensor names are copied and are NUL-terminated. Everything returned lives until gguf_close.
 *
 * The GGUF/ggml facts used here: magic "GGUF", little-endian; v1 used 32-bit counts (refused);
 * `general.alignment` (default 32) aligns the data section and every tensor offset inside it;
 * dims are listed fastest first (ne[0] is the column count of a row-major matrix).
 *
 * Also here: ir_gguf_read_tokenizer (ir/import_gguf.c), which parses and checks a GGUF's
 * tokenizer metadata into plain data (ir_gguf_tokenizer); compiler/pkg_tokenizer.c turns that into
 * the HF tokenizer.json / tokenizer_config.json a package carries.
 */
#ifndef IG_GGUF_H
#define IG_GGUF_H

#include <stdint.h>
#include "ig_status.h"

/* Metadata value types (GGUF spec numbering). */
typedef enum gguf_vtype {
    GGUF_VT_UINT8 = 0,
    GGUF_VT_INT8 = 1,
    GGUF_VT_UINT16 = 2,
    GGUF_VT_INT16 = 3,
    GGUF_VT_UINT32 = 4,
    GGUF_VT_INT32 = 5,
    GGUF_VT_FLOAT32 = 6,
    GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8,
    GGUF_VT_ARRAY = 9,
    GGUF_VT_UINT64 = 10,
    GGUF_VT_INT64 = 11,
    GGUF_VT_FLOAT64 = 12,
    GGUF_VT_COUNT
} gguf_vtype;

/* ggml tensor type ids that ignis names (others are carried as numbers). */
enum {
    GGML_T_F32 = 0, GGML_T_F16 = 1, GGML_T_Q4_0 = 2, GGML_T_Q4_1 = 3, GGML_T_Q5_0 = 6,
    GGML_T_Q5_1 = 7, GGML_T_Q8_0 = 8, GGML_T_Q4_K = 12, GGML_T_Q5_K = 13, GGML_T_Q6_K = 14,
    GGML_T_BF16 = 30
};

#define GGUF_MAX_DIMS 4

typedef struct gguf_str {
    const char *p;  /* into the mapping, not NUL-terminated */
    uint64_t n;     /* bytes */
} gguf_str;

typedef struct gguf_kv {
    char *key;              /* NUL-terminated */
    gguf_vtype type;
    /* scalars (type != STRING/ARRAY): the value widened; exactly one of these is meaningful
       by type (u for unsigned and bool, i for signed, f for floats) */
    uint64_t u;
    int64_t i;
    double f;
    gguf_str s;             /* type == STRING */
    /* type == ARRAY */
    gguf_vtype arr_type;    /* element type */
    uint64_t arr_n;         /* element count */
    const uint8_t *arr_data;/* first element in the mapping (scalars: packed, little-endian) */
    gguf_str *arr_strs;     /* arr_type == STRING: [arr_n] strings; else NULL */
} gguf_kv;

typedef struct gguf_tensor_info {
    char *name;                 /* NUL-terminated */
    uint32_t n_dims;            /* 1..GGUF_MAX_DIMS */
    int64_t ne[GGUF_MAX_DIMS];  /* elements per dim, fastest first; unused dims are 1 */
    uint32_t type;              /* ggml type id */
    uint64_t offset;            /* bytes from the start of the data section */
    uint64_t file_offset;       /* bytes from the start of the file */
    uint64_t nbytes;            /* stored size (0 when the type's block size is unknown) */
    int64_t n_elements;
} gguf_tensor_info;

typedef struct gguf_file gguf_file;

/* Maps and parses `path`. *out: free with gguf_close. Errors: IG_ERR_IO (cannot open/map),
 * IG_ERR_FORMAT (bad magic, truncated or inconsistent header), IG_ERR_UNSUPPORTED (version 1,
 * big-endian files, versions above 3). */
ig_status gguf_open(const char *path, gguf_file **out, ig_err *err);
void gguf_close(gguf_file *f); /* accepts NULL */

const char *gguf_path(const gguf_file *f);
uint32_t gguf_version(const gguf_file *f);
uint64_t gguf_alignment(const gguf_file *f);
uint64_t gguf_data_offset(const gguf_file *f); /* file offset of the aligned data section */
const uint8_t *gguf_base(const gguf_file *f);  /* the whole mapping */
uint64_t gguf_size(const gguf_file *f);

int64_t gguf_n_kv(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, int64_t i);
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key); /* NULL when absent */

/* Typed getters. Missing key or a type that does not convert: IG_ERR_FORMAT naming the file and
 * key (callers test gguf_find_kv first for optional keys). get_int accepts any integer type and
 * bool; get_float accepts floats and integers; get_str wants a string. */
ig_status gguf_get_int(const gguf_file *f, const char *key, int64_t *out, ig_err *err);
ig_status gguf_get_float(const gguf_file *f, const char *key, double *out, ig_err *err);
ig_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, ig_err *err);
/* An array whose elements have type `elem` (GGUF_VT_COUNT: any). */
ig_status gguf_get_arr(const gguf_file *f, const char *key, gguf_vtype elem, const gguf_kv **out,
                       ig_err *err);
/* Element i of a scalar array, widened (i < kv->arr_n, checked by the caller). */
int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i);
double gguf_arr_float(const gguf_kv *kv, uint64_t i);
/* 1 if the string value equals the C string s. */
int gguf_str_eq(gguf_str a, const char *s);

int64_t gguf_n_tensors(const gguf_file *f);
const gguf_tensor_info *gguf_tensor_at(const gguf_file *f, int64_t i);
const gguf_tensor_info *gguf_find_tensor(const gguf_file *f, const char *name); /* NULL: absent */

/* ggml type traits: elements per block and bytes per block; 0 on both for unknown ids. */
void gguf_type_block(uint32_t type, int *block_elems, int *block_bytes);
const char *gguf_type_name(uint32_t type); /* "Q4_K"; NULL for unknown ids */
const char *gguf_vtype_name(gguf_vtype t);

/* A GGUF's tokenizer metadata (tokenizer.ggml.*, tokenizer.chat_template), checked and copied
 * out of the file, so it outlives gguf_close. Every string is a NUL-terminated malloc'd copy owned
 * by the struct; free the whole with ir_gguf_tokenizer_free. */
typedef enum ir_tok_model {
    IR_TOK_BPE = 0, /* tokenizer.ggml.model "gpt2": byte-level BPE */
    IR_TOK_SPM = 1  /* "llama": SentencePiece BPE with byte fallback */
} ir_tok_model;

typedef struct ir_gguf_tokenizer {
    ir_tok_model model;
    char *pre;            /* tokenizer.ggml.pre, "" when absent */
    uint64_t pre_len;     /* its bytes (the key may hold a NUL: compare with the length) */
    int32_t n_tokens;     /* >= 1 */
    char **tokens;        /* [n_tokens] the bytes as stored (never containing NUL) */
    int64_t *token_type;  /* [n_tokens] tokenizer.ggml.token_type, or NULL when absent */
    double *scores;       /* [n_tokens] tokenizer.ggml.scores (SPM only), else NULL */
    int64_t n_merges;     /* -1: the file has no tokenizer.ggml.merges */
    char **merges;        /* [n_merges] "left right" (checked) */
    int32_t bos, eos, unk, pad; /* token ids, -1 when absent or out of range */
    int add_bos, add_eos;       /* tokenizer.ggml.add_{bos,eos}_token (defaults: SPM, 0) */
    int add_space_prefix;       /* tokenizer.ggml.add_space_prefix (default 1) */
    char *chat_template;        /* tokenizer.chat_template, or NULL */
    int has_context_length;     /* llama.context_length is a number ... */
    uint64_t context_length;    /* ... and this is its value as stored */
} ir_gguf_tokenizer;

/* Reads the tokenizer metadata of the GGUF at gguf_path. *out: free with ir_gguf_tokenizer_free.
 * Models other than "gpt2" and "llama": IG_ERR_UNSUPPORTED; missing or malformed keys:
 * IG_ERR_FORMAT naming the file and key. */
ig_status ir_gguf_read_tokenizer(const char *gguf_path, ir_gguf_tokenizer **out, ig_err *err);
void ir_gguf_tokenizer_free(ir_gguf_tokenizer *t); /* accepts NULL */

#endif
