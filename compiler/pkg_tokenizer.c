/* pkg_tokenizer.c — a GGUF package's HF tokenizer files from its tokenizer metadata (see
 * pkg_tokenizer.h). The merges a vocabulary implies, the byte-level alphabet and the
 * pre-tokenizer regexes are here; the metadata itself is read and checked by the importer
 * (ir_gguf_read_tokenizer). */
#include "pkg_tokenizer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* A byte string (a token, the pre-tokenizer name); NUL-terminated when it comes from a C string. */
typedef struct pt_str {
    const char *p;
    uint64_t n;
} pt_str;

static pt_str pt_of(const char *s) { return (pt_str){s, strlen(s)}; }

/* 1 if s equals the C string c. */
static int str_eq(pt_str s, const char *c) { return s.n == strlen(c) && !memcmp(s.p, c, s.n); }

static void free_strs(char **v, int32_t n) {
    for (int32_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* token string -> id (last occurrence wins, like a Python dict built in order; or the first) */
typedef struct tok_map {
    uint64_t cap;     /* power of two */
    int32_t *slot;    /* [cap] token id or -1 */
    const pt_str *toks;
} tok_map;

static uint64_t hash_bytes(const char *p, uint64_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static int map_init(tok_map *m, const pt_str *toks, int32_t n, int keep_first) {
    m->cap = 16;
    while (m->cap < (uint64_t)n * 2) m->cap <<= 1;
    m->toks = toks;
    m->slot = malloc(m->cap * sizeof *m->slot);
    if (!m->slot) return 0;
    memset(m->slot, 0xff, m->cap * sizeof *m->slot);
    for (int32_t i = 0; i < n; i++) {
        uint64_t j = hash_bytes(toks[i].p, toks[i].n) & (m->cap - 1);
        for (;; j = (j + 1) & (m->cap - 1)) {
            int32_t s = m->slot[j];
            if (s < 0 || (toks[s].n == toks[i].n && !memcmp(toks[s].p, toks[i].p, toks[i].n))) {
                if (s < 0 || !keep_first) m->slot[j] = i;
                break;
            }
        }
    }
    return 1;
}

static int32_t map_get(const tok_map *m, const char *p, uint64_t n) {
    uint64_t j = hash_bytes(p, n) & (m->cap - 1);
    for (;; j = (j + 1) & (m->cap - 1)) {
        int32_t s = m->slot[j];
        if (s < 0) return -1;
        if (m->toks[s].n == n && !memcmp(m->toks[s].p, p, n)) return s;
    }
}

typedef struct merge_cand {
    int32_t l, r;     /* token ids */
    uint32_t nl, nr;  /* lengths in code points */
    uint32_t off;     /* split byte offset inside the merged token */
    int32_t tok;      /* merged token id */
    double score;
    uint64_t seq;     /* order of discovery, for a stable sort */
} merge_cand;

static int utf8_len(uint8_t b) {
    return b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
}

static uint32_t cp_count(const char *p, uint64_t n) {
    uint32_t k = 0;
    for (uint64_t i = 0; i < n; i += (uint64_t)utf8_len((uint8_t)p[i])) k++;
    return k;
}

static int cmp_local(const void *a, const void *b) {
    const merge_cand *x = a, *y = b;
    if (x->l != y->l) return x->l < y->l ? -1 : 1;
    if (x->r != y->r) return x->r < y->r ? -1 : 1;
    return 0;
}

static int cmp_global_asc(const void *a, const void *b) {
    const merge_cand *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    if (x->nl != y->nl) return x->nl < y->nl ? -1 : 1;
    if (x->nr != y->nr) return x->nr < y->nr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_global_desc(const void *a, const void *b) {
    const merge_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->nl != y->nl) return x->nl > y->nl ? -1 : 1;
    if (x->nr != y->nr) return x->nr > y->nr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq; /* Python's reverse sort stays stable */
}

/* Merges implied by a vocabulary, the way transformers' generate_merges does it: every split of
 * every token into two vocabulary tokens, ordered per token by (left id, right id), then over all
 * by (score, left length, right length) — descending when scores are given (SentencePiece), by
 * token id ascending otherwise. *out: free(). */
static ig_status derive_merges(const pt_str *toks, int32_t n, const tok_map *m,
                               const tok_map *first, const double *scores, merge_cand **out, int64_t *n_out,
                               ig_err *err) {
    int64_t cap = 1024, cnt = 0;
    merge_cand *v = malloc((size_t)cap * sizeof *v);
    if (!v) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        const pt_str t = toks[i];
        /* dict order: a repeated token is visited once, at its first position, with the id
           (and score) of its last */
        if (map_get(first, t.p, t.n) != i) continue;
        int32_t last_id = map_get(m, t.p, t.n);
        double score = scores ? scores[last_id] : (double)last_id;
        int64_t start = cnt;
        for (uint64_t off = (uint64_t)utf8_len((uint8_t)t.p[0]); off < t.n;
             off += (uint64_t)utf8_len((uint8_t)t.p[off])) {
            int32_t l = map_get(m, t.p, off), r = map_get(m, t.p + off, t.n - off);
            if (l < 0 || r < 0) continue;
            if (cnt == cap) {
                cap *= 2;
                merge_cand *nv = realloc(v, (size_t)cap * sizeof *nv);
                if (!nv) {
                    free(v);
                    return ig_fail(err, IG_ERR_NOMEM, "out of memory");
                }
                v = nv;
            }
            v[cnt++] = (merge_cand){l, r, cp_count(t.p, off), cp_count(t.p + off, t.n - off),
                                    (uint32_t)off, i, score, 0};
        }
        if (cnt - start > 1) qsort(v + start, (size_t)(cnt - start), sizeof *v, cmp_local);
    }
    for (int64_t i = 0; i < cnt; i++) v[i].seq = (uint64_t)i;
    qsort(v, (size_t)cnt, sizeof *v, scores ? cmp_global_desc : cmp_global_asc);
    *out = v;
    *n_out = cnt;
    return IG_OK;
}

/* GPT-2 byte-to-unicode table: printable bytes map to themselves, the rest to U+0100... */
static void byte_alphabet(uint32_t cp_of[256]) {
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        cp_of[b] = keep ? (uint32_t)b : next++;
    }
}

static int in_alphabet(uint32_t cp) {
    return (cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 323);
}

/* Decodes one UTF-8 code point; returns its length, 0 when invalid. */
static int utf8_dec(const uint8_t *p, uint64_t n, uint32_t *cp) {
    int len = utf8_len(p[0]);
    if (p[0] >= 0x80 && len == 1) return 0;
    if ((uint64_t)len > n) return 0;
    uint32_t c = len == 1 ? p[0] : len == 2 ? p[0] & 0x1f : len == 3 ? p[0] & 0x0f : p[0] & 0x07;
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    *cp = c;
    return len;
}

static size_t utf8_enc(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    o[0] = (char)(0xe0 | cp >> 12);
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
}

/* 1 if every code point of s is in the byte-level alphabet. */
static int all_in_alphabet(pt_str s) {
    uint64_t i = 0;
    while (i < s.n) {
        uint32_t cp;
        int k = utf8_dec((const uint8_t *)s.p + i, s.n - i, &cp);
        if (!k || !in_alphabet(cp)) return 0;
        i += (uint64_t)k;
    }
    return 1;
}

/* NUL-terminated copy of s; byte-level respelling when `respell` (each byte -> its alphabet
 * character). free(). */
static char *tok_cstr(pt_str s, int respell, const uint32_t *cp_of) {
    char *o = malloc(respell ? s.n * 2 + 1 : s.n + 1), *q = o;
    if (!o) return NULL;
    if (!respell) {
        memcpy(o, s.p, s.n);
        o[s.n] = 0;
        return o;
    }
    for (uint64_t i = 0; i < s.n; i++) q += utf8_enc(cp_of[(uint8_t)s.p[i]], q);
    *q = 0;
    return o;
}

/* Split regexes per tokenizer.ggml.pre (from transformers' GGUF tokenizer mapping and the
 * models' tokenizer.json files). NULL regex: the GPT-2 pattern built into ByteLevel. */
static const char *const LLAMA3_SPLIT =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const QWEN2_SPLIT =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const TEKKEN_SPLIT =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const GPT4O_SPLIT =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const struct { const char *pre; const char *const *re; } pre_splits[] = {
    {"llama3", &LLAMA3_SPLIT}, {"llama-v3", &LLAMA3_SPLIT}, {"llama-bpe", &LLAMA3_SPLIT},
    {"falcon3", &LLAMA3_SPLIT}, {"pixtral", &LLAMA3_SPLIT}, {"dbrx", &LLAMA3_SPLIT},
    {"smaug-bpe", &LLAMA3_SPLIT}, {"tekken", &TEKKEN_SPLIT}, {"qwen2", &QWEN2_SPLIT},
    {"deepseek-r1-qwen", &QWEN2_SPLIT}, {"megrez", &QWEN2_SPLIT}, {"gpt-4o", &GPT4O_SPLIT},
    {"llama4", &GPT4O_SPLIT},
};

static cJSON *byte_level(int add_prefix_space, int trim_offsets, int use_regex) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", add_prefix_space);
    cJSON_AddBoolToObject(o, "trim_offsets", trim_offsets);
    cJSON_AddBoolToObject(o, "use_regex", use_regex);
    return o;
}

