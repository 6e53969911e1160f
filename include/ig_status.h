/* ig_status.h — status codes and error strings shared by every ignis module.
 *
 * Fallible functions return ig_status and, on failure, write a one-line message naming what was
 * wrong (file, tensor, key, value) into a caller-provided ig_err. Library code never prints or
 * exits; the CLI prints err.msg.
 */
#ifndef IG_STATUS_H
#define IG_STATUS_H

#include <stdarg.h>
#include <stdio.h>

/* Marks the functions libignis.so exports (the core is built with hidden visibility). */
#ifndef IG_API
#if defined(__GNUC__)
#define IG_API __attribute__((visibility("default")))
#else
#define IG_API
#endif
#endif

typedef enum ig_status {
    IG_OK = 0,
    IG_ERR_IO = 1,          /* file missing, unreadable, short read */
    IG_ERR_FORMAT = 2,      /* malformed file contents */
    IG_ERR_UNSUPPORTED = 3, /* valid input we do not handle yet */
    IG_ERR_INVALID = 4,     /* invalid argument or request */
    IG_ERR_NOMEM = 5,
    IG_ERR_MISMATCH = 6,    /* hash, ABI, shape or target mismatch */
    IG_ERR_CPU = 7,         /* package needs a CPU feature this machine lacks */
    IG_ERR_BUILD = 8,       /* C compiler failed */
    IG_ERR_INTERNAL = 9,
    IG_ERR_TIMEOUT = 10,    /* nothing arrived within the wait (queue reads) */
    IG_ERR_BUSY = 11,       /* engine at its request limit: try again later */
    IG_ERR_CLOSED = 12      /* engine shut down */
} ig_status;

typedef struct ig_err {
    char msg[1024];
} ig_err;

/* Formats into err (if non-NULL) and returns st: `return ig_fail(err, IG_ERR_IO, "...", ...);` */
static inline ig_status ig_fail(ig_err *err, ig_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static inline ig_status ig_fail(ig_err *err, ig_status st, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* "io error", "invalid argument", ... (a static string; "unknown status" outside the enum). */
IG_API const char *ig_status_name(ig_status st);

#endif
