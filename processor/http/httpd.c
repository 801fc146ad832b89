/* httpd.h on libmicrohttpd: thread per connection, bodies gathered into one
 * bounded buffer, one handler call per request. TLS through libmicrohttpd's
 * GnuTLS: the certificate is handed over per handshake by a callback from the
 * listener's current credentials (tls_creds.h), which a reload swaps. */
#include "httpd.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "hf_clock.h"
#include "hf_limits.h"
#include "log.h"
#include "tls_creds.h"

/* Each connection thread's stack: handlers keep records (~20 KB) on it, and
 * glibc carves the process's static thread-local storage out of it first
 * (holdfast's is over 4 MB: counter_sweep.c's per-thread scan buffer), so a
 * 1 MB stack cannot even start a thread there (EINVAL). The task threads'
 * size, which has room for both. */
#define HTTPD_THREAD_STACK_BYTES HF_TASK_STACK_BYTES

/* TLS 1.2 and 1.3 only: GnuTLS's NORMAL would still take 1.0 and 1.1 from a
 * client that asks (deprecated by RFC 8996). */
#define HTTPD_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* A refused handshake, or a libmicrohttpd error (one per failed handshake or
 * broken connection), is logged at most once per this, with the count since
 * the last line: any peer can cause them, and must not flood the log. */
#define HTTPD_PEER_LOG_MS 10000

/* An RFC 9457 problem for a body over the bound: its fixed text and the
 * decimal digits of a size_t. */
#define HTTPD_PROBLEM_413_BYTES 320

/* Why a client certificate was refused (tls_creds_verify_client). */
#define HTTPD_TLS_WHY_BYTES 256

/* A log line's rate limit: hf_mono_ms of the last line (0: none yet) and how
 * many events since it. */
typedef struct {
    _Atomic int64_t logged_at_ms;
    _Atomic uint64_t unlogged;
} httpd_log_limit_t;

struct httpd {
    struct MHD_Daemon *d;
    httpd_opts_t o;
    char name[32];
    /* TLS: the files (owned copies) and the credentials new handshakes get;
     * tls_mu guards creds (read with a reference taken, swapped by a reload). */
    char *tls_cert_file, *tls_key_file, *tls_client_ca_file;
    pthread_mutex_t tls_mu;
    bool tls_mu_ready; /* tls_mu initialised: tls_teardown destroys it */
    tls_creds_t *creds;
    /* The rate limits of refused handshakes' lines and libmicrohttpd's. */
    httpd_log_limit_t refused_log, mhd_log;
};

/* A TLS connection's own state (libmicrohttpd's socket context): the
 * credentials it started with, held until it closes. */
typedef struct {
    httpd_t *h;
    tls_creds_t *creds;
} httpd_conn_t;

struct httpd_req {
    const httpd_t *h;
    struct MHD_Connection *conn;
    const char *method, *path;
    char *body;
    size_t len, cap;
    bool too_large;
};

const char *httpd_method(const httpd_req_t *r)
{
    return r->method;
}
const char *httpd_path(const httpd_req_t *r)
{
    return r->path;
}