static cJSON *pre_tokenizer_for(pt_str pre) {
    for (size_t i = 0; i < sizeof pre_splits / sizeof pre_splits[0]; i++) {
        if (!str_eq(pre, pre_splits[i].pre)) continue;
        cJSON *seq = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *sp = cJSON_CreateObject(),
              *pat = cJSON_CreateObject();
        cJSON_AddStringToObject(seq, "type", "Sequence");
        cJSON_AddStringToObject(sp, "type", "Split");
        cJSON_AddStringToObject(pat, "Regex", *pre_splits[i].re);
        cJSON_AddItemToObject(sp, "pattern", pat);
        cJSON_AddStringToObject(sp, "behavior", "Isolated");
        cJSON_AddBoolToObject(sp, "invert", 0);
        cJSON_AddItemToArray(arr, sp);
        cJSON_AddItemToArray(arr, byte_level(0, 1, 0));
        cJSON_AddItemToObject(seq, "pretokenizers", arr);
        return seq;
    }
    if (str_eq(pre, "smollm")) {
        /* SmolLM / SmolLM2's own tokenizer.json: digits one by one, then GPT-2 byte level */
        cJSON *seq = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *dg = cJSON_CreateObject();
        cJSON_AddStringToObject(seq, "type", "Sequence");
        cJSON_AddStringToObject(dg, "type", "Digits");
        cJSON_AddBoolToObject(dg, "individual_digits", 1);
        cJSON_AddItemToArray(arr, dg);
        cJSON_AddItemToArray(arr, byte_level(0, 1, 1));
        cJSON_AddItemToObject(seq, "pretokenizers", arr);
        return seq;
    }
    /* "default", "gpt2", absent, and names without a known pattern: GPT-2's regex, as
       transformers does */
    return byte_level(0, 1, 1);
}

