/* The schema registry client (registry.h): one libcurl easy handle per request
 * (requests are rare: one per subject at start, one per id never seen before),
 * JSON through jansson, and a small id -> fingerprint table under a mutex. The
 * fingerprint is computed here from the schema text the registry returns, so an
 * id registered by another producer (another version of one of our records, with
 * other whitespace) selects the right schema in the codec. */
#include "registry.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "hf_assert.h"
#include "hf_limits.h"

typedef struct {
    uint32_t id;
    uint64_t fingerprint;
} registry_id_t;

struct registry {
    char base_url[HF_REGISTRY_URL_LEN_MAX + 1]; /* without a trailing '/' */
    long timeout_ms;
    pthread_mutex_t lock; /* ids, ids_count, ids_next, requests */
    registry_id_t ids[HF_REGISTRY_IDS_MAX];
    size_t ids_count;
    size_t ids_next; /* slot a full table overwrites next (its oldest id) */
    uint64_t requests;
};

/* A response body, bounded. */
typedef struct {
    char *data;
    size_t len;
    bool too_long;
} registry_body_t;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int registry_new(const char *base_url, int timeout_ms, registry_t **out, char *errstr,
                 size_t errstr_size)
{
    *out = NULL;
    size_t len = strlen(base_url);
    while (len > 0 && base_url[len - 1] == '/')
        len--;
    if (len == 0 || len > HF_REGISTRY_URL_LEN_MAX) {
        snprintf(errstr, errstr_size, "schema registry URL must have 1 to %d characters",
                 HF_REGISTRY_URL_LEN_MAX);
        return HF_ERR_CONFIG;
    }
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_rc != CURLE_OK) {
        snprintf(errstr, errstr_size, "libcurl does not initialise: %s",
                 curl_easy_strerror(curl_init_rc));
        return HF_ERR_IO;
    }
    registry_t *r = calloc(1, sizeof *r);
    if (!r)
        return HF_ERR_NOMEM;
    memcpy(r->base_url, base_url, len);
    r->base_url[len] = '\0';
    r->timeout_ms = timeout_ms;
    pthread_mutex_init(&r->lock, NULL);
    *out = r;
    return HF_OK;
}

void registry_destroy(registry_t *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->lock);
    free(r);
}

uint64_t registry_requests(registry_t *r)
{
    pthread_mutex_lock(&r->lock);
    uint64_t n = r->requests;
    pthread_mutex_unlock(&r->lock);
    return n;
}

/* ---- the id table */

static bool ids_find(registry_t *r, uint32_t id, uint64_t *fingerprint)
{
    bool found = false;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->ids_count && !found; i++)
        if (r->ids[i].id == id) {
            *fingerprint = r->ids[i].fingerprint;
            found = true;
        }
    pthread_mutex_unlock(&r->lock);
    return found;
}

static void ids_put(registry_t *r, uint32_t id, uint64_t fingerprint)
{
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->ids_count; i++)
        if (r->ids[i].id == id) {
            r->ids[i].fingerprint = fingerprint; /* another thread asked at once */
            pthread_mutex_unlock(&r->lock);
            return;
        }
    if (r->ids_count < HF_REGISTRY_IDS_MAX) {
        r->ids[r->ids_count++] = (registry_id_t){id, fingerprint};
    } else {
        r->ids[r->ids_next] = (registry_id_t){id, fingerprint};
        r->ids_next = (r->ids_next + 1) % HF_REGISTRY_IDS_MAX;
    }
    hf_assert(r->ids_count <= HF_REGISTRY_IDS_MAX);
    pthread_mutex_unlock(&r->lock);
}

/* ---- HTTP */

