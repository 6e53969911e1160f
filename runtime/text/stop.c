/* stop.c — see stop.h. The buffer holds [emitted by the last call | held]; each call drops the
 * emitted part, appends the new text, searches it (a match may start in the held part), and
 * computes the longest suffix that is a proper prefix of some stop string. */
#include "stop.h"

#include <stdlib.h>
#include <string.h>

struct stop_matcher {
    int32_t n;
    char **stops;     /* [n] copies */
    size_t *lens;     /* [n] */
    size_t max_len;
    char *buf;        /* [cap] */
    size_t cap;
    size_t emitted;   /* bytes at the start of buf handed out by the last call */
    size_t held;      /* bytes after them still held back */
    int stopped;
    int32_t which;
};

void stop_free(stop_matcher *m) {
    if (!m) return;
    for (int32_t i = 0; i < m->n; i++) free(m->stops[i]);
    free(m->stops);
    free(m->lens);
    free(m->buf);
    free(m);
}

ig_status stop_new(const char *const *stops, int32_t n, stop_matcher **out, ig_err *err) {
    if (!out) return ig_fail(err, IG_ERR_INVALID, "stop_new: out is NULL");
    *out = NULL;
    if (n < 0 || (n > 0 && !stops)) return ig_fail(err, IG_ERR_INVALID, "stop_new: bad stop list (n = %d)", (int)n);
    for (int32_t i = 0; i < n; i++)
        if (!stops[i] || !stops[i][0])
            return ig_fail(err, IG_ERR_INVALID, "stop string %d is %s", (int)i, stops[i] ? "empty" : "NULL");
    stop_matcher *m = calloc(1, sizeof *m);
    if (!m) goto nomem;
    m->which = -1;
    if (n > 0) {
        m->stops = calloc((size_t)n, sizeof *m->stops);
        m->lens = calloc((size_t)n, sizeof *m->lens);
        if (!m->stops || !m->lens) goto nomem;
    }
    m->n = n;
    for (int32_t i = 0; i < n; i++) {
        m->lens[i] = strlen(stops[i]);
        m->stops[i] = malloc(m->lens[i] + 1);
        if (!m->stops[i]) goto nomem;
        memcpy(m->stops[i], stops[i], m->lens[i] + 1);
        if (m->lens[i] > m->max_len) m->max_len = m->lens[i];
    }
    m->cap = m->max_len + 64;
    m->buf = malloc(m->cap);
    if (!m->buf) goto nomem;
    *out = m;
    return IG_OK;
nomem:
    stop_free(m);
    return ig_fail(err, IG_ERR_NOMEM, "stop_new: out of memory");
}

int32_t stop_which(const stop_matcher *m) { return m ? m->which : -1; }

/* First occurrence of needle in hay, or -1. */
static ptrdiff_t find(const char *hay, size_t hn, const char *needle, size_t nn) {
    if (nn > hn) return -1;
    for (size_t i = 0; i + nn <= hn; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, nn) == 0) return (ptrdiff_t)i;
    return -1;
}

ig_status stop_feed(stop_matcher *m, const char *text, size_t len, const char **emit, size_t *emit_len,
                    int *stopped) {
    *emit = m ? m->buf : NULL;
    *emit_len = 0;
    if (!m) return IG_ERR_INVALID;
    *stopped = m->stopped;
    if (m->stopped) return IG_OK;
    if (m->emitted) {
        memmove(m->buf, m->buf + m->emitted, m->held);
        m->emitted = 0;
    }
    size_t n = m->held + len;
    if (n > m->cap) {
        size_t cap = m->cap * 2 > n ? m->cap * 2 : n;
        char *b = realloc(m->buf, cap);
        if (!b) return IG_ERR_NOMEM;
        m->buf = b;
        m->cap = cap;
    }
    if (len) memcpy(m->buf + m->held, text, len);
    *emit = m->buf;

    /* Earliest stop string (a match may start inside the held bytes, never before them). */
    ptrdiff_t best = -1;
    for (int32_t i = 0; i < m->n; i++) {
        ptrdiff_t at = find(m->buf, best >= 0 ? (size_t)best + m->lens[i] : n, m->stops[i], m->lens[i]);
        if (at >= 0 && (best < 0 || at < best)) {
            best = at;
            m->which = i;
        }
    }
    if (best >= 0) {
        m->stopped = 1;
        *stopped = 1;
        *emit_len = (size_t)best;
        m->emitted = m->held = 0;
        return IG_OK;
    }

    /* Hold the longest suffix that is a proper prefix of a stop string. */
    size_t hold = 0;
    size_t lim = m->max_len ? m->max_len - 1 : 0;
    if (lim > n) lim = n;
    for (size_t L = lim; L > 0 && !hold; L--)
        for (int32_t i = 0; i < m->n; i++)
            if (m->lens[i] > L && memcmp(m->buf + n - L, m->stops[i], L) == 0) {
                hold = L;
                break;
            }
    m->emitted = n - hold;
    m->held = hold;
    *emit_len = m->emitted;
    return IG_OK;
}

void stop_flush(stop_matcher *m, const char **emit, size_t *emit_len) {
    *emit = m ? m->buf : NULL;
    *emit_len = 0;
    if (!m || m->stopped) return;
    if (m->emitted) memmove(m->buf, m->buf + m->emitted, m->held);
    *emit_len = m->held;
    m->emitted = m->held;
    m->held = 0;
}