static cJSON *template_processing(const char *bos, int32_t bos_id, const char *eos, int32_t eos_id) {
    cJSON *tp = cJSON_CreateObject(), *single = cJSON_CreateArray(), *pair = cJSON_CreateArray(),
          *sp = cJSON_CreateObject();
    cJSON_AddStringToObject(tp, "type", "TemplateProcessing");
    for (int p = 0; p < 2; p++) {
        cJSON *arr = p ? pair : single;
        for (int seg = 0; seg <= p; seg++) {
            const char *names[3] = {bos, seg ? "B" : "A", eos};
            for (int k = 0; k < 3; k++) {
                if (!names[k]) continue;
                cJSON *e = cJSON_CreateObject(), *in = cJSON_CreateObject();
                cJSON_AddStringToObject(in, "id", names[k]);
                cJSON_AddNumberToObject(in, "type_id", seg);
                cJSON_AddItemToObject(e, k == 1 ? "Sequence" : "SpecialToken", in);
                cJSON_AddItemToArray(arr, e);
            }
        }
    }
    cJSON_AddItemToObject(tp, "single", single);
    cJSON_AddItemToObject(tp, "pair", pair);
    for (int k = 0; k < 2; k++) {
        const char *t = k ? eos : bos;
        if (!t || cJSON_GetObjectItemCaseSensitive(sp, t)) continue;
        cJSON *o = cJSON_CreateObject(), *ids = cJSON_CreateArray(), *ts = cJSON_CreateArray();
        cJSON_AddStringToObject(o, "id", t);
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(k ? eos_id : bos_id));
        cJSON_AddItemToArray(ts, cJSON_CreateString(t));
        cJSON_AddItemToObject(o, "ids", ids);
        cJSON_AddItemToObject(o, "tokens", ts);
        cJSON_AddItemToObject(sp, t, o);
    }
    cJSON_AddItemToObject(tp, "special_tokens", sp);
    return tp;
}