const char *httpd_header(const httpd_req_t *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *httpd_query(const httpd_req_t *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *httpd_body(const httpd_req_t *r, size_t *len)
{
    *len = r->len;
    return r->body ? r->body : "";
}

int httpd_tag(const httpd_req_t *r)
{
    return r->h->o.tag;
}

/* Appends a chunk of the body; false once the body is over the bound. */
static bool body_append(struct httpd_req *r, const char *data, size_t n, size_t max)
{
    if (r->too_large || r->len + n > max) {
        r->too_large = true;
        return false;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 1024;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b) {
            r->too_large = true;
            return false;
        }
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
    return true;
}

static enum MHD_Result send_resp(struct MHD_Connection *conn, const httpd_resp_t *resp)
{
    const char *body = resp->body_owned ? resp->body_owned : resp->body ? resp->body : "";
    size_t len = resp->body_owned || resp->body_len == SIZE_MAX ? strlen(body) : resp->body_len;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            resp->content_type ? resp->content_type : "application/json");
    if (resp->retry_after_s > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", resp->retry_after_s);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, v);
    }
    if (resp->location)
        MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, resp->location);
    if (resp->allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, resp->allow);
    if (resp->header_name && resp->header_value)
        MHD_add_response_header(r, resp->header_name, resp->header_value);
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    httpd_t *h = cls;
    struct httpd_req *r = *con_cls;
    if (!r) { /* headers are in: the body (if any) follows in later calls */
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        r->h = h;
        r->conn = conn;
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_data_size) {
        body_append(r, upload_data, *upload_data_size, h->o.body_max_bytes);
        *upload_data_size = 0;
        return MHD_YES;
    }
    r->method = method;
    r->path = url;
    if (r->too_large) {
        /* An RFC 9457 problem, as the front answers every other error. */
        char msg[HTTPD_PROBLEM_413_BYTES];
        snprintf(msg, sizeof msg,
                 "{\"type\":\"urn:holdfast:problem:body_too_large\",\"title\":\"The body is "
                 "over http_body_max_bytes\",\"status\":413,\"detail\":\"request bodies are "
                 "limited to %zu bytes\",\"code\":\"body_too_large\"}",
                 h->o.body_max_bytes);
        return send_resp(conn, &(httpd_resp_t){.status = 413,
                                               .content_type = "application/problem+json",
                                               .body = msg,
                                               .body_len = SIZE_MAX});
    }
    httpd_resp_t resp = {.status = 500, .body_len = SIZE_MAX};
    h->o.handler(h->o.opaque, r, &resp);
    enum MHD_Result ok = send_resp(conn, &resp);
    free(resp.body_owned);
    return ok;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    struct httpd_req *r = *con_cls;
    if (r) {
        free(r->body);
        free(r);
    }
    *con_cls = NULL;
}

/* Counts an event; true when its line is to be logged now, with *n the events
 * since the last line (this one included): the first after a quiet spell of
 * HTTPD_PEER_LOG_MS, the others only counted into the next line. */
static bool log_limit_pass(httpd_log_limit_t *l, uint64_t *n)
{
    atomic_fetch_add(&l->unlogged, 1);
    int64_t now_ms = hf_mono_ms();
    int64_t last_ms = atomic_load(&l->logged_at_ms);
    if (last_ms != 0 && now_ms - last_ms < HTTPD_PEER_LOG_MS)
        return false;
    /* One thread wins the line; the others' events wait for the next. */
    if (!atomic_compare_exchange_strong(&l->logged_at_ms, &last_ms, now_ms ? now_ms : 1))
        return false;
    *n = atomic_exchange(&l->unlogged, 0);
    return true;
}

/* fmt is libmicrohttpd's printf format (the attribute lets the compilers check
 * the vsnprintf below as one). */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    httpd_t *h = cls;
    uint64_t count = 0;
    if (!log_limit_pass(&h->mhd_log, &count))
        return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (count > 1)
        log_warn(h->name,
                 "libmicrohttpd: %s (and %llu more of its messages since the last such line; at "
                 "most one line per %d s)",
                 line, (unsigned long long)(count - 1), HTTPD_PEER_LOG_MS / 1000);
    else
        log_warn(h->name, "libmicrohttpd: %s", line);
}

/* ---- TLS */

static tls_creds_t *current_creds(httpd_t *h)
{
    pthread_mutex_lock(&h->tls_mu);
    tls_creds_t *c = h->creds ? tls_creds_ref(h->creds) : NULL;
    pthread_mutex_unlock(&h->tls_mu);
    return c;
}

static httpd_conn_t *conn_of_session(gnutls_session_t session)
{
    /* libmicrohttpd keeps its connection as the session's pointer. */
    struct MHD_Connection *conn = gnutls_session_get_ptr(session);
    const union MHD_ConnectionInfo *ci =
        conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
    return ci ? ci->socket_context : NULL;
}

/* GnuTLS asks for the server's certificate while it reads the ClientHello:
 * hand it the connection's generation. */
