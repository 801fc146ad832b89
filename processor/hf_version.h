/* What `--version` prints for every binary: holdfast's own version (from `git
 * describe`, baked in by the Makefile, with a fallback when built outside git)
 * and the libraries it runs with. librdkafka reports its own runtime version, and
 * whether it is the project's own build (tools/librdkafka.sh, linked static) or
 * the system's; RocksDB and avro-c have no C call for it, so for them the version
 * built against is printed with the shared object actually loaded. */
#ifndef HF_VERSION_H
#define HF_VERSION_H

#include <stdio.h>

/* "dbfbba3-dirty", "v0.3.0", or the Makefile's fallback; static text. */
const char *hf_version(void);

/* Several lines, the first "PROG (holdfast) VERSION". */
void hf_version_print(FILE *out, const char *prog);

#endif