static ig_status write_json(const char *dir, const char *name, cJSON *j, ig_err *err) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *s = cJSON_Print(j);
    if (!s) return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory while formatting", path);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(s);
        return ig_fail(err, IG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    }
    size_t n = strlen(s);
    int bad = fwrite(s, 1, n, fp) != n || fputc('\n', fp) == EOF;
    bad |= fclose(fp) != 0;
    free(s);
    if (bad) return ig_fail(err, IG_ERR_IO, "%s: write failed", path);
    return IG_OK;
}

/* ---- tokenizer.json */

/* The vocabulary as tokenizer.json spells it: byte-level BPE respells tokens that are not in its
 * alphabet. [n_tokens] malloc'd strings, or NULL when out of memory; free with free_strs. */
static char **spell_tokens(const ir_gguf_tokenizer *t, const uint32_t *cp_of) {
    char **cstr = calloc((size_t)t->n_tokens, sizeof *cstr);
    if (!cstr) return NULL;
    for (int32_t i = 0; i < t->n_tokens; i++) {
        pt_str s = pt_of(t->tokens[i]);
        int respell = t->model == IR_TOK_BPE && !all_in_alphabet(s);
        if (!(cstr[i] = tok_cstr(s, respell, cp_of))) {
            free_strs(cstr, i);
            return NULL;
        }
    }
    return cstr;
}

/* added tokens: control (3) and unknown (2) as special, user-defined (4) as plain; the named
   special tokens too */
static void add_added_tokens(cJSON *tj, const ir_gguf_tokenizer *t, char *const *cstr) {
    int bpe = t->model == IR_TOK_BPE, spm = !bpe;
    cJSON *added = cJSON_AddArrayToObject(tj, "added_tokens");
    for (int32_t i = 0; i < t->n_tokens; i++) {
        int64_t ty = t->token_type ? t->token_type[i] : 1;
        int special = ty == 3 || (spm && ty == 2) || i == t->bos || i == t->eos || i == t->unk || i == t->pad;
        int plain = ty == 4;
        if (bpe && special && !all_in_alphabet(pt_of(t->tokens[i]))) special = 0; /* llama.cpp mislabel */
        if (bpe && plain && !all_in_alphabet(pt_of(t->tokens[i]))) plain = 0;
        if (!special && !plain) continue;
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", i);
        cJSON_AddStringToObject(a, "content", cstr[i]);
        cJSON_AddBoolToObject(a, "single_word", 0);
        cJSON_AddBoolToObject(a, "lstrip", 0);
        cJSON_AddBoolToObject(a, "rstrip", 0);
        cJSON_AddBoolToObject(a, "normalized", 0);
        cJSON_AddBoolToObject(a, "special", special);
        cJSON_AddItemToArray(added, a);
    }
}

/* The TemplateProcessing post-processor when BOS / EOS are added, else NULL. */
static cJSON *bos_eos_processor(const ir_gguf_tokenizer *t, char *const *cstr) {
    const char *bos_s = t->bos >= 0 ? cstr[t->bos] : NULL, *eos_s = t->eos >= 0 ? cstr[t->eos] : NULL;
    if (!((t->add_bos && bos_s) || (t->add_eos && eos_s))) return NULL;
    return template_processing(t->add_bos ? bos_s : NULL, t->bos, t->add_eos ? eos_s : NULL, t->eos);
}

/* normalizer, pre_tokenizer, post_processor, decoder of byte-level BPE */
static void add_bpe_pipeline(cJSON *tj, const ir_gguf_tokenizer *t, char *const *cstr) {
    cJSON_AddNullToObject(tj, "normalizer");
    cJSON_AddItemToObject(tj, "pre_tokenizer", pre_tokenizer_for((pt_str){t->pre, t->pre_len}));
    cJSON *bl = byte_level(1, 0, 1), *tp = bos_eos_processor(t, cstr);
    if (tp) {
        cJSON *seq = cJSON_CreateObject(), *arr = cJSON_CreateArray();
        cJSON_AddStringToObject(seq, "type", "Sequence");
        cJSON_AddItemToArray(arr, bl);
        cJSON_AddItemToArray(arr, tp);
        cJSON_AddItemToObject(seq, "processors", arr);
        cJSON_AddItemToObject(tj, "post_processor", seq);
    } else {
        cJSON_AddItemToObject(tj, "post_processor", bl);
    }
    cJSON_AddItemToObject(tj, "decoder", byte_level(1, 1, 1));
}

