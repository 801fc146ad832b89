/* One generation of a listener's TLS credentials: its certificate chain and
 * private key, and optionally the CA a client certificate must chain to
 * (mutual TLS), all read from files and checked together. A SIGHUP loads a
 * new generation beside the old one; a connection keeps the generation that
 * was current when it was accepted (reference counted), for its handshake
 * too, so a rotation drops no connection. Only httpd.c includes it: nothing
 * else of holdfast sees GnuTLS. */
#ifndef HF_TLS_CREDS_H
#define HF_TLS_CREDS_H

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>

#include "hf_err.h"

typedef struct tls_creds tls_creds_t;

/* The sizes (with the NUL) of the strings below: 32 bytes of SHA-256 as
 * "AB:CD:..."; an X.509 serial is at most 20 bytes, two hex digits each;
 * "2027-01-31 12:00 UTC" with room. */
#define TLS_CREDS_FINGERPRINT_BYTES (32 * 3)
#define TLS_CREDS_SERIAL_BYTES      (2 * 20 + 1)
#define TLS_CREDS_NOT_AFTER_BYTES   32

/* Reads cert_file (PEM: the leaf first, then intermediates), key_file (PEM,
 * unencrypted) and, when client_ca_file is non-empty, the CA(s) that sign
 * client certificates. HF_ERR_CONFIG naming the file and what to fix when one
 * is unreadable, holds nothing usable, or the key is not the certificate's;
 * HF_ERR_NOMEM. The caller owns *out (one reference). */
int tls_creds_load(const char *cert_file, const char *key_file, const char *client_ca_file,
                   tls_creds_t **out, char *errstr, size_t errstr_size) HF_MUST_CHECK;

/* Another reference to c (thread-safe); returns c. */
tls_creds_t *tls_creds_ref(tls_creds_t *c);
/* Drops a reference; the last one frees. Accepts NULL. */
void tls_creds_unref(tls_creds_t *c);

/* The chain and key to hand GnuTLS in a certificate-retrieve callback; they
 * stay valid while the caller holds its reference. */
void tls_creds_select(tls_creds_t *c, gnutls_pcert_st **pcert, unsigned int *pcert_count,
                      gnutls_privkey_t *key);

/* Whether a client certificate is required (client_ca_file was set). */
bool tls_creds_requires_client_cert(const tls_creds_t *c);

/* Checks the client certificate of session against the client CA: HF_OK, or
 * HF_ERR_INVAL with why (none sent, not signed by the CA, expired, an
 * extendedKeyUsage without clientAuth, ...). A certificate with no
 * extendedKeyUsage is taken (GnuTLS: any purpose). */
int tls_creds_verify_client(const tls_creds_t *c, gnutls_session_t session, char *why,
                            size_t why_size) HF_MUST_CHECK;

/* For logs: the leaf's SHA-256 fingerprint as openssl prints it
 * ("AB:CD:..."), its serial in hex ("0B02") and its expiry ("2027-01-31 12:00
 * UTC"); "" for one that could not be read. */
const char *tls_creds_fingerprint(const tls_creds_t *c);
const char *tls_creds_serial(const tls_creds_t *c);
const char *tls_creds_not_after(const tls_creds_t *c);

#endif
