/* A small HTTP/1.1 server on GNU libmicrohttpd, shared by the HTTP front
 * (http_api.h) and the metrics endpoint (metrics.h). One thread per connection:
 * a handler may block (the front waits for the pipeline's reply on a condition
 * variable) without holding up other connections. Bounded: at most
 * connections_max connections (libmicrohttpd refuses more), bodies up to
 * body_max_bytes (a longer one is answered 413 without calling the handler),
 * and an idle connection is closed after idle_timeout_s. */
#ifndef HF_HTTPD_H
#define HF_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"

typedef struct httpd httpd_t;
typedef struct httpd_req httpd_req_t;

/* What a handler answers; sent (copied) when the handler returns. */
typedef struct {
    int status;
    const char *content_type; /* NULL: application/json */
    const char *body;         /* NULL: empty */
    size_t body_len;          /* SIZE_MAX: strlen(body) */
    int retry_after_s;        /* > 0: a Retry-After header */
    const char *location;     /* non-NULL: a Location header */
    const char *allow;        /* non-NULL: an Allow header (a 405's methods) */
    const char *header_name;  /* non-NULL: one more header (a 401's WWW-Authenticate) */
    const char *header_value; /* its value; both must outlive the handler call */
    char *body_owned;         /* malloc'd body (then body is ignored), freed after sending */
} httpd_resp_t;

typedef void (*httpd_handler_fn)(void *opaque, const httpd_req_t *req, httpd_resp_t *resp);

typedef struct {
    const char *bind;      /* IPv4 address: "127.0.0.1" */
    int port;              /* 0: any free port */
    int connections_max;   /* concurrent connections (threads) */
    size_t body_max_bytes; /* larger request bodies get 413 */
    int idle_timeout_s;    /* an idle connection is closed after it */
    httpd_handler_fn handler;
    void *opaque;
    const char *name; /* for logs: "http", "metrics" */
    int tag;          /* the caller's, for its handler: httpd_tag() of a request */
    /* TLS (docs/HTTP.md): served when tls_cert_file is non-empty (PEM chain and
     * unencrypted key, tls_creds.h); tls_client_ca_file non-empty: a client
     * certificate signed by that CA is required, a handshake without one fails. */
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *tls_client_ca_file;
    /* NULL, or a counter (the caller's, outliving the server) of the handshakes
     * refused for their client certificate, for a metric. */
    _Atomic uint64_t *tls_refused;
} httpd_opts_t;

/* Starts serving; *bound_port is the port listened on. */
int httpd_start(const httpd_opts_t *o, httpd_t **out, int *bound_port, char *errstr,
                size_t errstr_size) HF_MUST_CHECK;
/* Stops accepting, waits for the connection threads and frees. Accepts NULL. */
void httpd_stop(httpd_t *h);

/* Loads and checks a certificate chain, its key and (non-empty) a client CA as
 * httpd_start would, without serving: HF_ERR_CONFIG saying what to fix. */
int httpd_tls_check_files(const char *cert_file, const char *key_file, const char *client_ca_file,
                          char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* Whether h serves TLS. */
bool httpd_tls(const httpd_t *h);
/* Re-reads h's certificate, key and client CA files (SIGHUP). New handshakes
 * use them; connections in flight keep the ones they started with, so none is
 * dropped. On failure (HF_ERR_CONFIG, errstr says what to fix) h keeps serving
 * the previous ones. HF_OK and nothing done on a plain listener. */
int httpd_reload_tls(httpd_t *h, char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* Room for httpd_tls_describe's line (httpd.c checks it against the parts). */
#define HTTPD_TLS_DESCRIBE_BYTES 320
/* What h serves now, for logs: "sha256 AB:CD:... serial 01 until 2027-01-31
 * 12:00 UTC[, client certificates required]"; "" on a plain listener. */
void httpd_tls_describe(httpd_t *h, char *dst, size_t dst_size);

/* The request, valid during the handler call. */
const char *httpd_method(const httpd_req_t *r);
const char *httpd_path(const httpd_req_t *r);                     /* without the query string */
const char *httpd_header(const httpd_req_t *r, const char *name); /* NULL if absent */
const char *httpd_query(const httpd_req_t *r, const char *name);  /* NULL if absent */
const char *httpd_body(const httpd_req_t *r, size_t *len);        /* "" when none */
int httpd_tag(const httpd_req_t *r); /* the tag of the server it came to */

#endif
