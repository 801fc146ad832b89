/* tls_creds.h: a certificate chain, its key and an optional client CA, read
 * from files, cross-checked (the key must be the certificate's), and shared by
 * reference between the listener and the connections that started with them. */
#include "tls_creds.h"

#include <errno.h>
#include <gnutls/x509.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hf_assert.h"
#include "hf_limits.h"

struct tls_creds {
    _Atomic int refs;
    gnutls_pcert_st chain[HF_TLS_CHAIN_MAX];
    unsigned int chain_count;
    gnutls_privkey_t key;
    gnutls_x509_trust_list_t client_ca; /* NULL: no client certificate asked */
    char fingerprint[TLS_CREDS_FINGERPRINT_BYTES];
    char serial[TLS_CREDS_SERIAL_BYTES];
    char not_after[TLS_CREDS_NOT_AFTER_BYTES];
};

/* Reads a whole file (at most HF_TLS_FILE_BYTES_MAX) into a GnuTLS datum the
 * caller frees with gnutls_free. */
static int read_file(const char *what, const char *path, gnutls_datum_t *out, char *errstr,
                     size_t errstr_size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(errstr, errstr_size,
                 "%s '%s' cannot be read: %s (check the path and that the "
                 "user running holdfast may read it)",
                 what, path, strerror(errno));
        return HF_ERR_CONFIG;
    }
    unsigned char *buf = gnutls_malloc(HF_TLS_FILE_BYTES_MAX + 1);
    size_t n = buf ? fread(buf, 1, HF_TLS_FILE_BYTES_MAX + 1, f) : 0;
    bool failed = buf && ferror(f);
    fclose(f);
    if (!buf)
        return HF_ERR_NOMEM;
    if (failed || n == 0 || n > HF_TLS_FILE_BYTES_MAX) {
        gnutls_free(buf);
        snprintf(errstr, errstr_size, "%s '%s' is %s", what, path,
                 failed   ? "unreadable (I/O error)"
                 : n == 0 ? "empty: write a PEM file there"
                          : "larger than 1 MiB: is it a PEM certificate or key?");
        return HF_ERR_CONFIG;
    }
    buf[n] = '\0';
    out->data = buf;
    out->size = (unsigned int)n;
    return HF_OK;
}

static void describe_leaf(tls_creds_t *c)
{
    unsigned char digest[32];
    size_t digest_size = sizeof digest;
    size_t pos = 0;
    if (gnutls_fingerprint(GNUTLS_DIG_SHA256, &c->chain[0].cert, digest, &digest_size) == 0)
        for (size_t i = 0; i < digest_size && pos + 4 <= sizeof c->fingerprint; i++)
            pos += (size_t)snprintf(c->fingerprint + pos, sizeof c->fingerprint - pos, "%s%02X",
                                    i ? ":" : "", digest[i]);
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0)
        return;
    if (gnutls_x509_crt_import(crt, &c->chain[0].cert, GNUTLS_X509_FMT_DER) == 0) {
        unsigned char serial[20];
        size_t serial_size = sizeof serial;
        if (gnutls_x509_crt_get_serial(crt, serial, &serial_size) == 0)
            for (size_t i = 0; i < serial_size; i++)
                snprintf(c->serial + 2 * i, sizeof c->serial - 2 * i, "%02X", serial[i]);
        time_t t = gnutls_x509_crt_get_expiration_time(crt);
        struct tm tm;
        if (t != (time_t)-1 && gmtime_r(&t, &tm))
            strftime(c->not_after, sizeof c->not_after, "%Y-%m-%d %H:%M UTC", &tm);
    }
    gnutls_x509_crt_deinit(crt);
}