static int on_tls_cert(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                       const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                       gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *key)
{
    (void)req_ca_dn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    httpd_conn_t *c = conn_of_session(session);
    if (!c || !c->creds)
        return -1; /* the handshake fails: no credentials (out of memory at accept) */
    tls_creds_select(c->creds, pcert, pcert_length, key);
    return 0;
}

/* Counts a handshake refused for its client certificate and logs it, rate
 * limited (log_limit_pass). */
static void tls_refused(httpd_t *h, const char *why)
{
    if (h->o.tls_refused)
        atomic_fetch_add(h->o.tls_refused, 1);
    uint64_t n = 0;
    if (log_limit_pass(&h->refused_log, &n))
        log_warn(h->name,
                 "TLS handshake refused: %s (%llu refused since the last such line; at most one "
                 "line per %d s)",
                 why, (unsigned long long)n, HTTPD_PEER_LOG_MS / 1000);
}

/* Mutual TLS: called by GnuTLS once the client's certificate is in; non-zero
 * ends the handshake. */
static int on_tls_verify_client(gnutls_session_t session)
{
    httpd_conn_t *c = conn_of_session(session);
    if (!c || !c->creds)
        return -1;
    char why[HTTPD_TLS_WHY_BYTES];
    if (tls_creds_verify_client(c->creds, session, why, sizeof why) != HF_OK) {
        tls_refused(c->h, why);
        return -1;
    }
    return 0;
}

/* A TLS connection starts (before its handshake) or closes. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    httpd_t *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        httpd_conn_t *c = *socket_context;
        if (c) {
            tls_creds_unref(c->creds);
            free(c);
        }
        *socket_context = NULL;
        return;
    }
    httpd_conn_t *c = calloc(1, sizeof *c);
    *socket_context = c;
    if (!c)
        return; /* on_tls_cert fails the handshake */
    c->h = h;
    c->creds = current_creds(h);
    if (!c->creds || !tls_creds_requires_client_cert(c->creds))
        return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    hf_assert(ci && ci->tls_session);
    gnutls_session_t session = ci->tls_session;
    gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_function(session, on_tls_verify_client);
}

static char *dup_or_null(const char *s)
{
    return s && s[0] ? strdup(s) : NULL;
}

/* Copies the TLS file names and loads the first generation. */
static int tls_setup(httpd_t *h, const httpd_opts_t *o, char *errstr, size_t errstr_size)
{
    int rc = pthread_mutex_init(&h->tls_mu, NULL);
    if (rc != 0) {
        snprintf(errstr, errstr_size, "%s: cannot initialise the TLS lock: %s", h->name,
                 strerror(rc));
        return HF_ERR_NOMEM;
    }
    h->tls_mu_ready = true;
    if (!o->tls_cert_file || !o->tls_cert_file[0])
        return HF_OK;
    if (!o->tls_key_file || !o->tls_key_file[0]) {
        snprintf(errstr, errstr_size, "%s: a TLS certificate needs its key file", h->name);
        return HF_ERR_CONFIG;
    }
    h->tls_cert_file = dup_or_null(o->tls_cert_file);
    h->tls_key_file = dup_or_null(o->tls_key_file);
    h->tls_client_ca_file = dup_or_null(o->tls_client_ca_file);
    if (!h->tls_cert_file || !h->tls_key_file ||
        (o->tls_client_ca_file && o->tls_client_ca_file[0] && !h->tls_client_ca_file)) {
        snprintf(errstr, errstr_size, "%s: out of memory copying the TLS file names", h->name);
        return HF_ERR_NOMEM;
    }
    return tls_creds_load(h->tls_cert_file, h->tls_key_file, h->tls_client_ca_file, &h->creds,
                          errstr, errstr_size);
}

static void tls_teardown(httpd_t *h)
{
    tls_creds_unref(h->creds);
    free(h->tls_cert_file);
    free(h->tls_key_file);
    free(h->tls_client_ca_file);
    if (h->tls_mu_ready)
        pthread_mutex_destroy(&h->tls_mu);
}

