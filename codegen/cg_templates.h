/* cg_templates.h — kernel templates embedded into the compiler at build time (tools/embed.c). */
#ifndef IG_CG_TEMPLATES_H
#define IG_CG_TEMPLATES_H
#include <stddef.h>
typedef struct cg_template {
    const char *name; /* "<folder>/<file>": "cpu/matmul.c", "cuda/gemv.cu", "common/ig_model_abi.h" */
    const char *text; /* file contents, NUL-terminated */
    size_t len;
} cg_template;
extern const cg_template cg_templates[]; /* ends with a {NULL} entry */
#endif
