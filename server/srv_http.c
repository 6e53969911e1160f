/* srv_http.c — the server's event loop and its HTTP side on libmicrohttpd (see server.h).
 *
 * MHD runs in external-polling mode with epoll: the loop polls MHD's epoll descriptor, the
 * eventfd the engine's notify callbacks write, the signalfd, and the sockets of suspended
 * connections (POLLRDHUP: the client went away), then calls MHD_run. Per HTTP request
 * (srv_conn, MHD's request context, created by the URI-log callback as soon as the request line
 * is read): route and authenticate on the first call, collect the body (413 past the limit),
 * then dispatch. Generation requests suspend their connection until the job has output (stream:
 * the content reader hands out SSE bytes and suspends when there are none; non-streamed: the
 * handler is called again once every choice ended). Per socket (srv_sock, MHD's socket context):
 * when it was last idle, so a sweep closes sockets that never send a whole request (one byte a
 * second) with a 408, and idle keep-alive sockets past the request timeout.
 *
 * Every MHD call happens on the loop thread; only on_output (srv_job.c) runs elsewhere. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "pkg_file.h"
#include "rt_util.h"
#include "srv_endpoints.h"

typedef struct srv_sock {
    struct srv_sock *next;
    int fd;
    double t_idle;           /* since when no request is in progress */
    struct srv_conn *conn;   /* the request in progress, or NULL */
} srv_sock;

typedef struct srv_conn {
    struct srv_conn *prev, *next;
    srv *s;
    struct MHD_Connection *mc;
    srv_sock *sock;
    int route;               /* index in routes, -1: none */
    const char *model_id;    /* GET /v1/models/ID: into the URL (valid during the request) */
    int started, replied, dispatched, suspended, cancelled, too_large;
    double t_start;
    sbuf body;
    srv_job *job;
} srv_conn;

/* ---- replies */

static enum MHD_Result queue(srv_conn *c, int status, const char *ctype, char *body, int endpoint) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    if (c->s->draining) MHD_add_response_header(r, "Connection", "close");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ok = MHD_queue_response(c->mc, (unsigned)status, r);
    MHD_destroy_response(r);
    c->replied = 1;
    srv_metrics_count(&c->s->m, endpoint, status);
    return ok;
}

static int conn_endpoint(const srv_conn *c);

static enum MHD_Result reply_json(srv_conn *c, char *body) {
    if (!body) return MHD_NO;
    return queue(c, 200, "application/json", body, conn_endpoint(c));
}

static enum MHD_Result reply_error(srv_conn *c, const srv_error *e) {
    char *body = srv_error_json(e);
    return body ? queue(c, e->status, "application/json", body, conn_endpoint(c)) : MHD_NO;
}

static enum MHD_Result reply_result(srv_conn *c, int rc, char *body, const srv_error *e) {
    return rc ? reply_error(c, e) : reply_json(c, body);
}

/* ---- suspension */

static void suspend(srv_conn *c) {
    if (c->suspended) return;
    MHD_suspend_connection(c->mc);
    c->suspended = 1;
}

static void resume(srv_conn *c) {
    if (!c->suspended) return;
    MHD_resume_connection(c->mc);
    c->suspended = 0;
}

/* The client went away (or the server stops): end the generation, let MHD close the socket. */
static void cancel(srv_conn *c) {
    if (c->cancelled) return;
    c->cancelled = 1;
    if (c->job && !c->job->finished) {
        srv_job_stop(c->job);
        c->s->m.cancelled++;
    }
    resume(c);
}

/* ---- generation endpoints */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    srv_conn *c = cls;
    srv_job *j = c->job;
    if (c->cancelled || !j) return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t avail = j->out.len - j->out_off;
    if (avail) {
        size_t n = avail < max ? avail : max;
        memcpy(buf, j->out.p + j->out_off, n);
        j->out_off += n;
        if (j->out_off == j->out.len) j->out.len = j->out_off = 0;
        return (ssize_t)n;
    }
    if (j->finished) return MHD_CONTENT_READER_END_OF_STREAM;
    suspend(c);
    return 0;
}

static enum MHD_Result start_stream(srv_conn *c) {
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, c, NULL);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(c->mc, 200, r);
    MHD_destroy_response(r);
    c->replied = 1;
    srv_metrics_count(&c->s->m, conn_endpoint(c), 200);
    return ok;
}

