/* stop.h — stop-string matching over streamed text. The detokenizer hands over the text of each
 * new token; the matcher emits what can no longer be the start of a stop string and holds back
 * the rest (at most max(len(stop)) - 1 bytes), so a stop string that spans many tokens is never
 * half-emitted. Matching is on bytes, so multi-byte UTF-8 stop strings work, and since a held
 * suffix always starts where a stop string starts, valid UTF-8 input is never split inside a
 * character. One matcher per sequence; not thread-safe. */
#ifndef IG_STOP_H
#define IG_STOP_H

#include <stddef.h>
#include <stdint.h>
#include "ig_status.h"

typedef struct stop_matcher stop_matcher;

/* stops: borrowed [n] NUL-terminated strings, copied; empty strings are IG_ERR_INVALID. n = 0 is a
 * matcher that passes everything through. *out: free with stop_free. */
ig_status stop_new(const char *const *stops, int32_t n, stop_matcher **out, ig_err *err);
void stop_free(stop_matcher *m); /* accepts NULL */

/* Feeds text[0..len) (borrowed). *emit / *emit_len: bytes that can be emitted now (a borrowed
 * pointer into the matcher, valid until the next call). *stopped = 1 once a stop string is
 * complete: the text before the earliest stop string is emitted, the stop string and everything
 * after it never is, and later feeds emit nothing. IG_ERR_NOMEM if the buffer cannot grow. */
ig_status stop_feed(stop_matcher *m, const char *text, size_t len, const char **emit, size_t *emit_len,
                    int *stopped);

/* End of generation without a stop: emits what is held (nothing after a stop). */
void stop_flush(stop_matcher *m, const char **emit, size_t *emit_len);

/* Which stop string matched (index into stops), or -1. */
int32_t stop_which(const stop_matcher *m);

#endif
