/* status.c — names of the ig_status codes (ig_status.h), for messages and logs. */
#include "ig_status.h"

const char *ig_status_name(ig_status st) {
    switch (st) {
    case IG_OK: return "ok";
    case IG_ERR_IO: return "io error";
    case IG_ERR_FORMAT: return "format error";
    case IG_ERR_UNSUPPORTED: return "unsupported";
    case IG_ERR_INVALID: return "invalid argument";
    case IG_ERR_NOMEM: return "out of memory";
    case IG_ERR_MISMATCH: return "mismatch";
    case IG_ERR_CPU: return "missing cpu feature";
    case IG_ERR_BUILD: return "build failed";
    case IG_ERR_INTERNAL: return "internal error";
    case IG_ERR_TIMEOUT: return "timed out";
    case IG_ERR_BUSY: return "busy";
    case IG_ERR_CLOSED: return "closed";
    }
    return "unknown status";
}