static enum MHD_Result generate(srv_conn *c, srv_kind kind) {
    srv *s = c->s;
    srv_params p;
    srv_error e;
    if (srv_parse_request(kind, c->body.p, c->body.len, &s->mi, &p, &e)) return reply_error(c, &e);
    int stream = p.stream;
    if (srv_job_start(s, &p, &c->job, &e)) return reply_error(c, &e);
    c->job->conn = c;
    if (stream) return start_stream(c);
    suspend(c); /* on_output → the loop resumes it once every choice ended */
    return MHD_YES;
}

/* A non-streamed job that finished: its response. */
static enum MHD_Result finish_job(srv_conn *c) {
    srv_error e;
    char *body = srv_job_response(c->job, &e);
    return body ? reply_json(c, body) : reply_error(c, &e);
}

/* ---- routes */

typedef enum MHD_Result (*route_fn)(srv_conn *c);

static enum MHD_Result r_chat(srv_conn *c) { return generate(c, SRV_CHAT); }
static enum MHD_Result r_completions(srv_conn *c) { return generate(c, SRV_COMPLETIONS); }

static enum MHD_Result r_models(srv_conn *c) {
    char *out = NULL;
    srv_error e;
    int rc = srv_ep_models(c->s, c->model_id, &out, &e);
    return reply_result(c, rc, out, &e);
}

static enum MHD_Result r_health(srv_conn *c) {
    char *out = NULL;
    srv_error e;
    int rc = srv_ep_health(c->s, &out, &e);
    return reply_result(c, rc, out, &e);
}

static enum MHD_Result r_metrics(srv_conn *c) {
    char *out = srv_metrics_text(&c->s->m, c->s->e);
    return out ? queue(c, 200, "text/plain; version=0.0.4", out, SRV_EP_METRICS) : MHD_NO;
}

static enum MHD_Result r_tokenize(srv_conn *c) {
    char *out = NULL;
    srv_error e;
    int rc = srv_ep_tokenize(c->s, c->body.p, c->body.len, &out, &e);
    return reply_result(c, rc, out, &e);
}

static enum MHD_Result r_detokenize(srv_conn *c) {
    char *out = NULL;
    srv_error e;
    int rc = srv_ep_detokenize(c->s, c->body.p, c->body.len, &out, &e);
    return reply_result(c, rc, out, &e);
}

static const struct route {
    const char *method, *path;
    int prefix;   /* path is a prefix: the rest is an id */
    int endpoint; /* metrics slot */
    int auth;     /* needs the API key */
    route_fn fn;
} routes[] = {
    {"POST", "/v1/chat/completions", 0, SRV_EP_CHAT, 1, r_chat},
    {"POST", "/v1/completions", 0, SRV_EP_COMPLETIONS, 1, r_completions},
    {"GET", "/v1/models", 0, SRV_EP_MODELS, 1, r_models},
    {"GET", "/v1/models/", 1, SRV_EP_MODELS, 1, r_models},
    {"POST", "/tokenize", 0, SRV_EP_TOKENIZE, 1, r_tokenize},
    {"POST", "/detokenize", 0, SRV_EP_DETOKENIZE, 1, r_detokenize},
    {"GET", "/health", 0, SRV_EP_HEALTH, 0, r_health},
    {"GET", "/metrics", 0, SRV_EP_METRICS, 0, r_metrics},
};
#define N_ROUTES (int)(sizeof routes / sizeof routes[0])

static int conn_endpoint(const srv_conn *c) { return c->route >= 0 ? routes[c->route].endpoint : SRV_EP_OTHER; }

/* The route of method + url: its index, -1 for an unknown path, -2 for a known path with another method. */
static int find_route(const char *method, const char *url, const char **id) {
    int path_known = 0;
    for (int i = 0; i < N_ROUTES; i++) {
        const struct route *r = &routes[i];
        size_t n = strlen(r->path);
        int match = r->prefix ? !strncmp(url, r->path, n) && url[n] : !strcmp(url, r->path);
        if (!match) continue;
        path_known = 1;
        if (strcmp(method, r->method)) continue;
        *id = r->prefix ? url + n : NULL;
        return i;
    }
    return path_known ? -2 : -1;
}

static int authorized(const srv_conn *c) {
    const char *key = c->s->o.api_key;
    if (!key || !*key) return 1;
    const char *h = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "Authorization");
    return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, key);
}

