/* libFuzzer harness for the payment-webhook signature check (webhook_sig.c): the
 * Holdfast-Signature header and the body come from anyone who can reach the HTTP
 * front. The input is "<header>\n<body>". Any header must give one of the results
 * with a reason, without reading past it; and whatever the body, a header signed
 * for it must verify while the same header on a body one byte off must not. The
 * corpus (tests/fuzz/corpus/fuzz_webhook_sig) is replayed by make test-fuzz-corpus. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "http/webhook_sig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECRET "whsec_fuzz_secret_0123456789"
#define NOW_S  1700000000LL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char header[HF_WEBHOOK_SIG_HEADER_LEN_MAX * 2 + 1];
    const uint8_t *nl = memchr(data, '\n', size);
    size_t header_len = nl ? (size_t)(nl - data) : size;
    const uint8_t *body = nl ? nl + 1 : data + size;
    size_t body_len = size - (size_t)(body - data);
    if (header_len >= sizeof header)
        header_len = sizeof header - 1;
    memcpy(header, data, header_len);
    header[header_len] = '\0';

    webhook_secrets_t secrets;
    char errstr[256], why[512];
    webhook_secrets_init(&secrets);
    hf_assert(webhook_secrets_add(&secrets, SECRET, errstr, sizeof errstr) == HF_OK);

    webhook_sig_result_t r =
        webhook_sig_verify(&secrets, header, body, body_len, NOW_S, 300, why, sizeof why);
    hf_assert(r >= WEBHOOK_SIG_OK && r <= WEBHOOK_SIG_INTERNAL && why[0] != '\0');
    hf_assert(strcmp(webhook_sig_result_name(r), "unknown") != 0);

    char signed_header[WEBHOOK_SIG_HEADER_SIZE];
    hf_assert(webhook_sig_sign(SECRET, NOW_S, body, body_len, signed_header,
                               sizeof signed_header) == HF_OK);
    hf_assert(webhook_sig_verify(&secrets, signed_header, body, body_len, NOW_S, 300, NULL, 0) ==
              WEBHOOK_SIG_OK);
    if (body_len > 0) {
        uint8_t *changed = malloc(body_len);
        hf_assert(changed);
        memcpy(changed, body, body_len);
        changed[body_len / 2] ^= 0x20;
        hf_assert(webhook_sig_verify(&secrets, signed_header, changed, body_len, NOW_S, 300, NULL,
                                     0) == WEBHOOK_SIG_MISMATCH);
        free(changed);
    }
    return 0;
}
