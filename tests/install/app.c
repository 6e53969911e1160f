/* app.c — a program built against an installed ignis (tests/test_install.py): greedy tokens of
 * one token prompt through the public C API only.
 *
 *   app PKG N ID,ID,...      prints the N generated token ids, space-separated, then a newline */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ignis.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PKG N ID,ID,...\n", argv[0]);
        return 2;
    }
    int32_t ids[256], n = 0;
    for (char *t = strtok(argv[3], ","); t && n < 256; t = strtok(NULL, ",")) ids[n++] = atoi(t);
    ig_err err;
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    cfg.n_threads = 1;
    ig_engine *e;
    if (ig_engine_open(argv[1], &cfg, &e, &err) != IG_OK) {
        fprintf(stderr, "open: %s\n", err.msg);
        return 1;
    }
    ig_gen_config g;
    ig_gen_config_default(&g);
    g.max_new_tokens = atoi(argv[2]);
    g.temperature = 0.0f;
    g.ignore_eos = 1;
    ig_request *r;
    int rc = 1;
    if (ig_request_start(e, ids, n, &g, &r, &err) == IG_OK) {
        ig_output *o;
        while (ig_request_read(r, -1, &o, &err) == IG_OK) {
            for (int32_t k = 0; k < o->n_tokens; k++) printf("%d ", o->tokens[k]);
            if (o->status == IG_REQ_FINISHED) rc = 0;
            if (o->status == IG_REQ_ERROR) fprintf(stderr, "request: %s\n", o->error);
            ig_output_free(o);
        }
        printf("\n");
        ig_request_release(r);
    } else {
        fprintf(stderr, "start: %s\n", err.msg);
    }
    printf("version %s\n", ig_version());
    ig_engine_close(e);
    return rc;
}