int httpd_tls_check_files(const char *cert_file, const char *key_file, const char *client_ca_file,
                          char *errstr, size_t errstr_size)
{
    tls_creds_t *c = NULL;
    int err = tls_creds_load(cert_file, key_file, client_ca_file, &c, errstr, errstr_size);
    tls_creds_unref(c);
    return err;
}

bool httpd_tls(const httpd_t *h)
{
    return h->tls_cert_file != NULL;
}

int httpd_reload_tls(httpd_t *h, char *errstr, size_t errstr_size)
{
    if (!httpd_tls(h))
        return HF_OK;
    tls_creds_t *fresh = NULL;
    int err = tls_creds_load(h->tls_cert_file, h->tls_key_file, h->tls_client_ca_file, &fresh,
                             errstr, errstr_size);
    if (err)
        return err;
    pthread_mutex_lock(&h->tls_mu);
    tls_creds_t *old = h->creds;
    h->creds = fresh;
    pthread_mutex_unlock(&h->tls_mu);
    tls_creds_unref(old); /* freed once the last connection that started with it closes */
    return HF_OK;
}

_Static_assert(sizeof "sha256  serial  until , client certificates required" +
                       TLS_CREDS_FINGERPRINT_BYTES + TLS_CREDS_SERIAL_BYTES +
                       TLS_CREDS_NOT_AFTER_BYTES <=
                   HTTPD_TLS_DESCRIBE_BYTES,
               "httpd_tls_describe's line fits HTTPD_TLS_DESCRIBE_BYTES");

void httpd_tls_describe(httpd_t *h, char *dst, size_t dst_size)
{
    tls_creds_t *c = current_creds(h);
    if (!c) {
        snprintf(dst, dst_size, "%s", "");
        return;
    }
    snprintf(dst, dst_size, "sha256 %s serial %s until %s%s", tls_creds_fingerprint(c),
             tls_creds_serial(c), tls_creds_not_after(c),
             tls_creds_requires_client_cert(c) ? ", client certificates required" : "");
    tls_creds_unref(c);
}

/* ---- start and stop */

int httpd_start(const httpd_opts_t *o, httpd_t **out, int *bound_port, char *errstr,
                size_t errstr_size)
{
    hf_assert(o->handler && o->connections_max > 0 && o->body_max_bytes > 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->bind, &addr.sin_addr) != 1) {
        snprintf(errstr, errstr_size, "%s: '%s' is not an IPv4 address", o->name, o->bind);
        return HF_ERR_CONFIG;
    }
    httpd_t *h = calloc(1, sizeof *h);
    if (!h)
        return HF_ERR_NOMEM;
    h->o = *o;
    snprintf(h->name, sizeof h->name, "%s", o->name ? o->name : "http");
    h->o.name = h->name;
    int err = tls_setup(h, o, errstr, errstr_size);
    if (err) {
        tls_teardown(h);
        free(h);
        return err;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    /* Plain: the TLS options (priorities, certificate callback, connection
     * notice) are not read, the first of them ends the list. */
    enum MHD_OPTION tls_opt = MHD_OPTION_END;
    if (httpd_tls(h)) {
        flags |= MHD_USE_TLS;
        tls_opt = MHD_OPTION_HTTPS_PRIORITIES;
    }
    /* The logger first: libmicrohttpd warns (on stderr) about one given later. */
    h->d = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
        h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)o->connections_max, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->idle_timeout_s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_THREAD_STACK_SIZE,
        (size_t)HTTPD_THREAD_STACK_BYTES, tls_opt, HTTPD_TLS_PRIORITIES,
        MHD_OPTION_HTTPS_CERT_CALLBACK, on_tls_cert, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_END);
    if (!h->d) {
        snprintf(errstr, errstr_size,
                 "%s: cannot listen on %s:%d (in use, or not an address of this host?)", h->name,
                 o->bind, o->port);
        tls_teardown(h);
        free(h);
        return HF_ERR_IO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = info ? (int)info->port : o->port;
    *out = h;
    return HF_OK;
}

void httpd_stop(httpd_t *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    tls_teardown(h);
    free(h);
}
