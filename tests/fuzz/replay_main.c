/* A main() for fuzz targets outside libFuzzer: runs LLVMFuzzerTestOneInput once on
 * every regular file of the directory argv[1], so the normal sanitizer test run
 * replays each fuzzer's corpus and past crashes (make test-fuzz-corpus). Exits 0
 * when every input ran; a bad input aborts under the sanitizers. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads the whole file into a buffer of exactly its size, so the sanitizers
 * catch a read one byte past the input. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    uint8_t *data = NULL;
    int rc = -1;

    if (!f || fstat(fileno(f), &st) != 0)
        goto done;
    data = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
    if (!data || fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        goto done;
    LLVMFuzzerTestOneInput(data, (size_t)st.st_size);
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(errno));
    free(data);
    if (f)
        fclose(f);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR *dir = opendir(argv[1]);
    if (!dir) {
        fprintf(stderr, "replay: cannot open %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    size_t count = 0;
    int failed = 0;
    struct dirent *de;
    char path[4096];
    while ((de = readdir(dir)) != NULL) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", argv[1], de->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (replay_file(path) != 0)
            failed = 1;
        else
            count++;
    }
    closedir(dir);
    printf("replayed %zu inputs from %s\n", count, argv[1]);
    return failed;
}
