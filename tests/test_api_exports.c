/* test_api_exports.c — libignis.so exports every function the public headers declare, and each
 * declaration carries IG_API: the declarations are read from include/ignis.h and include/ig_status.h at run time (so a new
 * declaration is covered without editing this test) and each name is looked up with dlsym in the
 * shared library beside the `ignis` binary ($IGNIS, set by ctest) or in build/. Catches a
 * function declared public but compiled hidden (ig_status_name was), or renamed in one place.
 * It also checks the count is plausible, so a parser that finds nothing cannot pass. */
#include <ctype.h>
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_util.h"

/* The functions declared in a public header: every top-level line (not indented, not a
 * preprocessor line, comment, typedef or static inline helper) with a '(' declares one, named by
 * the identifier before it. *no_api: how many of them lack the IG_API mark. Returns the count. */
static int declared(const char *text, char names[][64], int cap, int *no_api) {
    int n = 0;
    *no_api = 0;
    for (const char *line = text; *line && n < cap; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
        const char *eol = strchr(line, '\n');
        if (!eol) eol = line + strlen(line);
        if (!isalpha((unsigned char)*line) || !strncmp(line, "typedef", 7) || !strncmp(line, "static", 6)) continue;
        const char *paren = memchr(line, '(', (size_t)(eol - line));
        if (!paren) continue;
        const char *end = paren;
        while (end > line && isspace((unsigned char)end[-1])) end--;
        const char *beg = end;
        while (beg > line && (isalnum((unsigned char)beg[-1]) || beg[-1] == '_')) beg--;
        if (end - beg <= 0 || end - beg >= 64) continue;
        memcpy(names[n], beg, (size_t)(end - beg));
        names[n][end - beg] = 0;
        if (strncmp(line, "IG_API ", 7)) {
            fprintf(stderr, "FAIL: %s is declared without IG_API: %.*s\n", names[n], (int)(eol - line), line);
            (*no_api)++;
        }
        n++;
    }
    return n;
}

int main(void) {
    char lib[1200];
    const char *ig = getenv("IGNIS");
    if (ig) {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", ig);
        snprintf(lib, sizeof lib, "%s/libignis.so", dirname(tmp));
    } else {
        snprintf(lib, sizeof lib, "build/libignis.so");
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "FAIL: dlopen %s: %s\n", lib, dlerror());
        return 1;
    }
    static const char *headers[] = {"include/ignis.h", "include/ig_status.h"};
    static char names[256][64];
    int failures = 0, total = 0;
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        char *text;
        ig_err err;
        if (rt_read_file(headers[i], &text, NULL, &err)) {
            fprintf(stderr, "FAIL: %s\n", err.msg);
            return 1;
        }
        int no_api = 0;
        int n = declared(text, names, 256, &no_api);
        free(text);
        failures += no_api;
        for (int k = 0; k < n; k++) {
            if (!dlsym(h, names[k])) {
                fprintf(stderr, "FAIL: %s (declared in %s) is not exported by %s\n", names[k], headers[i], lib);
                failures++;
            }
        }
        total += n;
    }
    if (total < 18) {
        fprintf(stderr, "FAIL: found only %d function declarations in the public headers\n", total);
        failures++;
    }
    /* a hidden symbol must stay hidden: the core's internals are not part of the ABI */
    if (dlsym(h, "sched_main") || dlsym(h, "rt_model_forward")) {
        fprintf(stderr, "FAIL: internal symbols are exported\n");
        failures++;
    }
    const char *(*status_name)(int) = (const char *(*)(int))dlsym(h, "ig_status_name");
    if (status_name && strcmp(status_name(12), "closed")) {
        fprintf(stderr, "FAIL: ig_status_name(IG_ERR_CLOSED) = %s\n", status_name(12));
        failures++;
    }
    dlclose(h);
    printf("%s: %d exported functions checked (%d failures)\n", failures ? "FAIL" : "ok", total, failures);
    return failures ? 1 : 0;
}
