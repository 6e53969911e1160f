/* cli_args.h — table-driven command-line flags for the ignis tool.
 *
 * A command describes its flags as tables of cli_flag: the flag's name (and an optional short
 * alias), the kind of value it takes, where the value goes (an offset into an options struct),
 * the accepted range, a metavar and a one-line help text. Tables are grouped (cli_group) so that a
 * shared set, such as the sampling flags, is one table that every command taking it lists with
 * its own destination struct.
 *
 * cli_parse walks argv once: flags and positional arguments may come in any order, `--` ends
 * the flags, `--name=value` and `--name value` are the same, -h / --help anywhere among the flags
 * asks for help. Every
 * value is checked in full (the whole string is a number, no overflow, inside the table's range)
 * and every problem (unknown flag, missing value, malformed or out-of-range number, missing or
 * extra positional argument, missing required flag) is an IG_ERR_INVALID whose message names
 * the flag and the value. cli_help writes the usage generated from the same tables; the defaults
 * it shows are the values in the destination structs before parsing.
 *
 * Nothing here prints on its own (cli_help writes to the stream it is given) or exits. */
#ifndef IG_CLI_ARGS_H
#define IG_CLI_ARGS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ig_status.h"

typedef enum cli_kind {
    CLI_INT,    /* int32_t, decimal */
    CLI_INT64,  /* int64_t, decimal */
    CLI_U64,    /* uint64_t, decimal or 0x hex */
    CLI_FLOAT,  /* float, finite */
    CLI_STR,    /* const char *, borrowed from argv */
    CLI_SWITCH, /* int, set to 1 by the flag (takes no value) */
    CLI_STRS    /* cli_strs: each occurrence appends its value */
} cli_kind;

/* Values of a repeatable flag, in order. v is owned (free with cli_free); the strings are
 * borrowed from argv. */
typedef struct cli_strs {
    const char **v;
    int32_t n;
} cli_strs;

enum {
    CLI_LO_OPEN = 1,  /* range excludes lo */
    CLI_HI_OPEN = 2,  /* range excludes hi */
    CLI_REQUIRED = 4  /* the command fails without this flag */
};

/* No bound on that side (besides what the destination type holds). */
#define CLI_NONE HUGE_VAL

typedef struct cli_flag {
    const char *name;    /* "--top-p"; NULL ends a table */
    const char *alias;   /* "-o" or NULL */
    cli_kind kind;
    size_t offset;       /* of the destination in the group's struct */
    double lo, hi;       /* accepted range of numbers (CLI_NONE / -CLI_NONE: unbounded) */
    unsigned flags;      /* CLI_LO_OPEN | CLI_HI_OPEN | CLI_REQUIRED */
    const char *metavar; /* "P" */
    const char *help;    /* one line */
    const char *dflt;    /* default as shown in help; NULL: the destination's value when it is
                            inside the range (a value outside it means "not given") */
} cli_flag;

/* Compile-time check that a destination field has the C type a kind writes. */
#define CLI_FIELD(type, field, ctype) \
    (offsetof(type, field) + 0 * sizeof(char[_Generic(((type *)0)->field, ctype: 1, default: -1)]))

/* Table rows: name, alias, destination struct and field, range, metavar, help, shown default. */
#define CLI_I32(n_, a_, ty_, fd_, lo_, hi_, fl_, mv_, h_, d_) \
    {n_, a_, CLI_INT, CLI_FIELD(ty_, fd_, int32_t), lo_, hi_, fl_, mv_, h_, d_}
#define CLI_I64(n_, a_, ty_, fd_, lo_, hi_, fl_, mv_, h_, d_) \
    {n_, a_, CLI_INT64, CLI_FIELD(ty_, fd_, int64_t), lo_, hi_, fl_, mv_, h_, d_}
#define CLI_U64V(n_, a_, ty_, fd_, mv_, h_) {n_, a_, CLI_U64, CLI_FIELD(ty_, fd_, uint64_t), -CLI_NONE, CLI_NONE, 0, mv_, h_, NULL}
#define CLI_F32(n_, a_, ty_, fd_, lo_, hi_, fl_, mv_, h_) \
    {n_, a_, CLI_FLOAT, CLI_FIELD(ty_, fd_, float), lo_, hi_, fl_, mv_, h_, NULL}
#define CLI_STRV(n_, a_, ty_, fd_, fl_, mv_, h_) \
    {n_, a_, CLI_STR, CLI_FIELD(ty_, fd_, const char *), 0, 0, fl_, mv_, h_, NULL}
#define CLI_STRD(n_, a_, ty_, fd_, fl_, mv_, h_, d_) \
    {n_, a_, CLI_STR, CLI_FIELD(ty_, fd_, const char *), 0, 0, fl_, mv_, h_, d_}
#define CLI_SW(n_, a_, ty_, fd_, h_) {n_, a_, CLI_SWITCH, CLI_FIELD(ty_, fd_, int), 0, 0, 0, NULL, h_, NULL}
#define CLI_REP(n_, a_, ty_, fd_, mv_, h_) {n_, a_, CLI_STRS, CLI_FIELD(ty_, fd_, cli_strs), 0, 0, 0, mv_, h_, NULL}
#define CLI_END {NULL, NULL, CLI_SWITCH, 0, 0, 0, 0, NULL, NULL, NULL}

/* One table and the struct its offsets point into. A list of groups ends with flags == NULL. */
typedef struct cli_group {
    const char *title; /* "sampling" → "sampling options:" in help; NULL: "options:" */
    const cli_flag *flags;
    void *dest;        /* borrowed */
} cli_group;

/* What a command takes besides its flags. */
typedef struct cli_cmd {
    const char *name;    /* "generate" */
    const char *args;    /* positional synopsis, "PKG" */
    const char *usage;   /* rest of the synopsis line, "(--tokens IDS | --prompt TEXT) [options]" */
    const char *summary; /* one line, for the command list and the help page */
    int min_pos, max_pos;
} cli_cmd;

/* Parses argv (the arguments after the command name) into the groups' structs and the
 * positional arguments into pos[0 .. c->max_pos) (borrowed from argv; *n_pos of them).
 * *help = 1 when -h / --help stands among the flags: then nothing is parsed or checked (the
 * structs keep their defaults for cli_help). */
ig_status cli_parse(const cli_cmd *c, const cli_group *groups, int argc, char **argv, const char **pos,
                    int *n_pos, int *help, ig_err *err);

/* Frees the cli_strs arrays of the groups (after cli_parse, whatever it returned). */
void cli_free(const cli_group *groups);

/* Writes "usage: ignis NAME ARGS USAGE", the summary and every flag with its metavar, range,
 * default and help. */
void cli_help(FILE *out, const cli_cmd *c, const cli_group *groups);

/* The values joined with sep, empty ones left out: "a=1,b=2". *out: malloc'd, or NULL when
 * there is none. */
ig_status cli_join(const cli_strs *s, char sep, char **out, ig_err *err);

/* The `ignis` command line (tools/ignis.c): main() of the ignis binary (tools/ignis_main.c), and of
 * a one-file bundle (tools/bundle_main.c) with the bundle inserted as the package argument. */
int ignis_cli_main(int argc, char **argv);

#endif
