/* import_any.c — ir_import_any: picks the importer for a path (HF folder, GGUF file or a
 * serialized .igraph), by what the path is and by the file's magic bytes rather than its name
 * alone (a .gguf suffix also selects GGUF so that its importer can name a damaged file).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "ir.h"

ig_status ir_import_any(const char *path, ir_graph **out, ig_err *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return ig_fail(err, IG_ERR_IO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return ir_import_hf(path, out, err);
    char magic[8] = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp) return ig_fail(err, IG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t n = fread(magic, 1, sizeof magic, fp);
    fclose(fp);
    size_t pl = strlen(path);
    if ((n >= 4 && memcmp(magic, "GGUF", 4) == 0) || (pl > 5 && strcmp(path + pl - 5, ".gguf") == 0))
        return ir_import_gguf(path, out, err);
    if (n == sizeof magic && memcmp(magic, "IGGRAPH", 8) == 0) return ir_load(path, out, err);
    return ig_fail(err, IG_ERR_FORMAT,
                   "%s: not a model folder, a GGUF file or an ignis graph (.igraph)", path);
}