/* The key's public half must be the leaf's: compare their key ids. */
static int check_key_matches(const tls_creds_t *c, const char *cert_file, const char *key_file,
                             char *errstr, size_t errstr_size)
{
    unsigned char cert_id[64] = {0}, key_id[64] = {0};
    size_t cert_id_size = sizeof cert_id, key_id_size = sizeof key_id;
    gnutls_pubkey_t pub;
    if (gnutls_pubkey_init(&pub) < 0)
        return HF_ERR_NOMEM;
    int rc = gnutls_pubkey_import_privkey(pub, c->key, 0, 0);
    if (rc == 0)
        rc = gnutls_pubkey_get_key_id(pub, 0, key_id, &key_id_size);
    gnutls_pubkey_deinit(pub);
    if (rc == 0)
        rc = gnutls_pubkey_get_key_id(c->chain[0].pubkey, 0, cert_id, &cert_id_size);
    if (rc < 0 || cert_id_size != key_id_size || memcmp(cert_id, key_id, key_id_size) != 0) {
        snprintf(errstr, errstr_size,
                 "the key in '%s' is not the key of the certificate in '%s' (the first "
                 "certificate of the file must be the one issued for this key: check that "
                 "both files come from the same issuance)",
                 key_file, cert_file);
        return HF_ERR_CONFIG;
    }
    return HF_OK;
}