static size_t on_body(char *data, size_t size, size_t nmemb, void *opaque)
{
    registry_body_t *b = opaque;
    size_t n = size * nmemb;
    if (b->len + n > HF_REGISTRY_RESPONSE_BYTES_MAX) {
        b->too_long = true;
        return 0; /* libcurl stops the transfer */
    }
    char *grown = realloc(b->data, b->len + n + 1);
    if (!grown)
        return 0;
    b->data = grown;
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* The registry's own message from an error body ({"error_code": N, "message": ...}). */
static void error_message(const registry_body_t *b, char *out, size_t out_size)
{
    json_t *root = b->data ? json_loadb(b->data, b->len, 0, NULL) : NULL;
    const char *msg = json_string_value(json_object_get(root, "message"));
    snprintf(out, out_size, "%s", msg ? msg : "no message");
    json_decref(root);
}

/* One request: GET when body is NULL, else POST of body. *status is the HTTP
 * status; the response body is in *resp (the caller frees resp->data). */
static int http_call(registry_t *r, const char *path, const char *body, long *status,
                     registry_body_t *resp, char *errstr, size_t errstr_size)
{
    char url[HF_REGISTRY_URL_LEN_MAX + 256];
    snprintf(url, sizeof url, "%s%s", r->base_url, path);
    CURL *curl = curl_easy_init();
    if (!curl) {
        snprintf(errstr, errstr_size, "libcurl: cannot create a request");
        return HF_ERR_NOMEM;
    }
    struct curl_slist *headers =
        curl_slist_append(NULL, "Accept: application/vnd.schemaregistry.v1+json");
    if (body) {
        headers =
            curl_slist_append(headers, "Content-Type: application/vnd.schemaregistry.v1+json");
        /* libcurl would send "Expect: 100-continue" for a body over 1 KiB (our larger
         * schemas) and wait up to a second for a server that ignores it. */
        headers = curl_slist_append(headers, "Expect:");
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, r->timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, r->timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    if (body)
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    pthread_mutex_lock(&r->lock);
    r->requests++;
    pthread_mutex_unlock(&r->lock);
    CURLcode rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (resp->too_long) {
        snprintf(errstr, errstr_size, "schema registry %s: answer longer than %d bytes", url,
                 HF_REGISTRY_RESPONSE_BYTES_MAX);
        return HF_ERR_DECODE;
    }
    if (rc != CURLE_OK) {
        snprintf(errstr, errstr_size, "schema registry %s: %s", url, curl_easy_strerror(rc));
        return HF_ERR_IO;
    }
    return HF_OK;
}

/* The fingerprint of a schema text as the codec computes it for its own. */
static int fingerprint_of(const char *schema_json, uint64_t *fingerprint, char *errstr,
                          size_t errstr_size)
{
    char *canonical = NULL;
    int err = codec_parsing_canonical_form(schema_json, &canonical, errstr, errstr_size);
    if (err)
        return err;
    *fingerprint = codec_crc64_avro(canonical, strlen(canonical));
    free(canonical);
    return HF_OK;
}

/* ---- the two calls */

int registry_register(registry_t *r, const char *subject, const char *schema_json, uint32_t *id_out,
                      char *errstr, size_t errstr_size)
{
    char path[HF_TOPIC_LEN_MAX + 64], why[256];
    registry_body_t resp = {0};
    long status = 0;
    uint64_t fingerprint = 0;
    json_t *req = json_pack("{s:s}", "schema", schema_json);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_t *root = NULL;
    int err = HF_ERR_NOMEM;

    json_decref(req);
    if (!body)
        goto done;
    if ((err = fingerprint_of(schema_json, &fingerprint, errstr, errstr_size)))
        goto done;
    /* A subject is a topic name plus "-value": characters that need no escaping. */
    snprintf(path, sizeof path, "/subjects/%s/versions", subject);
    if ((err = http_call(r, path, body, &status, &resp, errstr, errstr_size)))
        goto done;
    if (status != 200) {
        error_message(&resp, why, sizeof why);
        snprintf(errstr, errstr_size, "schema registry %s%s answered %ld: %s", r->base_url, path,
                 status, why);
        err = HF_ERR_IO;
        goto done;
    }
    root = json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL);
    json_t *id = json_object_get(root, "id");
    if (!json_is_integer(id) || json_integer_value(id) < 0 ||
        json_integer_value(id) > (json_int_t)UINT32_MAX) {
        snprintf(errstr, errstr_size,
                 "schema registry %s%s: answer has no \"id\" between 0 and 2^32-1: %.120s",
                 r->base_url, path, resp.data ? resp.data : "(empty)");
        err = HF_ERR_DECODE;
        goto done;
    }
    *id_out = (uint32_t)json_integer_value(id);
    ids_put(r, *id_out, fingerprint);
    err = HF_OK;
done:
    json_decref(root);
    free(body);
    free(resp.data);
    return err;
}

int registry_resolve(void *opaque, uint32_t id, uint64_t *fingerprint_out, char *errstr,
                     size_t errstr_size)
{
    registry_t *r = opaque;
    char path[64], why[256];
    registry_body_t resp = {0};
    long status = 0;
    json_t *root = NULL;
    int err;

    if (ids_find(r, id, fingerprint_out))
        return HF_OK;
    snprintf(path, sizeof path, "/schemas/ids/%" PRIu32, id);
    if ((err = http_call(r, path, NULL, &status, &resp, errstr, errstr_size)))
        goto done;
    if (status == 404) {
        error_message(&resp, why, sizeof why);
        snprintf(errstr, errstr_size, "schema registry %s has no schema with this id (%s)",
                 r->base_url, why);
        err = HF_ERR_UNKNOWN_SCHEMA;
        goto done;
    }
    if (status != 200) {
        error_message(&resp, why, sizeof why);
        snprintf(errstr, errstr_size, "schema registry %s%s answered %ld: %s", r->base_url, path,
                 status, why);
        err = HF_ERR_IO;
        goto done;
    }
    root = json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL);
    const char *schema = json_string_value(json_object_get(root, "schema"));
    if (!schema) {
        snprintf(errstr, errstr_size, "schema registry %s%s: answer has no \"schema\" string",
                 r->base_url, path);
        err = HF_ERR_DECODE;
        goto done;
    }
    if (fingerprint_of(schema, fingerprint_out, why, sizeof why) != HF_OK) {
        snprintf(errstr, errstr_size, "the schema registered under it is no Avro schema: %s", why);
        err = HF_ERR_UNKNOWN_SCHEMA;
        goto done;
    }
    ids_put(r, id, *fingerprint_out);
done:
    json_decref(root);
    free(resp.data);
    return err;
}
