/* The data-file search order of hf_datafile.h: the working directory, then the
 * installed directory. access(2) only: the caller opens the file and reports why
 * it cannot. */
#include "hf_datafile.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hf_assert.h"

const char *hf_datafile_find(const char *local_path, const char *installed_name, char *out,
                             size_t out_size)
{
    hf_assert(local_path && installed_name && out && out_size > 0);
    if (access(local_path, R_OK) == 0) {
        snprintf(out, out_size, "%s", local_path);
        return out;
    }
    const char *dir = getenv("HOLDFAST_SYSCONFDIR");
    if (!dir || !*dir)
        dir = HF_SYSCONFDIR;
    int n = snprintf(out, out_size, "%s/%s", dir, installed_name);
    if (n < 0 || (size_t)n >= out_size || access(out, R_OK) != 0)
        snprintf(out, out_size, "%s", local_path);
    return out;
}
