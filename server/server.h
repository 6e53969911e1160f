/* server.h — `ignis serve`: an OpenAI-compatible HTTP server over the engine API (ignis.h).
 *
 * Endpoints: POST /v1/chat/completions (the package's chat template), POST /v1/completions
 * (a prompt string, a list of them, token ids or lists of token ids), GET /v1/models[/ID],
 * GET /health, POST /tokenize, POST /detokenize, GET /metrics (Prometheus text). Requests and
 * responses follow the OpenAI API as its official clients parse them (server-sent events for
 * stream=true, errors as {"error": {"message", "type", "param", "code"}}), with vLLM's sampling
 * extensions (top_k, min_p, repetition_penalty, min_tokens, ignore_eos, stop_token_ids).
 *
 * Threads: none per request. One thread (the caller of srv_run) runs an event loop: it polls
 * libmicrohttpd's epoll descriptor (MHD in external-polling mode), an eventfd the engine's
 * scheduler thread writes when a request has new output (ig_request_set_notify), a signalfd for
 * SIGTERM/SIGINT, and the sockets of suspended connections for hang-ups. A connection waiting for
 * tokens is suspended (MHD_suspend_connection) and resumed when its request has output, so a
 * client disconnect is seen at once and stops its engine requests (their KV pages are freed at
 * the scheduler's next step).
 *
 * Limits (srv_options): the request body size (413), the time a request may take to arrive whole
 * (slow clients get 408 and are closed), the number of waiting requests (429), connections. On
 * SIGTERM/SIGINT the server stops accepting, lets requests in flight finish for up to
 * shutdown_timeout_s, stops the rest, and srv_run returns IG_OK.
 *
 * Files: srv_http.c (the loop, MHD callbacks, routing, limits), srv_request.c (request bodies:
 * parsing and validation into ig_gen_config, no engine needed: the fuzz target's entry),
 * srv_guided.c (response_format and the guided_* fields into the engine's constraint),
 * srv_job.c (engine requests of one HTTP request, responses and SSE chunks), srv_tools.c (tool
 * calls in replies, whole and streamed), srv_metrics.c.
 */
#ifndef IG_SERVER_H
#define IG_SERVER_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "ignis.h"

typedef struct srv_options {
    const char *host;           /* address to listen on (default "127.0.0.1"); borrowed */
    int32_t port;               /* default 8000; 0: a free port, reported through on_ready */
    const char *model_name;     /* the model id clients use; NULL: the package folder's name */
    const char *api_key;        /* NULL or "": no authentication; else "Authorization: Bearer KEY" */
    int64_t max_body_bytes;     /* request bodies above this get 413 (default 4 MiB) */
    int32_t request_timeout_s;  /* a request must arrive whole within this (default 30) */
    int32_t shutdown_timeout_s; /* in-flight requests get this long after SIGTERM (default 30) */
    int32_t max_connections;    /* default 1024 */
    int32_t max_n;              /* largest n (choices per request; default 128) */
    FILE *log;                  /* start / stop messages; NULL: silent. Borrowed */
    /* called once the socket listens, with the port it got; may be NULL */
    void (*on_ready)(void *user, const char *host, int port);
    void *on_ready_user;
} srv_options;

void srv_options_default(srv_options *o);

/* Blocks SIGTERM, SIGINT and SIGPIPE in the calling thread, so that threads started afterwards
 * (the engine's) inherit the mask and srv_run receives the signals through its signalfd. Call it
 * before ig_engine_open. */
void srv_block_signals(void);

/* Serves engine e (borrowed; the caller closes it after) until SIGTERM or SIGINT. pkg_dir:
 * the package (its tokenizer, chat template and manifest). IG_OK after a clean shutdown; an
 * error when the server cannot start (address in use, no tokenizer, ...). */
ig_status srv_run(ig_engine *e, const char *pkg_dir, const srv_options *o, ig_err *err);

#endif
