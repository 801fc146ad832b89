/* libFuzzer harness for the API keys (processor/http/api_keys.c): the
 * Authorization header comes from anyone who can reach the HTTP front, the keys
 * file from an operator's editor. The input is "<header>\n<keys file>". Any keys
 * file must load or be refused with a reason naming the file; any header must get
 * a verdict, against the loaded keys and against a fixed set, never a crash or a
 * read past its end; and the fixed key's own secret must still be allowed. The
 * corpus (tests/fuzz/corpus/fuzz_api_keys) is replayed by make test-fuzz-corpus. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf_assert.h"
#include "http/api_keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* printf %s hf_fuzz_secret_0123456789abcdef | sha256sum */
#define SECRET "hf_fuzz_secret_0123456789abcdef"
#define HASH   "d1422e7d13f1e04da7d07491b662cdf0078808aefa9662444f125d8bd3804920"

static const api_keys_rate_t defaults = {10, 20};

static void write_file(const char *path, const uint8_t *text, size_t len)
{
    FILE *fp = fopen(path, "wb");
    hf_assert(fp);
    hf_assert(fwrite(text, 1, len, fp) == len || len == 0);
    fclose(fp);
}

/* Each run is a second later, so that the fixed key's bucket (1000/s) never runs dry. */
static int64_t now_ms = 1000000;

static void check_verdict(api_keys_t *keys, const char *header)
{
    static const api_scope_t scopes[] = {API_SCOPE_RESERVE, API_SCOPE_COMMIT, API_SCOPE_RELEASE,
                                         API_SCOPE_READ};
    for (size_t i = 0; i < sizeof scopes / sizeof scopes[0]; i++) {
        api_keys_who_t who;
        api_keys_verdict_t v = api_keys_check(keys, header, scopes[i], now_ms, &who);
        hf_assert(v >= API_KEYS_ALLOWED && v <= API_KEYS_LIMITED);
        bool named = v == API_KEYS_ALLOWED || v == API_KEYS_FORBIDDEN || v == API_KEYS_LIMITED;
        hf_assert(named == (who.key_id[0] != '\0'));
        hf_assert(v != API_KEYS_LIMITED || who.retry_after_s >= 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64], fixed_path[64];
    static api_keys_t *fixed;
    if (!fixed) {
        snprintf(fixed_path, sizeof fixed_path, "/tmp/fuzz_api_keys_fixed.%d", (int)getpid());
        static const char text[] = "fuzz " HASH " reserve,read 1000 1000\n";
        write_file(fixed_path, (const uint8_t *)text, sizeof text - 1);
        char errstr[512];
        hf_assert(api_keys_load(fixed_path, &defaults, &fixed, errstr, sizeof errstr) == HF_OK);
        unlink(fixed_path);
        snprintf(path, sizeof path, "/tmp/fuzz_api_keys.%d", (int)getpid());
    }
    static char header[HF_API_KEY_SECRET_LEN_MAX * 2 + 1];
    const uint8_t *nl = memchr(data, '\n', size);
    size_t header_len = nl ? (size_t)(nl - data) : size;
    if (header_len >= sizeof header)
        header_len = sizeof header - 1;
    memcpy(header, data, header_len);
    header[header_len] = '\0';
    const uint8_t *file = nl ? nl + 1 : data + size;
    size_t file_len = size - (size_t)(file - data);

    now_ms += 1000;
    check_verdict(fixed, header);
    api_keys_who_t who;
    hf_assert(api_keys_check(fixed, "Bearer " SECRET, API_SCOPE_READ, now_ms, &who) ==
              API_KEYS_ALLOWED);

    write_file(path, file, file_len);
    char errstr[512] = "";
    api_keys_t *keys = NULL;
    int err = api_keys_load(path, &defaults, &keys, errstr, sizeof errstr);
    unlink(path);
    if (err) {
        hf_assert(err == HF_ERR_CONFIG && keys == NULL && strstr(errstr, path));
        return 0;
    }
    hf_assert(api_keys_count(keys) <= HF_API_KEYS_MAX);
    check_verdict(keys, header);
    api_keys_destroy(keys);
    return 0;
}
