/* bundle_main.c — main() of a one-file bundle (`ignis bundle PKG -o FILE`, compiler/bundle.c).
 *
 * The executable is its own package (pkg_file.h): `FILE CMD [ARGS] [options]` runs the ignis
 * command line as `ignis CMD FILE [ARGS] [options]` for the commands that take a package, with the
 * bundle's own path (/proc/self/exe) as the package. The package loader (rt_package.c) then checks
 * the bundle (its directory, the hashes of its executable part, manifest and tokenizer files, every
 * weight's hash), takes the model code linked into this executable and maps the weights in place.
 * A bundle whose end is missing or damaged is refused here, before any command runs. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_args.h"
#include "pkg_file.h"

/* The commands of ignis that take a package as their one argument, and what they do. */
static const char *const bundle_commands[][2] = {
    {"generate", "generate from a prompt (--prompt TEXT [--chat]) or token ids (--tokens IDS)"},
    {"chat", "interactive chat with the model's chat template"},
    {"serve", "an OpenAI-compatible HTTP server (--host, --port, ...)"},
    {"bench", "prefill and decode speed"},
    {"logits", "teacher-forced logits of --tokens IDS into --out FILE.npy"},
    {"perplexity", "perplexity on --file TEXT"},
    {"inspect", "print the package's manifest"},
    {"tokenize", "token ids of the text on stdin"},
    {"detokenize", "the text of --ids IDS"},
    {"chat-template", "the prompt the chat template renders for --messages FILE.json"},
    {"grammar-check", "check a text against a constraint's token masks"},
    {"bench-grammar", "guided decoding speed over --schemas FILE.jsonl"},
};
#define N_BUNDLE_COMMANDS (int)(sizeof bundle_commands / sizeof bundle_commands[0])

static void usage(FILE *out, const char *self) {
    fprintf(out, "usage: %s COMMAND [options]   (a one-file ignis bundle: the model, its weights and the runtime)\n\n"
                 "commands:\n", self);
    for (int i = 0; i < N_BUNDLE_COMMANDS; i++) fprintf(out, "  %-14s %s\n", bundle_commands[i][0], bundle_commands[i][1]);
    fprintf(out, "  %-14s %s\n\n'%s COMMAND --help' lists a command's flags (PKG is this file).\n", "version",
            "print the runtime's version", self);
}

static int is_bundle_command(const char *name) {
    for (int i = 0; i < N_BUNDLE_COMMANDS; i++)
        if (!strcmp(bundle_commands[i][0], name)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const char *name = argc > 0 ? argv[0] : "bundle";
    if (n <= 0) {
        fprintf(stderr, "%s: error: cannot find this executable (/proc/self/exe): is /proc mounted?\n", name);
        return 1;
    }
    self[n] = 0;
    pkgf_bundle *b = malloc(sizeof *b);
    ig_err err = {{0}};
    if (!b || pkgf_open(self, b, NULL, &err)) {
        fprintf(stderr, "%s: error: this bundle is damaged: %s\n", name, b ? err.msg : "out of memory");
        free(b);
        return 1;
    }
    free(b);
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout, name);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) return ignis_cli_main(2, (char *[]){argv[0], "version", NULL});
    if (!is_bundle_command(argv[1])) {
        fprintf(stderr, "%s: error: unknown command '%s' (see '%s help')\n", name, argv[1], name);
        return 2;
    }
    /* ignis CMD SELF ARGS... ("--" keeps SELF from being read as a flag's value: it goes last) */
    char **av = calloc((size_t)argc + 3, sizeof *av);
    if (!av) return 1;
    int k = 0;
    av[k++] = argv[0];
    av[k++] = argv[1];
    for (int i = 2; i < argc; i++) av[k++] = argv[i];
    int has_dashdash = 0;
    for (int i = 2; i < argc; i++) has_dashdash |= !strcmp(argv[i], "--");
    if (!has_dashdash) av[k++] = "--";
    av[k++] = self;
    int rc = ignis_cli_main(k, av);
    free(av);
    return rc;
}
