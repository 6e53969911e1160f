/* srv_internal.h — what the server's files share (see server.h for the module). Internal. */
#ifndef IG_SRV_INTERNAL_H
#define IG_SRV_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "chat_template.h"
#include "ignis.h"
#include "server.h"
#include "tokenizer.h"

/* ---- a growing byte buffer */
typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;
/* 0, or -1 when out of memory (the buffer is kept as it was). */
int sbuf_add(sbuf *b, const char *s, size_t n);
int sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_free(sbuf *b);

/* ---- an error reply: HTTP status and the OpenAI error object's fields */
typedef struct srv_error {
    int status;        /* 400, 401, 404, 413, 429, 500, 503 */
    const char *type;  /* "invalid_request_error", ... (static) */
    const char *code;  /* static or NULL */
    char param[64];    /* "" = null */
    char msg[512];
} srv_error;
/* Fills e (type from the status) and returns -1. param may be NULL. */
int srv_fail(srv_error *e, int status, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* {"error": {...}} as a malloc'd string (NULL when out of memory). */
char *srv_error_json(const srv_error *e);

/* ---- request bodies (srv_request.c) */
typedef enum srv_kind { SRV_CHAT, SRV_COMPLETIONS } srv_kind;

typedef struct srv_model_info {
    int32_t vocab, max_context, max_n;
    const char *name;  /* the served model id */
} srv_model_info;

typedef struct srv_prompt {
    const char *text;  /* borrowed from the parsed body; NULL when given as ids */
    int32_t *ids;      /* owned (token-id prompts), or filled by the tokenizer later */
    int32_t n_ids;
} srv_prompt;

typedef struct srv_params {
    srv_kind kind;
    cJSON *root;                 /* the parsed body (owned) */
    ig_gen_config g;             /* arrays point into the owned storage below */
    int max_tokens_given, seed_given;
    int32_t n;                   /* choices per prompt */
    int stream, include_usage;
    int logprobs, top_logprobs;  /* chat: logprobs 0/1; completions: logprobs = top count */
    cJSON *messages;             /* chat: normalized copy for the template (owned) */
    const cJSON *tools;          /* borrowed from root, NULL when none or tool_choice "none" */
    int tools_off;               /* tool_choice "none" */
    int tools_required;          /* tool_choice "required": the reply is a JSON array of one or more
                                    {"name", "arguments"} calls of the given tools (guided) */
    int32_t n_prompts;           /* completions: one per prompt; chat: 1 */
    srv_prompt *prompts;         /* owned array */
    const char **stops;          /* borrowed strings, owned array */
    int32_t *stop_ids, *bias_ids;
    float *bias_vals;
    char *guide_text;            /* owned: g.constraint_text (guided decoding), NULL when none */
    const char *guide_param;     /* the field that asked for it ("response_format", "guided_json", ...) */
    const char *tool_name;       /* tool_choice naming a function: its name (borrowed); the reply is
                                    then that call's arguments, constrained to its parameters */
} srv_params;

/* Parses and validates a request body of len bytes (need not be NUL-terminated) for kind.
 * Every field is checked (type, range, consistency); unknown fields are refused. On failure
 * err says the status (400, 404 for another model) and names the parameter; p is then empty.
 * On success free p with srv_params_free. */
int srv_parse_request(srv_kind kind, const char *body, size_t len, const srv_model_info *mi, srv_params *p,
                      srv_error *err);
void srv_params_free(srv_params *p);
/* Parses a body into a JSON object (malformed JSON, invalid UTF-8, not an object: 400). */
cJSON *srv_parse_json(const char *body, size_t len, srv_error *err);
/* Guided decoding (srv_guided.c): response_format (text, json_object, json_schema), vLLM's
 * guided_json / guided_regex / guided_grammar / guided_choice (srv_guided_field, v->string names
 * the field) into p->g.constraint, compiled once to check it (unsupported schema: 400 naming the
 * keyword). srv_guided_checks, after every field: a named tool_choice's constraint. */
int srv_response_format(const cJSON *rf, srv_params *p, srv_error *err);
int srv_guided_field(const cJSON *v, srv_params *p, srv_error *err);
int srv_guided_checks(srv_params *p, srv_error *err);

/* Tool calls in a reply (srv_tools.c): Hermes <tool_call> blocks or Llama 3 JSON, or (array: a
 * tool_choice "required" reply) a JSON array of call objects. An array of OpenAI tool_calls (ids
 * made from id) and *content (malloc'd, the text around the calls; NULL when none), or NULL when
 * the text holds no call. */
cJSON *srv_parse_tool_calls(const char *text, char **content, uint64_t id, int array);

/* Tool calls of a streamed reply (srv_tools.c): the same formats, parsed as the text comes.
 * named: a forced tool_choice's function (copied; the whole reply is its arguments), or NULL;
 * array: the reply is a JSON array of calls (tool_choice "required"). Ids are made from id as
 * srv_parse_tool_calls makes them. */
typedef struct srv_tool_stream srv_tool_stream;
srv_tool_stream *srv_tool_stream_new(const char *named, int array, uint64_t id); /* NULL: out of memory */
void srv_tool_stream_free(srv_tool_stream *ts);                       /* accepts NULL */
/* Takes the next n bytes of the reply (final: the reply ends here). Appends what may go out now:
 * content bytes to *content, OpenAI delta.tool_calls entries ({index, id, type, function: {name,
 * arguments}} first, then {index, function: {arguments}} pieces) to the array calls. 0, or -1
 * when out of memory. */
int srv_tool_stream_feed(srv_tool_stream *ts, const char *s, size_t n, int final, sbuf *content, cJSON *calls);
int srv_tool_stream_calls(const srv_tool_stream *ts); /* calls finished so far */

/* ---- metrics (srv_metrics.c) */
#define SRV_HIST_BUCKETS 14
typedef struct srv_hist {
    uint64_t count[SRV_HIST_BUCKETS + 1]; /* the last one: +Inf */
    double sum;
} srv_hist;
enum { SRV_EP_CHAT, SRV_EP_COMPLETIONS, SRV_EP_MODELS, SRV_EP_HEALTH, SRV_EP_TOKENIZE, SRV_EP_DETOKENIZE,
       SRV_EP_METRICS, SRV_EP_OTHER, SRV_N_EP };
#define SRV_N_STATUS 12
typedef struct srv_metrics {
    uint64_t requests[SRV_N_EP][SRV_N_STATUS]; /* by srv_status_slot */
    uint64_t prompt_tokens, generation_tokens, cancelled;
    srv_hist ttft, itl, e2e;
} srv_metrics;
void srv_hist_add(srv_hist *h, double seconds);
void srv_metrics_count(srv_metrics *m, int endpoint, int status);
/* The Prometheus text exposition (malloc'd, NULL on OOM). */
char *srv_metrics_text(const srv_metrics *m, ig_engine *e);
extern const char *const srv_endpoint_names[SRV_N_EP];

/* ---- the server (srv_http.c) and its jobs (srv_job.c) */
typedef struct srv srv;
typedef struct srv_job srv_job;

struct srv {
    ig_engine *e;
    tok_tokenizer *tok;
    ct_template *tmpl;
    char *bos, *eos;
    srv_options o;
    srv_model_info mi;
    char model_name[256];
    char fingerprint[32];
    struct MHD_Daemon *d;
    int efd, sfd;                /* eventfd (engine output), signalfd */
    pthread_mutex_t ready_mu;    /* guards ready and every job's queued / ready_next */
    srv_job *ready;
    srv_metrics m;
    uint64_t rng, next_id;
    struct srv_conn *conns;      /* requests in progress */
    struct srv_sock *socks;      /* open connections */
    int32_t n_jobs;
    int draining;
    double drain_deadline;
    long created;                /* start time (unix seconds) */
};

typedef struct srv_choice {
    ig_request *req;
    int32_t index, prompt;
    int ended;
    ig_req_status status;
    ig_finish_reason finish;
    char error[256];
    int32_t n_gen;
    sbuf text;          /* non-streamed: the whole text */
    cJSON *lp;          /* non-streamed logprobs (chat: array of entries; completions: object) */
    size_t text_off;    /* completions logprobs text_offset */
    int started;        /* streamed: the role chunk went out */
    srv_tool_stream *ts; /* streamed chat with tools: the tool-call parser of the reply (owned) */
    double t_last;
} srv_choice;

struct srv_job {
    srv *s;
    srv_params p;
    char id[48];
    long created;
    int32_t n_choices, n_ended, prompt_tokens, completion_tokens;
    srv_choice *ch;
    sbuf out;           /* streamed: SSE bytes not yet taken by MHD */
    size_t out_off;
    int finished;       /* every choice ended and (streamed) [DONE] queued */
    int failed;         /* an engine error ended a choice */
    int queued;         /* in s->ready (s->ready_mu) */
    srv_job *ready_next;
    struct srv_conn *conn;      /* the HTTP request it answers */
    double t_start;
    int got_first;
};

/* Renders / tokenizes the prompts, checks their lengths against max_tokens and the context, and
 * starts the engine requests (p is moved into the job and emptied). */
int srv_job_start(srv *s, srv_params *p, srv_job **out, srv_error *err);
/* Takes every queued output of the job's requests; returns 1 when something new came. */
int srv_job_pump(srv_job *j);
/* The non-streamed response body (malloc'd), or NULL with err (engine error, OOM). */
char *srv_job_response(srv_job *j, srv_error *err);
void srv_job_stop(srv_job *j);
void srv_job_free(srv_job *j); /* releases its requests; accepts NULL */
double srv_now(void);
/* Valid UTF-8 of s[0..n) (invalid bytes as U+FFFD), malloc'd, NUL-terminated. */
char *srv_utf8_clean(const char *s, size_t n);

#endif
