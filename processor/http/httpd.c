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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_assert.h"
#include "hf_limits.h"
#include "log.h"
#include "tls_creds.h"

/* Each connection thread's stack: handlers keep records (~20 KB) on it, and
 * glibc carves the process's static thread-local storage out of it first
 * (holdfast's is over 4 MB: counter_sweep.c's per-thread scan buffer), so a
 * 1 MB stack cannot even start a thread there (EINVAL). The task threads'
 * size, which has room for both. */
#define HTTPD_THREAD_STACK_BYTES HF_TASK_STACK_BYTES

struct httpd {
    struct MHD_Daemon *d;
    httpd_opts_t o;
    char name[32];
    /* TLS: the files (owned copies) and the credentials new handshakes get;
     * tls_mu guards creds (read with a reference taken, swapped by a reload). */
    char *tls_cert_file, *tls_key_file, *tls_client_ca_file;
    pthread_mutex_t tls_mu;
    tls_creds_t *creds;
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
        char msg[320];
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

/* fmt is libmicrohttpd's printf format (the attribute lets the compilers check
 * the vsnprintf below as one). */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    const httpd_t *h = cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
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

/* Mutual TLS: called by GnuTLS once the client's certificate is in; non-zero
 * ends the handshake. */
static int on_tls_verify_client(gnutls_session_t session)
{
    httpd_conn_t *c = conn_of_session(session);
    if (!c || !c->creds)
        return -1;
    char why[256];
    if (tls_creds_verify_client(c->creds, session, why, sizeof why) != HF_OK) {
        log_warn(c->h->name, "TLS handshake refused: %s", why);
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
    if (pthread_mutex_init(&h->tls_mu, NULL) != 0)
        return HF_ERR_NOMEM;
    if (!o->tls_cert_file || !o->tls_cert_file[0])
        return HF_OK;
    h->tls_cert_file = dup_or_null(o->tls_cert_file);
    h->tls_key_file = dup_or_null(o->tls_key_file);
    h->tls_client_ca_file = dup_or_null(o->tls_client_ca_file);
    if (!h->tls_cert_file || !h->tls_key_file ||
        (o->tls_client_ca_file && o->tls_client_ca_file[0] && !h->tls_client_ca_file)) {
        snprintf(errstr, errstr_size, "%s: a TLS certificate needs its key file", h->name);
        return HF_ERR_CONFIG;
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
    /* Plain: the certificate options end the list at once. */
    enum MHD_OPTION tls_opt = MHD_OPTION_END, notify_opt = MHD_OPTION_END;
    if (httpd_tls(h)) {
        flags |= MHD_USE_TLS;
        tls_opt = MHD_OPTION_HTTPS_CERT_CALLBACK;
        notify_opt = MHD_OPTION_NOTIFY_CONNECTION;
    }
    /* The logger first: libmicrohttpd warns (on stderr) about one given later. */
    h->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, h,
                            MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)o->connections_max, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)o->idle_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                            h, MHD_OPTION_THREAD_STACK_SIZE, (size_t)HTTPD_THREAD_STACK_BYTES,
                            tls_opt, on_tls_cert, notify_opt, on_connection, h, MHD_OPTION_END);
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