/* The first call for a request (headers read): route, key, draining, declared body size. */
static enum MHD_Result begin(srv_conn *c, const char *url, const char *method) {
    srv *s = c->s;
    srv_error e;
    c->started = 1;
    c->route = find_route(method, url, &c->model_id);
    if (c->route == -1) return srv_fail(&e, 404, NULL, "Unknown path: %s %s", method, url), reply_error(c, &e);
    if (c->route == -2) return srv_fail(&e, 405, NULL, "Method %s is not allowed for %s", method, url), reply_error(c, &e);
    if (routes[c->route].auth && !authorized(c)) {
        srv_fail(&e, 401, NULL, "Incorrect or missing API key: send 'Authorization: Bearer KEY'");
        e.code = "invalid_api_key";
        return reply_error(c, &e);
    }
    if (s->draining) return srv_fail(&e, 503, NULL, "the server is shutting down"), reply_error(c, &e);
    const char *cl = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > (unsigned long long)s->o.max_body_bytes)
        return srv_fail(&e, 413, NULL, "the request body (%s bytes) is larger than the limit of %lld bytes", cl,
                        (long long)s->o.max_body_bytes), reply_error(c, &e);
    return MHD_YES;
}

/* MHD cannot answer in the middle of a body (only before it or after it): a body past the limit
 * is read on and dropped, and answered 413 at its end (the request timeout bounds how long). */
