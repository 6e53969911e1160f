/* c_api.c — a small program to copy from: open a compiled package, run several requests at once
 * through the engine, stream their tokens, and print the engine's statistics.
 *
 *   build/sample_c_api PKG "prompt one" "prompt two" ...     (a package with a tokenizer)
 *   build/sample_c_api PKG --ids 1,2,3                       (any package)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ignis.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PKG PROMPT... | PKG --ids 1,2,3\n", argv[0]);
        return 2;
    }
    ig_err err;
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    ig_engine *e;
    if (ig_engine_open(argv[1], &cfg, &e, &err) != IG_OK) {
        fprintf(stderr, "open: %s\n", err.msg);
        return 1;
    }
    ig_gen_config g;
    ig_gen_config_default(&g);
    g.max_new_tokens = 32;
    g.temperature = 0.7f;
    g.top_p = 0.9f;
    g.seed = 42;

    int n = 0;
    ig_request *reqs[16];
    if (!strcmp(argv[2], "--ids") && argc > 3) {
        int32_t ids[256];
        int32_t k = 0;
        for (char *t = strtok(argv[3], ","); t && k < 256; t = strtok(NULL, ",")) ids[k++] = atoi(t);
        if (ig_request_start(e, ids, k, &g, &reqs[n], &err) == IG_OK) n++;
        else fprintf(stderr, "start: %s\n", err.msg);
    } else {
        for (int i = 2; i < argc && n < 16; i++) {
            if (ig_request_start_text(e, argv[i], &g, &reqs[n], &err) == IG_OK) n++;
            else fprintf(stderr, "start \"%s\": %s\n", argv[i], err.msg);
        }
    }
    /* all requests run together; read each to its end (a real server reads them from threads) */
    for (int i = 0; i < n; i++) {
        printf("[%d] ", i);
        ig_output *o;
        while (ig_request_read(reqs[i], -1, &o, &err) == IG_OK) {
            if (o->text_len) fwrite(o->text, 1, o->text_len, stdout);
            else
                for (int32_t k = 0; k < o->n_tokens; k++) printf("%d ", o->tokens[k]);
            if (o->status == IG_REQ_ERROR) printf("(error: %s)", o->error);
            if (o->status == IG_REQ_FINISHED)
                printf(" <%s>", o->finish == IG_FINISH_EOS ? "eos" : o->finish == IG_FINISH_STOP ? "stop" : "length");
            ig_output_free(o);
            fflush(stdout);
        }
        printf("\n");
        ig_request_release(reqs[i]);
    }
    ig_engine_stats st;
    ig_engine_get_stats(e, &st);
    printf("steps %lld, prompt tokens %lld, generated %lld, KV pages free %d/%d\n", (long long)st.steps,
           (long long)st.tokens_prefilled, (long long)st.tokens_generated, st.kv_pages_free, st.kv_pages_total);
    ig_engine_close(e);
    return 0;
}