/* {"type": "Replace", "pattern": {"String": from}, "content": to} */
static cJSON *replace(const char *from, const char *to) {
    cJSON *rp = cJSON_CreateObject(), *pat = cJSON_CreateObject();
    cJSON_AddStringToObject(rp, "type", "Replace");
    cJSON_AddStringToObject(pat, "String", from);
    cJSON_AddItemToObject(rp, "pattern", pat);
    cJSON_AddStringToObject(rp, "content", to);
    return rp;
}

/* the Llama-2 tokenizer.json shape: prefix space and spaces as U+2581 by normalizer */
static void add_spm_pipeline(cJSON *tj, const ir_gguf_tokenizer *t, char *const *cstr) {
    if (t->add_space_prefix) {
        cJSON *nz = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *pp = cJSON_CreateObject();
        cJSON_AddStringToObject(nz, "type", "Sequence");
        cJSON_AddStringToObject(pp, "type", "Prepend");
        cJSON_AddStringToObject(pp, "prepend", "\xe2\x96\x81");
        cJSON_AddItemToArray(arr, pp);
        cJSON_AddItemToArray(arr, replace(" ", "\xe2\x96\x81"));
        cJSON_AddItemToObject(nz, "normalizers", arr);
        cJSON_AddItemToObject(tj, "normalizer", nz);
    } else {
        cJSON_AddItemToObject(tj, "normalizer", replace(" ", "\xe2\x96\x81"));
    }
    cJSON_AddNullToObject(tj, "pre_tokenizer");
    cJSON *tp = bos_eos_processor(t, cstr);
    if (tp) cJSON_AddItemToObject(tj, "post_processor", tp);
    else cJSON_AddNullToObject(tj, "post_processor");
    cJSON *dec = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *bf = cJSON_CreateObject(),
          *fu = cJSON_CreateObject();
    cJSON_AddStringToObject(dec, "type", "Sequence");
    cJSON_AddItemToArray(arr, replace("\xe2\x96\x81", " "));
    cJSON_AddStringToObject(bf, "type", "ByteFallback");
    cJSON_AddItemToArray(arr, bf);
    cJSON_AddStringToObject(fu, "type", "Fuse");
    cJSON_AddItemToArray(arr, fu);
    if (t->add_space_prefix) {
        cJSON *sp = cJSON_CreateObject();
        cJSON_AddStringToObject(sp, "type", "Strip");
        cJSON_AddStringToObject(sp, "content", " ");
        cJSON_AddNumberToObject(sp, "start", 1);
        cJSON_AddNumberToObject(sp, "stop", 0);
        cJSON_AddItemToArray(arr, sp);
    }
    cJSON_AddItemToObject(dec, "decoders", arr);
    cJSON_AddItemToObject(tj, "decoder", dec);
}