static enum MHD_Result body_chunk(srv_conn *c, const char *data, size_t n) {
    if (c->too_large) return MHD_YES;
    if (c->body.len + n > (size_t)c->s->o.max_body_bytes || sbuf_add(&c->body, data, n)) {
        c->too_large = 1;
        sbuf_free(&c->body);
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **req_cls) {
    srv_conn *c = *req_cls;
    if (!c) return MHD_NO; /* the URI-log callback made none: out of memory */
    if (!c->started) return begin(c, url, method);
    if (*upload_size) {
        enum MHD_Result ok = c->replied ? MHD_YES : body_chunk(c, upload, *upload_size);
        *upload_size = 0;
        return ok;
    }
    if (c->replied) return MHD_YES;
    if (c->cancelled) return MHD_NO;
    if (!c->dispatched) {
        c->dispatched = 1;
        srv_error e;
        if (c->too_large)
            return srv_fail(&e, 413, NULL, "the request body is larger than the limit of %lld bytes",
                            (long long)c->s->o.max_body_bytes), reply_error(c, &e);
        return routes[c->route].fn(c);
    }
    if (c->job && c->job->finished) return finish_job(c);
    suspend(c);
    return MHD_YES;
}

/* ---- request and socket lifetimes */

static srv_sock *sock_of(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void conn_free(srv_conn *c) {
    srv *s = c->s;
    srv_job_free(c->job);
    sbuf_free(&c->body);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (c->sock) {
        c->sock->conn = NULL;
        c->sock->t_idle = srv_now();
    }
    free(c);
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request line arrived; its context. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *mc) {
    srv *s = cls;
    srv_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->s = s;
    c->mc = mc;
    c->route = -1;
    c->t_start = srv_now();
    c->sock = sock_of(mc);
    if (c->sock) {
        if (c->sock->conn) conn_free(c->sock->conn); /* a request MHD dropped without completing */
        c->sock->conn = c;
    }
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    return c;
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls, enum MHD_RequestTerminationCode toe) {
    srv_conn *c = *req_cls;
    if (!c) return;
    if (c->job && !c->job->finished && !c->cancelled) c->s->m.cancelled++;
    conn_free(c);
    *req_cls = NULL;
}

static void on_socket(void *cls, struct MHD_Connection *mc, void **sock_ctx, enum MHD_ConnectionNotificationCode toe) {
    srv *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        srv_sock *k = calloc(1, sizeof *k);
        if (!k) return;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        k->fd = ci ? ci->connect_fd : -1;
        k->t_idle = srv_now();
        k->next = s->socks;
        s->socks = k;
        *sock_ctx = k;
        return;
    }
    srv_sock *k = *sock_ctx;
    if (!k) return;
    if (k->conn) {
        k->conn->sock = NULL;
        conn_free(k->conn);
    }
    for (srv_sock **p = &s->socks; *p; p = &(*p)->next)
        if (*p == k) {
            *p = k->next;
            break;
        }
    free(k);
    *sock_ctx = NULL;
}

/* ---- the loop */

/* Answers 408 on a socket whose request did not arrive in time, then shuts it down (MHD sees the
 * end and closes it). MHD has written nothing on it for this request. */
static void timeout_request(srv *s, srv_conn *c) {
    srv_error e;
    srv_fail(&e, 408, NULL, "the request did not arrive whole within %d s", s->o.request_timeout_s);
    char *body = srv_error_json(&e);
    sbuf b = {0};
    if (body)
        sbuf_printf(&b, "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                        "Connection: close\r\n\r\n%s", strlen(body), body);
    if (b.p && send(c->sock->fd, b.p, b.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* best effort */ }
    free(body);
    sbuf_free(&b);
    shutdown(c->sock->fd, SHUT_RDWR);
    c->replied = 1;
    srv_metrics_count(&s->m, conn_endpoint(c), 408);
}

/* Slow requests get 408; sockets idle past the timeout (or any idle one while draining) close. */
static void sweep(srv *s, double now) {
    for (srv_conn *c = s->conns; c; c = c->next)
        if (!c->dispatched && !c->replied && c->sock && c->sock->fd >= 0 && now - c->t_start > s->o.request_timeout_s)
            timeout_request(s, c);
    for (srv_sock *k = s->socks; k; k = k->next)
        if (!k->conn && k->fd >= 0 && (s->draining || now - k->t_idle > s->o.request_timeout_s)) {
            shutdown(k->fd, SHUT_RDWR);
            k->fd = -1;
        }
}

/* Takes the jobs with new output and resumes the connections that can go on. */
static void pump_ready(srv *s) {
    uint64_t v;
    if (read(s->efd, &v, sizeof v) < 0 && errno != EAGAIN) return;
    pthread_mutex_lock(&s->ready_mu);
    srv_job *list = s->ready;
    s->ready = NULL;
    for (srv_job *j = list; j; j = j->ready_next) j->queued = 0;
    pthread_mutex_unlock(&s->ready_mu);
    for (srv_job *j = list, *nx; j; j = nx) {
        nx = j->ready_next; /* stays valid: jobs are freed only by this thread, not during the pump */
        srv_job_pump(j);
        srv_conn *c = j->conn;
        if (c && c->suspended && (j->finished || (j->p.stream && j->out.len > j->out_off))) resume(c);
    }
}

static void start_draining(srv *s) {
    struct signalfd_siginfo si;
    if (read(s->sfd, &si, sizeof si) <= 0) return;
    if (s->draining) return;
    s->draining = 1;
    s->drain_deadline = srv_now() + s->o.shutdown_timeout_s;
    int lfd = MHD_quiesce_daemon(s->d);
    if (lfd >= 0) close(lfd);
    if (s->o.log) fprintf(s->o.log, "ignis serve: signal %u: finishing %d requests in flight\n", si.ssi_signo, s->n_jobs);
}

/* The poll set: MHD, eventfd, signalfd, then the suspended connections' sockets. */
static int poll_set(srv *s, int epfd, struct pollfd **fds, int *cap, srv_conn ***who) {
    int n = 0;
    for (srv_conn *c = s->conns; c; c = c->next) n += c->suspended;
    if (n + 3 > *cap) {
        *cap = 2 * (n + 3);
        struct pollfd *f = realloc(*fds, sizeof **fds * *cap);
        srv_conn **w = realloc(*who, sizeof **who * *cap);
        if (f) *fds = f;
        if (w) *who = w;
        if (!f || !w) return 3; /* poll without the hang-up watch this round */
    }
    struct pollfd *f = *fds;
    f[0] = (struct pollfd){.fd = epfd, .events = POLLIN};
    f[1] = (struct pollfd){.fd = s->efd, .events = POLLIN};
    f[2] = (struct pollfd){.fd = s->draining ? -1 : s->sfd, .events = POLLIN};
    int k = 3;
    for (srv_conn *c = s->conns; c; c = c->next)
        if (c->suspended && c->sock && c->sock->fd >= 0) {
            (*who)[k] = c;
            f[k++] = (struct pollfd){.fd = c->sock->fd, .events = POLLRDHUP};
        }
    return k;
}

static int loop_timeout(srv *s) {
    MHD_UNSIGNED_LONG_LONG t;
    int ms = 250; /* the sweep's period */
    if (MHD_get_timeout(s->d, &t) == MHD_YES && t < (MHD_UNSIGNED_LONG_LONG)ms) ms = (int)t;
    return ms;
}

/* Runs until a signal came and the requests in flight are done (or their time ran out). */
static void run_loop(srv *s) {
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
    int epfd = di ? di->epoll_fd : -1, cap = 0, stopped = 0;
    struct pollfd *fds = NULL;
    srv_conn **who = NULL;
    double next_sweep = 0;
    for (;;) {
        double now = srv_now();
        if (s->draining && s->n_jobs == 0) break;
        if (s->draining && now > s->drain_deadline) {
            if (stopped) break; /* a second grace period for the stopped ones to close */
            for (srv_conn *c = s->conns; c; c = c->next) cancel(c);
            stopped = 1;
            s->drain_deadline = now + 2;
        }
        int n = poll_set(s, epfd, &fds, &cap, &who);
        int got = poll(fds, (nfds_t)n, loop_timeout(s));
        if (got > 0) {
            if (fds[1].revents) pump_ready(s);
            if (fds[2].revents) start_draining(s);
            for (int i = 3; i < n; i++)
                if (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) cancel(who[i]);
        }
        MHD_run(s->d);
        if ((now = srv_now()) >= next_sweep) {
            sweep(s, now);
            next_sweep = now + 0.25;
        }
    }
    for (srv_conn *c = s->conns; c; c = c->next) cancel(c); /* MHD_stop_daemon needs none suspended */
    free(fds);
    free(who);
}

/* ---- start and stop */

void srv_options_default(srv_options *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8000;
    o->max_body_bytes = 4 << 20;
    o->request_timeout_s = 30;
    o->shutdown_timeout_s = 30;
    o->max_connections = 1024;
    o->max_n = 128;
}

void srv_block_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* The package's tokenizer, chat template (ChatML when it has none), name and fingerprint. */
static ig_status load_package(srv *s, const char *pkg, ig_err *err) {
    char path[4096];
    if (!ig_engine_has_tokenizer(s->e)) return ig_fail(err, IG_ERR_INVALID, "%s has no tokenizer: the server needs one", pkg);
    ig_status st = tok_load_dir(pkg, &s->tok, err);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", pkg);
    if (!st && pkgf_exists(path)) st = ct_load_tokenizer_config(path, &s->tmpl, &s->bos, &s->eos, err);
    if (!st && !s->tmpl) st = ct_compile(ct_chatml_source(), &s->tmpl, err);
    char *manifest = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/manifest.json", pkg);
    if (!st) st = rt_read_file(path, &manifest, &len, err);
    if (!st) snprintf(s->fingerprint, sizeof s->fingerprint, "fp_%016llx", (unsigned long long)rt_hash64(manifest, len, 0));
    free(manifest);
    const char *name = s->o.model_name;
    if (!name || !*name) {
        size_t L = strlen(pkg);
        while (L > 1 && pkg[L - 1] == '/') L--;
        size_t b = L;
        while (b > 0 && pkg[b - 1] != '/') b--;
        snprintf(s->model_name, sizeof s->model_name, "%.*s", (int)(L - b), pkg + b);
    } else {
        snprintf(s->model_name, sizeof s->model_name, "%s", name);
    }
    return st;
}

static ig_status start_daemon(srv *s, ig_err *err) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
    char port[16];
    snprintf(port, sizeof port, "%d", s->o.port);
    int rc = getaddrinfo(s->o.host, port, &hints, &ai);
    if (rc) return ig_fail(err, IG_ERR_INVALID, "--host %s: %s", s->o.host, gai_strerror(rc));
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_socket, s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->o.max_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(2 * s->o.request_timeout_s),
                            MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) return ig_fail(err, IG_ERR_IO, "cannot listen on %s:%d (address in use, or not an address of this host)",
                              s->o.host, s->o.port);
    return IG_OK;
}

static void srv_close(srv *s) {
    if (s->d) MHD_stop_daemon(s->d);
    while (s->conns) conn_free(s->conns); /* any MHD did not complete */
    if (s->efd >= 0) close(s->efd);
    if (s->sfd >= 0) close(s->sfd);
    pthread_mutex_destroy(&s->ready_mu);
    ct_free(s->tmpl);
    tok_free(s->tok);
    free(s->bos);
    free(s->eos);
}

ig_status srv_run(ig_engine *e, const char *pkg_dir, const srv_options *o, ig_err *err) {
    srv s;
    memset(&s, 0, sizeof s);
    s.e = e;
    s.o = *o;
    s.efd = s.sfd = -1;
    s.created = (long)time(NULL);
    s.rng = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
    pthread_mutex_init(&s.ready_mu, NULL);
    ig_status st = load_package(&s, pkg_dir, err);
    s.mi = (srv_model_info){.vocab = ig_engine_vocab(e), .max_context = ig_engine_max_context(e), .max_n = o->max_n,
                            .name = s.model_name};
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (!st && ((s.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 || (s.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0))
        st = ig_fail(err, IG_ERR_IO, "cannot create the server's event descriptors: %s", strerror(errno));
    if (!st) st = start_daemon(&s, err);
    if (!st) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(s.d, MHD_DAEMON_INFO_BIND_PORT);
        if (o->on_ready) o->on_ready(o->on_ready_user, o->host, di ? di->port : o->port);
        run_loop(&s);
        if (o->log) fprintf(o->log, "ignis serve: stopped\n");
    }
    srv_close(&s);
    return st;
}
