/* pkg_file.c — package files in a directory or a one-file bundle (see pkg_file.h). */
#include "pkg_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint32_t get_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* One directory entry at p into e: its name is NUL-terminated, has no '/', and the data lies in
 * [0, dir_off). */
static ig_status parse_entry(const char *label, const uint8_t *p, int32_t k, uint64_t dir_off, pkgf_entry *e, ig_err *err) {
    const char *nul = memchr(p, 0, PKGF_NAME_MAX);
    if (!nul || nul == (const char *)p)
        return ig_fail(err, IG_ERR_FORMAT, "%s: bundle directory entry %d has no name (damaged directory)", label, k);
    for (const uint8_t *q = (const uint8_t *)nul; q < p + PKGF_NAME_MAX; q++)
        if (*q) return ig_fail(err, IG_ERR_FORMAT, "%s: bundle directory entry %d has bytes after its name (damaged directory)",
                               label, k);
    if (get_u64(p + 88)) return ig_fail(err, IG_ERR_FORMAT, "%s: bundle directory entry %d: reserved bytes set (damaged)", label, k);
    memcpy(e->name, p, PKGF_NAME_MAX);
    if (strchr(e->name, '/'))
        return ig_fail(err, IG_ERR_FORMAT, "%s: bundle directory entry %d (%.63s) has a '/' in its name", label, k, e->name);
    e->offset = get_u64(p + 64);
    e->size = get_u64(p + 72);
    e->hash = get_u64(p + 80);
    if (e->offset > dir_off || e->size > dir_off - e->offset)
        return ig_fail(err, IG_ERR_FORMAT,
                       "%s: bundle entry %s (bytes %llu..%llu) lies past the data, which ends at %llu (truncated or damaged)",
                       label, e->name, (unsigned long long)e->offset, (unsigned long long)(e->offset + e->size),
                       (unsigned long long)dir_off);
    return IG_OK;
}

/* No two entries share a name; entries other than "code" do not overlap each other or it. */
static ig_status check_entries(const char *label, const pkgf_bundle *b, ig_err *err) {
    for (int32_t i = 0; i < b->n; i++)
        for (int32_t j = i + 1; j < b->n; j++) {
            const pkgf_entry *x = &b->e[i], *y = &b->e[j];
            if (!strcmp(x->name, y->name))
                return ig_fail(err, IG_ERR_FORMAT, "%s: the bundle lists %s twice", label, x->name);
            if (x->size && y->size && x->offset < y->offset + y->size && y->offset < x->offset + x->size)
                return ig_fail(err, IG_ERR_FORMAT, "%s: bundle entries %s and %s overlap", label, x->name, y->name);
        }
    return IG_OK;
}

ig_status pkgf_parse(const char *label, const uint8_t *tail, size_t tail_len, uint64_t file_size, pkgf_bundle *b,
                     ig_err *err) {
    memset(b, 0, sizeof *b);
    if (tail_len > file_size) return ig_fail(err, IG_ERR_INVALID, "%s: %zu tail bytes of a %llu-byte file", label, tail_len,
                                             (unsigned long long)file_size);
    if (tail_len < PKGF_TRAILER_BYTES)
        return ig_fail(err, IG_ERR_FORMAT, "%s: %llu bytes, too short for a bundle trailer (%d bytes)", label,
                       (unsigned long long)file_size, PKGF_TRAILER_BYTES);
    const uint8_t *t = tail + tail_len - PKGF_TRAILER_BYTES;
    if (memcmp(t, PKGF_MAGIC, 8) || memcmp(t + 56, PKGF_MAGIC, 8))
        return ig_fail(err, IG_ERR_FORMAT, "%s: no ignis bundle trailer at the end of its %llu bytes (truncated, "
                       "appended to, or not a bundle)", label, (unsigned long long)file_size);
    uint32_t version = get_u32(t + 8), n = get_u32(t + 12);
    uint64_t dir_off = get_u64(t + 16), size = get_u64(t + 24);
    for (int i = 32; i < 56; i++)
        if (t[i]) return ig_fail(err, IG_ERR_FORMAT, "%s: the bundle trailer's reserved bytes are set (damaged)", label);
    if (version != PKGF_VERSION)
        return ig_fail(err, IG_ERR_FORMAT, "%s: bundle format version %u, this runtime reads version %d", label, version,
                       PKGF_VERSION);
    if (size != file_size)
        return ig_fail(err, IG_ERR_FORMAT, "%s: the bundle trailer says %llu bytes, the file has %llu (truncated or damaged)",
                       label, (unsigned long long)size, (unsigned long long)file_size);
    if (n < 1 || n > PKGF_MAX_ENTRIES)
        return ig_fail(err, IG_ERR_FORMAT, "%s: the bundle lists %u files (1 to %d expected)", label, n, PKGF_MAX_ENTRIES);
    uint64_t dir_bytes = (uint64_t)n * PKGF_ENTRY_BYTES;
    if (dir_off != file_size - PKGF_TRAILER_BYTES - dir_bytes || dir_off > file_size)
        return ig_fail(err, IG_ERR_FORMAT, "%s: the bundle directory offset %llu does not end at the trailer (damaged)", label,
                       (unsigned long long)dir_off);
    if (dir_bytes + PKGF_TRAILER_BYTES > tail_len)
        return ig_fail(err, IG_ERR_INVALID, "%s: the bundle directory is not inside the %zu bytes read", label, tail_len);
    const uint8_t *d = tail + tail_len - PKGF_TRAILER_BYTES - dir_bytes;
    b->file_size = file_size;
    for (uint32_t k = 0; k < n; k++) {
        ig_status st = parse_entry(label, d + (size_t)k * PKGF_ENTRY_BYTES, (int32_t)k, dir_off, &b->e[k], err);
        if (st) return st;
        b->n = (int32_t)k + 1;
    }
    return check_entries(label, b, err);
}

