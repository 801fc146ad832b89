/* See fake_registry.h. A fixed table of schemas and of subject -> id under one
 * mutex (httpd runs one thread per connection). */
#include "fake_registry.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/httpd.h"

#define FAKE_SCHEMAS_MAX  256
#define FAKE_SUBJECTS_MAX 64

typedef struct {
    uint32_t id;
    char *schema;
} fake_schema_t;

typedef struct {
    char *subject;
    uint32_t id;
} fake_subject_t;

struct fake_registry {
    httpd_t *httpd;
    pthread_mutex_t lock;
    fake_schema_t schemas[FAKE_SCHEMAS_MAX];
    size_t schemas_count;
    uint32_t next_id;
    fake_subject_t subjects[FAKE_SUBJECTS_MAX];
    size_t subjects_count;
    int fail_status;
    size_t requests;
};

static void answer(httpd_resp_t *resp, int status, char *body)
{
    resp->status = status;
    resp->content_type = "application/vnd.schemaregistry.v1+json";
    resp->body_owned = body;
}

static void answer_error(httpd_resp_t *resp, int status, int code, const char *message)
{
    json_t *e = json_pack("{s:i,s:s}", "error_code", code, "message", message);
    answer(resp, status, json_dumps(e, JSON_COMPACT));
    json_decref(e);
}

static const fake_schema_t *find_id(const fake_registry_t *f, uint32_t id)
{
    for (size_t i = 0; i < f->schemas_count; i++)
        if (f->schemas[i].id == id)
            return &f->schemas[i];
    return NULL;
}

static uint32_t id_of_text(fake_registry_t *f, const char *schema)
{
    for (size_t i = 0; i < f->schemas_count; i++)
        if (strcmp(f->schemas[i].schema, schema) == 0)
            return f->schemas[i].id;
    assert_true(f->schemas_count < FAKE_SCHEMAS_MAX);
    while (find_id(f, f->next_id))
        f->next_id++;
    f->schemas[f->schemas_count++] = (fake_schema_t){f->next_id, strdup(schema)};
    return f->next_id++;
}

static void on_register(fake_registry_t *f, const char *subject, const httpd_req_t *req,
                        httpd_resp_t *resp)
{
    size_t len = 0;
    const char *body = httpd_body(req, &len);
    json_t *root = json_loadb(body, len, 0, NULL);
    const char *schema = json_string_value(json_object_get(root, "schema"));
    json_t *parsed = schema ? json_loads(schema, 0, NULL) : NULL;
    bool valid = json_is_object(parsed);
    json_decref(parsed);
    if (!valid) {
        json_decref(root);
        answer_error(resp, 422, 42201,
                     "Either the input schema or one of its references is invalid");
        return;
    }
    uint32_t id = id_of_text(f, schema);
    json_decref(root);
    size_t i = 0;
    while (i < f->subjects_count && strcmp(f->subjects[i].subject, subject) != 0)
        i++;
    if (i == f->subjects_count) {
        assert_true(f->subjects_count < FAKE_SUBJECTS_MAX);
        f->subjects[f->subjects_count++] = (fake_subject_t){strdup(subject), id};
    }
    f->subjects[i].id = id;
    char *out = NULL;
    assert_true(asprintf(&out, "{\"id\":%" PRIu32 "}", id) > 0);
    answer(resp, 200, out);
}

static void on_get(fake_registry_t *f, const char *id_text, httpd_resp_t *resp)
{
    char *end = NULL;
    unsigned long id = strtoul(id_text, &end, 10);
    const fake_schema_t *s = *id_text && !*end ? find_id(f, (uint32_t)id) : NULL;
    if (!s) {
        char msg[96];
        snprintf(msg, sizeof msg, "Schema %s not found", id_text);
        answer_error(resp, 404, 40403, msg);
        return;
    }
    json_t *o = json_pack("{s:s}", "schema", s->schema);
    answer(resp, 200, json_dumps(o, JSON_COMPACT));
    json_decref(o);
}

static void on_request(void *opaque, const httpd_req_t *req, httpd_resp_t *resp)
{
    fake_registry_t *f = opaque;
    const char *method = httpd_method(req), *path = httpd_path(req);
    static const char subjects[] = "/subjects/", versions[] = "/versions", ids[] = "/schemas/ids/";
    pthread_mutex_lock(&f->lock);
    f->requests++;
    size_t len = strlen(path);
    if (f->fail_status) {
        answer_error(resp, f->fail_status, f->fail_status * 100, "Error in the backend data store");
    } else if (strcmp(method, "POST") == 0 && strncmp(path, subjects, sizeof subjects - 1) == 0 &&
               len > sizeof subjects - 1 + sizeof versions - 1 &&
               strcmp(path + len - (sizeof versions - 1), versions) == 0) {
        char subject[256];
        size_t n = len - (sizeof subjects - 1) - (sizeof versions - 1);
        snprintf(subject, sizeof subject, "%.*s", (int)n, path + sizeof subjects - 1);
        on_register(f, subject, req, resp);
    } else if (strcmp(method, "GET") == 0 && strncmp(path, ids, sizeof ids - 1) == 0) {
        on_get(f, path + sizeof ids - 1, resp);
    } else {
        answer_error(resp, 404, 404, "HTTP 404 Not Found");
    }
    pthread_mutex_unlock(&f->lock);
}

fake_registry_t *fake_registry_start(char *url_out, size_t url_size)
{
    fake_registry_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    pthread_mutex_init(&f->lock, NULL);
    f->next_id = 1;
    char errstr[256];
    int port = 0;
    httpd_opts_t o = {.bind = "127.0.0.1",
                      .port = 0,
                      .connections_max = 16,
                      .body_max_bytes = 1 << 20,
                      .idle_timeout_s = 5,
                      .handler = on_request,
                      .opaque = f,
                      .name = "fake-registry"};
    if (httpd_start(&o, &f->httpd, &port, errstr, sizeof errstr) != 0)
        fail_msg("fake registry does not start: %s", errstr);
    snprintf(url_out, url_size, "http://127.0.0.1:%d", port);
    return f;
}

void fake_registry_stop(fake_registry_t *f)
{
    if (!f)
        return;
    httpd_stop(f->httpd);
    for (size_t i = 0; i < f->schemas_count; i++)
        free(f->schemas[i].schema);
    for (size_t i = 0; i < f->subjects_count; i++)
        free(f->subjects[i].subject);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

void fake_registry_put(fake_registry_t *f, uint32_t id, const char *schema_json)
{
    pthread_mutex_lock(&f->lock);
    assert_null(find_id(f, id));
    assert_true(f->schemas_count < FAKE_SCHEMAS_MAX);
    f->schemas[f->schemas_count++] = (fake_schema_t){id, strdup(schema_json)};
    pthread_mutex_unlock(&f->lock);
}

long fake_registry_subject_id(fake_registry_t *f, const char *subject)
{
    long id = -1;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->subjects_count; i++)
        if (strcmp(f->subjects[i].subject, subject) == 0)
            id = f->subjects[i].id;
    pthread_mutex_unlock(&f->lock);
    return id;
}

void fake_registry_fail_with(fake_registry_t *f, int status)
{
    pthread_mutex_lock(&f->lock);
    f->fail_status = status;
    pthread_mutex_unlock(&f->lock);
}

size_t fake_registry_requests(fake_registry_t *f)
{
    pthread_mutex_lock(&f->lock);
    size_t n = f->requests;
    pthread_mutex_unlock(&f->lock);
    return n;
}