static int load_chain_and_key(tls_creds_t *c, const char *cert_file, const char *key_file,
                              char *errstr, size_t errstr_size)
{
    gnutls_datum_t pem = {NULL, 0};
    int err = read_file("http TLS certificate file", cert_file, &pem, errstr, errstr_size);
    if (err)
        return err;
    c->chain_count = HF_TLS_CHAIN_MAX;
    int rc =
        gnutls_pcert_list_import_x509_raw(c->chain, &c->chain_count, &pem, GNUTLS_X509_FMT_PEM, 0);
    gnutls_free(pem.data);
    if (rc < 0 || c->chain_count == 0) {
        c->chain_count = 0;
        snprintf(errstr, errstr_size,
                 "'%s' holds no usable PEM certificate chain: %s (write the server's "
                 "certificate first, then its intermediates, at most %d in all)",
                 cert_file, rc < 0 ? gnutls_strerror(rc) : "none found", HF_TLS_CHAIN_MAX);
        return HF_ERR_CONFIG;
    }
    err = read_file("http TLS key file", key_file, &pem, errstr, errstr_size);
    if (err)
        return err;
    rc = gnutls_privkey_init(&c->key);
    if (rc == 0)
        rc = gnutls_privkey_import_x509_raw(c->key, &pem, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_memset(pem.data, 0, pem.size); /* the key's secret, not left in freed memory */
    gnutls_free(pem.data);
    if (rc < 0) {
        snprintf(errstr, errstr_size,
                 "'%s' holds no usable PEM private key (%s; an encrypted key is not supported: "
                 "decrypt it, e.g. openssl pkey -in KEY -out KEY.plain)",
                 key_file, gnutls_strerror(rc));
        return HF_ERR_CONFIG;
    }
    return check_key_matches(c, cert_file, key_file, errstr, errstr_size);
}

static int load_client_ca(tls_creds_t *c, const char *ca_file, char *errstr, size_t errstr_size)
{
    gnutls_datum_t pem = {NULL, 0};
    int err = read_file("http_tls_client_ca_file", ca_file, &pem, errstr, errstr_size);
    if (err)
        return err;
    int rc = gnutls_x509_trust_list_init(&c->client_ca, 0);
    if (rc == 0)
        rc = gnutls_x509_trust_list_add_trust_mem(c->client_ca, &pem, NULL, GNUTLS_X509_FMT_PEM, 0,
                                                  0);
    gnutls_free(pem.data);
    if (rc <= 0) {
        snprintf(errstr, errstr_size,
                 "http_tls_client_ca_file '%s' holds no usable PEM CA certificate (%s)", ca_file,
                 rc < 0 ? gnutls_strerror(rc) : "none found");
        return HF_ERR_CONFIG;
    }
    return HF_OK;
}

int tls_creds_load(const char *cert_file, const char *key_file, const char *client_ca_file,
                   tls_creds_t **out, char *errstr, size_t errstr_size)
{
    hf_assert(cert_file && key_file);
    tls_creds_t *c = calloc(1, sizeof *c);
    if (!c)
        return HF_ERR_NOMEM;
    atomic_init(&c->refs, 1);
    int err = load_chain_and_key(c, cert_file, key_file, errstr, errstr_size);
    if (!err && client_ca_file && client_ca_file[0])
        err = load_client_ca(c, client_ca_file, errstr, errstr_size);
    if (err) {
        tls_creds_unref(c);
        return err;
    }
    describe_leaf(c);
    *out = c;
    return HF_OK;
}

tls_creds_t *tls_creds_ref(tls_creds_t *c)
{
    int before = atomic_fetch_add(&c->refs, 1);
    hf_assert(before > 0);
    return c;
}

void tls_creds_unref(tls_creds_t *c)
{
    if (!c)
        return;
    int before = atomic_fetch_sub(&c->refs, 1);
    hf_assert(before > 0);
    if (before > 1)
        return;
    for (unsigned int i = 0; i < c->chain_count; i++)
        gnutls_pcert_deinit(&c->chain[i]);
    if (c->key)
        gnutls_privkey_deinit(c->key);
    if (c->client_ca)
        gnutls_x509_trust_list_deinit(c->client_ca, 1);
    free(c);
}

void tls_creds_select(tls_creds_t *c, gnutls_pcert_st **pcert, unsigned int *pcert_count,
                      gnutls_privkey_t *key)
{
    hf_assert(c->chain_count > 0 && c->key);
    *pcert = c->chain;
    *pcert_count = c->chain_count;
    *key = c->key;
}

bool tls_creds_requires_client_cert(const tls_creds_t *c)
{
    return c->client_ca != NULL;
}

int tls_creds_verify_client(const tls_creds_t *c, gnutls_session_t session, char *why,
                            size_t why_size)
{
    hf_assert(c->client_ca);
    unsigned int n = 0;
    const gnutls_datum_t *raw = gnutls_certificate_get_peers(session, &n);
    if (!raw || n == 0) {
        snprintf(why, why_size, "no client certificate");
        return HF_ERR_INVAL;
    }
    if (n > HF_TLS_CHAIN_MAX) {
        snprintf(why, why_size, "a client chain of %u certificates (at most %d)", n,
                 HF_TLS_CHAIN_MAX);
        return HF_ERR_INVAL;
    }
    gnutls_x509_crt_t crts[HF_TLS_CHAIN_MAX];
    unsigned int imported = 0;
    int rc = 0;
    for (unsigned int i = 0; i < n && rc == 0; i++) {
        rc = gnutls_x509_crt_init(&crts[i]);
        if (rc < 0)
            break;
        imported++;
        rc = gnutls_x509_crt_import(crts[i], &raw[i], GNUTLS_X509_FMT_DER);
    }
    /* The leaf must be for TLS clients: an extendedKeyUsage without clientAuth
     * (a server's certificate from the same CA) is refused; GnuTLS takes a
     * certificate with no extendedKeyUsage at all for any purpose. */
    gnutls_typed_vdata_st purpose = {GNUTLS_DT_KEY_PURPOSE_OID,
                                     (unsigned char *)(uintptr_t)GNUTLS_KP_TLS_WWW_CLIENT, 0};
    unsigned int status = 0;
    if (rc == 0)
        rc = gnutls_x509_trust_list_verify_crt2(c->client_ca, crts, n, &purpose, 1, 0, &status,
                                                NULL);
    for (unsigned int i = 0; i < imported; i++)
        gnutls_x509_crt_deinit(crts[i]);
    if (rc < 0) {
        snprintf(why, why_size, "client certificate unreadable: %s", gnutls_strerror(rc));
        return HF_ERR_INVAL;
    }
    if (status != 0) {
        gnutls_datum_t text = {NULL, 0};
        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) == 0) {
            size_t len = strlen((const char *)text.data);
            while (len && (text.data[len - 1] == ' ' || text.data[len - 1] == '\n'))
                text.data[--len] = '\0';
            snprintf(why, why_size, "client certificate refused: %s", (const char *)text.data);
        } else
            snprintf(why, why_size, "client certificate refused (status 0x%x)", status);
        gnutls_free(text.data);
        return HF_ERR_INVAL;
    }
    return HF_OK;
}

const char *tls_creds_fingerprint(const tls_creds_t *c)
{
    return c->fingerprint;
}
const char *tls_creds_serial(const tls_creds_t *c)
{
    return c->serial;
}
const char *tls_creds_not_after(const tls_creds_t *c)
{
    return c->not_after;
}