void pkgf_encode(const pkgf_bundle *b, uint8_t *out) {
    uint64_t dir_bytes = (uint64_t)b->n * PKGF_ENTRY_BYTES;
    memset(out, 0, dir_bytes + PKGF_TRAILER_BYTES);
    for (int32_t k = 0; k < b->n; k++) {
        uint8_t *p = out + (size_t)k * PKGF_ENTRY_BYTES;
        snprintf((char *)p, PKGF_NAME_MAX, "%s", b->e[k].name);
        put_u64(p + 64, b->e[k].offset);
        put_u64(p + 72, b->e[k].size);
        put_u64(p + 80, b->e[k].hash);
    }
    uint8_t *t = out + dir_bytes;
    memcpy(t, PKGF_MAGIC, 8);
    put_u32(t + 8, PKGF_VERSION);
    put_u32(t + 12, (uint32_t)b->n);
    put_u64(t + 16, b->file_size - PKGF_TRAILER_BYTES - dir_bytes);
    put_u64(t + 24, b->file_size);
    memcpy(t + 56, PKGF_MAGIC, 8);
}

ig_status pkgf_open(const char *path, pkgf_bundle *b, int *fd_out, ig_err *err) {
    if (fd_out) *fd_out = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        ig_status st = ig_fail(err, IG_ERR_IO, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return st;
    }
    uint64_t size = (uint64_t)sb.st_size;
    size_t want = PKGF_MAX_ENTRIES * PKGF_ENTRY_BYTES + PKGF_TRAILER_BYTES;
    size_t n = size < want ? (size_t)size : want;
    uint8_t *tail = malloc(n ? n : 1);
    ig_status st = IG_OK;
    if (!tail) st = ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
    else if (pread(fd, tail, n, (off_t)(size - n)) != (ssize_t)n) st = ig_fail(err, IG_ERR_IO, "%s: cannot read its end", path);
    else st = pkgf_parse(path, tail, n, size, b, err);
    free(tail);
    if (st || !fd_out) close(fd);
    else *fd_out = fd;
    return st;
}

void pkgf_entry_symbol(const char *model_file, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "ig_model_entry__%s", model_file);
    for (size_t i = 16; i < n && i < cap; i++)
        if (!((buf[i] >= 'a' && buf[i] <= 'z') || (buf[i] >= 'A' && buf[i] <= 'Z') || (buf[i] >= '0' && buf[i] <= '9'))) buf[i] = '_';
}

const pkgf_entry *pkgf_find(const pkgf_bundle *b, const char *name) {
    for (int32_t k = 0; k < b->n; k++)
        if (!strcmp(b->e[k].name, name)) return &b->e[k];
    return NULL;
}

int pkgf_is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* path = "BUNDLE/NAME" with BUNDLE a regular file: the bundle's path into dir, NAME's offset in path. */
static int split_bundle_path(const char *path, char *dir, size_t cap, const char **name) {
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path || (size_t)(slash - path) >= cap) return 0;
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = 0;
    *name = slash + 1;
    return pkgf_is_file(dir);
}

static ig_status read_entry(const char *path, const char *bundle, const char *name, char **data, size_t *len, ig_err *err) {
    pkgf_bundle b;
    int fd;
    ig_status st = pkgf_open(bundle, &b, &fd, err);
    if (st) return st;
    const pkgf_entry *e = pkgf_find(&b, name);
    char *buf = NULL;
    if (!e) st = ig_fail(err, IG_ERR_IO, "%s: the bundle %s holds no file %s", path, bundle, name);
    else if (!(buf = malloc((size_t)e->size + 1))) st = ig_fail(err, IG_ERR_NOMEM, "%s: cannot allocate %llu bytes", path,
                                                                   (unsigned long long)e->size);
    else if (pread(fd, buf, (size_t)e->size, (off_t)e->offset) != (ssize_t)e->size)
        st = ig_fail(err, IG_ERR_IO, "%s: short read from the bundle", path);
    close(fd);
    if (st) {
        free(buf);
        return st;
    }
    buf[e->size] = 0;
    *data = buf;
    if (len) *len = (size_t)e->size;
    return IG_OK;
}

ig_status pkgf_read(const char *path, char **data, size_t *len, ig_err *err) {
    *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        char dir[4096];
        const char *name;
        if (e == ENOTDIR && split_bundle_path(path, dir, sizeof dir, &name)) return read_entry(path, dir, name, data, len, err);
        return ig_fail(err, IG_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return ig_fail(err, IG_ERR_IO, "%s: cannot seek", path);
    }
    long n = ftell(f);
    rewind(f);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf) {
        fclose(f);
        return ig_fail(err, n < 0 ? IG_ERR_IO : IG_ERR_NOMEM, "%s: cannot allocate %ld bytes", path, n);
    }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(buf);
        return ig_fail(err, IG_ERR_IO, "%s: short read (%zu of %ld bytes)", path, got, n);
    }
    buf[n] = 0;
    *data = buf;
    if (len) *len = (size_t)n;
    return IG_OK;
}

int pkgf_exists(const char *path) {
    if (access(path, R_OK) == 0) return 1;
    if (errno != ENOTDIR) return 0;
    char dir[4096];
    const char *name;
    pkgf_bundle b;
    return split_bundle_path(path, dir, sizeof dir, &name) && pkgf_open(dir, &b, NULL, NULL) == IG_OK && pkgf_find(&b, name);
}