/* No merges in the file: recovers them from the vocabulary (scores for SentencePiece) into mj. */
static ig_status add_derived_merges(cJSON *mj, const ir_gguf_tokenizer *t, char *const *cstr, ig_err *err) {
    int32_t n = t->n_tokens;
    tok_map map = {0}, map_first = {0};
    merge_cand *mc = NULL;
    int64_t n_mc = 0;
    ig_status st = IG_OK;
    pt_str *sp_toks = malloc((size_t)n * sizeof *sp_toks);
    if (sp_toks) {
        for (int32_t i = 0; i < n; i++) sp_toks[i] = pt_of(cstr[i]);
    }
    if (!sp_toks || !map_init(&map, sp_toks, n, 0) || !map_init(&map_first, sp_toks, n, 1))
        st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    if (!st) st = derive_merges(sp_toks, n, &map, &map_first, t->scores, &mc, &n_mc, err);
    for (int64_t i = 0; !st && i < n_mc; i++) {
        const merge_cand *m = &mc[i];
        size_t ll = strlen(cstr[m->l]), lr = strlen(cstr[m->r]);
        char *c = malloc(ll + lr + 2);
        if (!c) {
            st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(c, cstr[m->l], ll);
        c[ll] = ' ';
        memcpy(c + ll + 1, cstr[m->r], lr + 1);
        cJSON_AddItemToArray(mj, cJSON_CreateString(c));
        free(c);
    }
    free(sp_toks);
    free(map.slot);
    free(map_first.slot);
    free(mc);
    return st;
}

/* "model": the BPE model with its vocabulary and merges */
static ig_status add_model(cJSON *tj, const ir_gguf_tokenizer *t, char *const *cstr, ig_err *err) {
    int spm = t->model == IR_TOK_SPM;
    cJSON *mod = cJSON_AddObjectToObject(tj, "model");
    cJSON_AddStringToObject(mod, "type", "BPE");
    cJSON_AddNullToObject(mod, "dropout");
    if (spm && t->unk >= 0) cJSON_AddStringToObject(mod, "unk_token", cstr[t->unk]);
    else cJSON_AddNullToObject(mod, "unk_token");
    if (spm) {
        cJSON_AddNullToObject(mod, "continuing_subword_prefix");
        cJSON_AddNullToObject(mod, "end_of_word_suffix");
    } else {
        cJSON_AddStringToObject(mod, "continuing_subword_prefix", "");
        cJSON_AddStringToObject(mod, "end_of_word_suffix", "");
    }
    cJSON_AddBoolToObject(mod, "fuse_unk", spm);
    cJSON_AddBoolToObject(mod, "byte_fallback", spm);
    cJSON_AddBoolToObject(mod, "ignore_merges", 0);
    cJSON *voc = cJSON_AddObjectToObject(mod, "vocab");
    for (int32_t i = 0; i < t->n_tokens; i++) cJSON_AddItemToObject(voc, cstr[i], cJSON_CreateNumber(i));
    cJSON *mj = cJSON_AddArrayToObject(mod, "merges");
    if (t->n_merges < 0) return add_derived_merges(mj, t, cstr, err);
    for (int64_t i = 0; i < t->n_merges; i++) cJSON_AddItemToArray(mj, cJSON_CreateString(t->merges[i]));
    return IG_OK;
}

/* ---- tokenizer_config.json */

static cJSON *config_json(const ir_gguf_tokenizer *t, char *const *cstr) {
    int bpe = t->model == IR_TOK_BPE;
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddBoolToObject(cfg, "add_bos_token", t->add_bos);
    cJSON_AddBoolToObject(cfg, "add_eos_token", t->add_eos);
    if (bpe) cJSON_AddBoolToObject(cfg, "add_prefix_space", 0);
    const struct { const char *k; int32_t id; } named[] = {
        {"bos_token", t->bos}, {"eos_token", t->eos}, {"unk_token", t->unk}, {"pad_token", t->pad}};
    for (int k = 0; k < 4; k++) {
        if (named[k].id >= 0) cJSON_AddStringToObject(cfg, named[k].k, cstr[named[k].id]);
        else cJSON_AddNullToObject(cfg, named[k].k);
    }
    if (t->chat_template) cJSON_AddStringToObject(cfg, "chat_template", t->chat_template);
    cJSON_AddBoolToObject(cfg, "clean_up_tokenization_spaces", 0);
    if (t->has_context_length) cJSON_AddNumberToObject(cfg, "model_max_length", (double)t->context_length);
    cJSON_AddStringToObject(cfg, "tokenizer_class", bpe ? "GPT2Tokenizer" : "LlamaTokenizer");
    return cfg;
}

ig_status pt_write_tokenizer(const ir_gguf_tokenizer *t, const char *out_dir, ig_err *err) {
    uint32_t cp_of[256];
    byte_alphabet(cp_of);
    char **cstr = spell_tokens(t, cp_of);
    if (!cstr) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    cJSON *tj = cJSON_CreateObject();
    cJSON_AddStringToObject(tj, "version", "1.0");
    cJSON_AddNullToObject(tj, "truncation");
    cJSON_AddNullToObject(tj, "padding");
    add_added_tokens(tj, t, cstr);
    if (t->model == IR_TOK_BPE) add_bpe_pipeline(tj, t, cstr);
    else add_spm_pipeline(tj, t, cstr);
    ig_status st = add_model(tj, t, cstr, err);
    if (!st) st = write_json(out_dir, "tokenizer.json", tj, err);
    cJSON_Delete(tj);
    if (!st) {
        cJSON *cfg = config_json(t, cstr);
        st = write_json(out_dir, "tokenizer_config.json", cfg, err);
        cJSON_Delete(cfg);
    }
    free_strs(cstr, t->n_tokens);
    return st;
}

ig_status pt_write_gguf_tokenizer(const char *gguf_path, const char *out_dir, ig_err *err) {
    ir_gguf_tokenizer *t;
    ig_status st = ir_gguf_read_tokenizer(gguf_path, &t, err);
    if (st) return st;
    st = pt_write_tokenizer(t, out_dir, err);
    ir_gguf_tokenizer_free(t);
    return st;
}
