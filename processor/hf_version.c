/* Version report (hf_version.h). The build's identity comes from the generated
 * header hf_version_gen.h (Makefile: git describe, pkg-config --modversion, which
 * librdkafka it chose); the loaded libraries are found by walking the program headers
 * of what the dynamic linker mapped (dl_iterate_phdr), with the symlinks resolved to
 * the real file. */
#include "hf_version.h"

#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "hf_version_gen.h"
#include "kafka.h"

const char *hf_version(void)
{
    return HF_VERSION;
}

typedef struct {
    const char *stem; /* "librocksdb.so" */
    char path[PATH_MAX];
} lib_find_t;

static int find_lib(struct dl_phdr_info *info, size_t size, void *opaque)
{
    lib_find_t *f = opaque;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    if (!base || strncmp(base + 1, f->stem, strlen(f->stem)) != 0)
        return 0;
    if (!realpath(info->dlpi_name, f->path))
        snprintf(f->path, sizeof f->path, "%s", info->dlpi_name);
    return 1;
}

static void print_lib(FILE *out, const char *name, const char *built, const char *stem)
{
    lib_find_t f = {stem, ""};
    dl_iterate_phdr(find_lib, &f);
    if (f.path[0])
        fprintf(out, "%-10s %s (built against; loaded %s)\n", name, built, f.path);
    else
        fprintf(out, "%-10s %s (built against; not loaded by this program)\n", name, built);
}

/* The project's own build is linked in (static: no shared object to find); a system
 * librdkafka is a shared object the dynamic linker loaded. */
static void print_rdkafka(FILE *out)
{
    lib_find_t f = {"librdkafka.so", ""};
    dl_iterate_phdr(find_lib, &f);
    fprintf(out, "%-10s %s (running; ", "librdkafka", kafka_version_str());
    if (HF_RDKAFKA_OWN_BUILD && !f.path[0])
        fprintf(out, "the project's own build, linked static: tools/librdkafka.sh)\n");
    else
        fprintf(out, "the system's, built against %s, %s%s)\n", HF_RDKAFKA_BUILD_VERSION,
                f.path[0] ? "loaded " : "linked static", f.path);
}

void hf_version_print(FILE *out, const char *prog)
{
    if (strcmp(prog, "holdfast") == 0)
        fprintf(out, "holdfast %s\n", hf_version());
    else
        fprintf(out, "%s (holdfast) %s\n", prog, hf_version());
    print_rdkafka(out);
    print_lib(out, "rocksdb", HF_ROCKSDB_BUILD_VERSION, "librocksdb.so");
    print_lib(out, "avro-c", HF_AVRO_BUILD_VERSION, "libavro.so");
}
