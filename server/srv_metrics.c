/* srv_metrics.c — the server's counters and latency histograms, and GET /metrics in the
 * Prometheus text format (version 0.0.4): requests by endpoint and status, prompt and generated
 * tokens, cancelled requests, time to first token / inter-token latency / request duration
 * histograms, and the engine's own figures (ig_engine_get_stats: running and waiting requests,
 * KV pages used / free / cached, prefix-cache hit tokens, preemptions, steps). Counters are
 * touched only by the loop thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srv_internal.h"

static const double bounds[SRV_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                0.25,  0.5,    1,     2.5,  5,     10,  30};
static const int status_codes[SRV_N_STATUS] = {200, 400, 401, 404, 405, 408, 413, 429, 500, 503, 0, 0};

const char *const srv_endpoint_names[SRV_N_EP] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health",
                                                  "/tokenize", "/detokenize", "/metrics", "other"};

void srv_hist_add(srv_hist *h, double seconds) {
    int i = 0;
    while (i < SRV_HIST_BUCKETS && seconds > bounds[i]) i++;
    h->count[i]++;
    h->sum += seconds;
}

/* The slot of a status code (the last one: any other code). */
static int status_slot(int status) {
    for (int i = 0; i < SRV_N_STATUS - 2; i++)
        if (status_codes[i] == status) return i;
    return SRV_N_STATUS - 1;
}

void srv_metrics_count(srv_metrics *m, int endpoint, int status) {
    if (endpoint < 0 || endpoint >= SRV_N_EP) endpoint = SRV_EP_OTHER;
    m->requests[endpoint][status_slot(status)]++;
}

static void hist_text(sbuf *b, const char *name, const char *help, const srv_hist *h) {
    sbuf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < SRV_HIST_BUCKETS; i++) {
        cum += h->count[i];
        sbuf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)cum);
    }
    cum += h->count[SRV_HIST_BUCKETS];
    sbuf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)cum, name, h->sum,
                name, (unsigned long long)cum);
}

static void metric(sbuf *b, const char *name, const char *type, const char *help, double v) {
    sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

static void requests_text(sbuf *b, const srv_metrics *m) {
    sbuf_printf(b, "# HELP ignis_http_requests_total HTTP requests answered, by endpoint and status code\n"
                   "# TYPE ignis_http_requests_total counter\n");
    for (int e = 0; e < SRV_N_EP; e++)
        for (int k = 0; k < SRV_N_STATUS; k++) {
            if (!m->requests[e][k]) continue;
            char code[16];
            if (status_codes[k])
                snprintf(code, sizeof code, "%d", status_codes[k]);
            else
                snprintf(code, sizeof code, "other");
            sbuf_printf(b, "ignis_http_requests_total{endpoint=\"%s\",status=\"%s\"} %llu\n", srv_endpoint_names[e], code,
                        (unsigned long long)m->requests[e][k]);
        }
}

/* The process's resident memory in bytes (/proc/self/statm), 0 when it cannot be read. */
static double resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, rss = 0;
    int ok = f && fscanf(f, "%llu %llu", &size, &rss) == 2;
    if (f) fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (double)rss * (double)page : 0.0;
}

char *srv_metrics_text(const srv_metrics *m, ig_engine *e) {
    ig_engine_stats st;
    ig_engine_get_stats(e, &st);
    sbuf b = {0};
    requests_text(&b, m);
    metric(&b, "ignis_requests_running", "gauge", "sequences holding KV pages", st.running);
    metric(&b, "ignis_requests_waiting", "gauge", "requests queued for the engine, preempted ones included", st.waiting);
    metric(&b, "ignis_requests_cancelled_total", "counter", "requests stopped because their client went away",
           (double)m->cancelled);
    metric(&b, "ignis_prompt_tokens_total", "counter", "prompt tokens of the requests started", (double)m->prompt_tokens);
    metric(&b, "ignis_generation_tokens_total", "counter", "tokens generated for the requests", (double)m->generation_tokens);
    metric(&b, "ignis_engine_prefill_tokens_total", "counter", "prompt tokens the engine computed (recomputed ones too)",
           (double)st.tokens_prefilled);
    metric(&b, "ignis_engine_steps_total", "counter", "forward steps the engine ran", (double)st.steps);
    metric(&b, "ignis_kv_pages_total", "gauge", "KV cache pages", st.kv_pages_total);
    metric(&b, "ignis_kv_pages_used", "gauge", "KV pages held by sequences or the prefix cache", st.kv_pages_used);
    metric(&b, "ignis_kv_pages_free", "gauge", "KV pages free", st.kv_pages_free);
    metric(&b, "ignis_kv_pages_cached", "gauge", "KV pages only the prefix cache holds (free on demand)", st.kv_pages_cached);
    metric(&b, "ignis_prefix_cache_hit_tokens_total", "counter", "prompt tokens whose KV came from the prefix cache",
           (double)st.prefix_hit_tokens);
    metric(&b, "ignis_prefix_cache_host_hit_tokens_total", "counter",
           "prompt tokens whose KV came back from the prefix cache's host tier", (double)st.prefix_host_hit_tokens);
    metric(&b, "ignis_kv_host_pages_used", "gauge", "host-tier pages holding evicted KV pages", st.kv_host_pages_used);
    metric(&b, "ignis_kv_host_bytes_moved_total", "counter", "bytes the host tier copied, both ways",
           (double)(st.kv_bytes_to_host + st.kv_bytes_from_host));
    metric(&b, "ignis_preemptions_total", "counter", "sequences preempted (recomputed later) when KV pages ran out",
           (double)st.preemptions);
    metric(&b, "process_resident_memory_bytes", "gauge", "resident memory of the server process (weights, KV pages written, heap)",
           resident_bytes());
    hist_text(&b, "ignis_time_to_first_token_seconds", "time from a request's arrival to its first token", &m->ttft);
    hist_text(&b, "ignis_inter_token_latency_seconds", "time between tokens of a choice", &m->itl);
    hist_text(&b, "ignis_request_duration_seconds", "time from a request's arrival to its last token", &m->e2e);
    return b.p;
}
