/* Where holdfast finds the data files it ships with, the topic set (topics.json) and
 * the warehouse network (warehouses.json), when no option or setting names one. A
 * checkout and the Docker image keep them under the working directory
 * (topics/topics.json, config/warehouses.json); an installed package keeps them in
 * /etc/holdfast. One search order for every binary, so an operator reads it once
 * (docs/CONFIGURATION.md, "Files holdfast finds by itself"). */
#ifndef HF_DATAFILE_H
#define HF_DATAFILE_H

#include <stddef.h>

/* The installed location; HOLDFAST_SYSCONFDIR replaces it at run time (a package
 * unpacked elsewhere than /, as `make test-deb` does). */
#ifndef HF_SYSCONFDIR
#define HF_SYSCONFDIR "/etc/holdfast"
#endif

/* Room for a found path (callers' buffers). */
#define HF_DATAFILE_PATH_MAX 512

/* The file to open for a data file nobody named: `local_path` (relative to the
 * working directory: "config/warehouses.json") when it is readable, else
 * "$HOLDFAST_SYSCONFDIR/<installed_name>" (default HF_SYSCONFDIR/<installed_name>)
 * when that is readable, else `local_path` again, so the error of whoever opens it
 * names the checkout path (callers' help texts name both). Written to out (always
 * NUL-terminated; a directory too long for out is cut, and that file is then not
 * found); returns out. An explicitly named file never goes through this. */
const char *hf_datafile_find(const char *local_path, const char *installed_name, char *out,
                             size_t out_size);

#endif
