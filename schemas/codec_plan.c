/* Checks a record schema against a struct descriptor and builds the decode plan
 * (codec_plan_t), and projects the current reader schema onto an older writer's
 * fields. Together they give schema evolution on top of avro-c 1.11, whose
 * resolver cannot fill reader defaults: avro-c resolves the writer into the
 * projection, and the plan's template supplies the defaults of the fields the
 * writer lacks. Runs at codec_init only. */
#include <stdlib.h>
#include <string.h>

#include "codec_avro.h"

static int plan_fail(char *errstr, size_t errstr_size, const char *rec, const char *field,
                     const char *why)
{
    codec_errf(errstr, errstr_size, "schema %s.%s: %s", rec, field, why);
    return HF_ERR_CONFIG;
}

/* Field index by name without avro_schema_record_field_get_index, which sets
 * avro-c's process-wide error string on a miss. */
static int field_index(avro_schema_t rec, const char *name)
{
    size_t n = avro_schema_record_size(rec);
    for (size_t i = 0; i < n; i++)
        if (strcmp(avro_schema_record_field_name(rec, (int)i), name) == 0)
            return (int)i;
    return -1;
}

static avro_schema_t skip_links(avro_schema_t s)
{
    for (int i = 0; i < CODEC_DEPTH_MAX && is_avro_link(s); i++)
        s = avro_schema_link_target(s);
    return s;
}

/* The value schema's enums are always the current ones (a projection keeps the
 * reader's), so their symbols must be exactly the C symbols, in order. */
static bool enum_matches(const codec_field_t *f, avro_schema_t s)
{
    int n = avro_schema_enum_number_of_symbols(s);
    if (n < 0 || (size_t)n != f->symbols_count)
        return false;
    for (int i = 0; i < n; i++)
        if (strcmp(avro_schema_enum_get(s, i), f->symbols[i]) != 0)
            return false;
    return true;
}

/* exact: s is the current schema. An older writer's value schema may also hold
 * an int where the field is an enum now (see codec_project). */
static bool kind_matches(const codec_field_t *f, avro_schema_t s, bool exact)
{
    switch (f->kind) {
    case CODEC_KIND_STRING:
        return is_avro_string(s);
    case CODEC_KIND_INT:
        return is_avro_int32(s);
    case CODEC_KIND_LONG:
        return is_avro_int64(s);
    case CODEC_KIND_DOUBLE:
        return is_avro_double(s);
    case CODEC_KIND_BOOLEAN:
        return is_avro_boolean(s);
    case CODEC_KIND_ENUM:
        return (is_avro_enum(s) && enum_matches(f, s)) || (!exact && is_avro_int32(s));
    case CODEC_KIND_BYTES:
        return is_avro_bytes(s);
    case CODEC_KIND_RECORD:
        return is_avro_record(s);
    case CODEC_KIND_ARRAY:
        return is_avro_array(s) && is_avro_record(skip_links(avro_schema_array_items(s)));
    }
    return false;
}

static codec_plan_t *plan_alloc(const codec_rec_desc_t *rd)
{
    codec_plan_t *plan = calloc(1, sizeof *plan);
    if (!plan)
        return NULL;
    plan->rd = rd;
    plan->index = calloc(rd->fields_count, sizeof *plan->index);
    /* An array of child plan pointers: sizeof one pointer, as meant. */
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    plan->children = calloc(rd->fields_count, sizeof *plan->children);
    plan->tmpl = calloc(1, rd->struct_size);
    if (!plan->index || !plan->children || !plan->tmpl) {
        codec_plan_free(plan);
        return NULL;
    }
    return plan;
}

void codec_plan_free(codec_plan_t *plan)
{
    if (!plan)
        return;
    for (size_t i = 0; plan->children && i < plan->rd->fields_count; i++)
        codec_plan_free(plan->children[i]);
    free(plan->children);
    free(plan->index);
    free(plan->tmpl);
    free(plan);
}

/* One descriptor field: where it is in the value schema, its child plan, or its
 * default when the writer lacks it. */
static int plan_field(codec_plan_t *plan, size_t i, avro_schema_t value_schema, bool exact,
                      const char *reader_json, char *errstr, size_t errstr_size)
{
    const codec_rec_desc_t *rd = plan->rd;
    const codec_field_t *f = &rd->fields[i];
    int idx = field_index(value_schema, f->name);
    if (exact && idx != (int)i)
        return plan_fail(errstr, errstr_size, rd->name, f->name,
                         "not at its struct position in the schema");
    plan->index[i] = idx;
    if (idx < 0) {
        int err =
            codec_default_from_schema(reader_json, rd->name, f, plan->tmpl, errstr, errstr_size);
        if (err == HF_ERR_NOTFOUND)
            return plan_fail(errstr, errstr_size, rd->name, f->name,
                             "missing from an older writer schema and has no default");
        return err;
    }
    avro_schema_t fs = skip_links(avro_schema_record_field_get_by_index(value_schema, idx));
    if (!kind_matches(f, fs, exact))
        return plan_fail(errstr, errstr_size, rd->name, f->name,
                         "schema type or enum symbols differ from the C struct");
    if (f->kind == CODEC_KIND_ARRAY)
        fs = skip_links(avro_schema_array_items(fs));
    if (f->kind == CODEC_KIND_RECORD || f->kind == CODEC_KIND_ARRAY)
        return codec_plan_new(f->rec, fs, exact, reader_json, &plan->children[i], errstr,
                              errstr_size);
    return HF_OK;
}

int codec_plan_new(const codec_rec_desc_t *rd, avro_schema_t value_schema, bool exact,
                   const char *reader_json, codec_plan_t **out, char *errstr, size_t errstr_size)
{
    codec_plan_t *plan = NULL;
    int err = HF_ERR_CONFIG;

    *out = NULL;
    if (!is_avro_record(value_schema) || strcmp(avro_schema_name(value_schema), rd->name) != 0) {
        codec_errf(errstr, errstr_size, "schema: expected record %s", rd->name);
        goto fail;
    }
    if (exact && avro_schema_record_size(value_schema) != rd->fields_count) {
        codec_errf(errstr, errstr_size, "schema %s has %zu fields, the C struct %zu", rd->name,
                   avro_schema_record_size(value_schema), rd->fields_count);
        goto fail;
    }
    if (!(plan = plan_alloc(rd))) {
        err = HF_ERR_NOMEM;
        goto fail;
    }
    for (size_t i = 0; i < rd->fields_count; i++)
        if ((err = plan_field(plan, i, value_schema, exact, reader_json, errstr, errstr_size)))
            goto fail;
    *out = plan;
    return HF_OK;
fail:
    codec_plan_free(plan);
    return err;
}

/* ---- projection of the reader onto an older writer */

static int project_record(avro_schema_t writer, avro_schema_t reader, avro_schema_t *out,
                          char *errstr, size_t errstr_size)
{
    avro_schema_t rec = avro_schema_record(avro_schema_name(reader), avro_schema_namespace(reader));
    if (!rec)
        return HF_ERR_NOMEM;
    size_t n = avro_schema_record_size(reader);
    for (size_t i = 0; i < n; i++) {
        const char *name = avro_schema_record_field_name(reader, (int)i);
        int wi = field_index(writer, name);
        if (wi < 0)
            continue; /* the plan supplies its default */
        avro_schema_t child = NULL;
        int err = codec_project(avro_schema_record_field_get_by_index(writer, wi),
                                avro_schema_record_field_get_by_index(reader, (int)i), &child,
                                errstr, errstr_size);
        if (!err && avro_schema_record_field_append(rec, name, child))
            err = HF_ERR_NOMEM;
        if (child)
            avro_schema_decref(child);
        if (err) {
            avro_schema_decref(rec);
            return err;
        }
    }
    *out = rec;
    return HF_OK;
}

/* avro-c's resolver maps enum values by index, so an older writer's symbols must
 * be the first symbols of the reader's. */
static bool enum_is_prefix(avro_schema_t writer, avro_schema_t reader)
{
    int n = avro_schema_enum_number_of_symbols(writer);
    if (n < 0 || n > avro_schema_enum_number_of_symbols(reader))
        return false;
    for (int i = 0; i < n; i++)
        if (strcmp(avro_schema_enum_get(writer, i), avro_schema_enum_get(reader, i)) != 0)
            return false;
    return true;
}

int codec_project(avro_schema_t writer, avro_schema_t reader, avro_schema_t *out, char *errstr,
                  size_t errstr_size)
{
    writer = skip_links(writer);
    reader = skip_links(reader);
    *out = NULL;
    /* A field that was an int and is an enum now (introduced with its symbols in
     * the order of the old numbers): avro-c does not promote int to enum, so the
     * projection keeps the int and the decoder takes it as the symbol index,
     * range-checked like any enum. */
    if (is_avro_enum(reader) && is_avro_int32(writer)) {
        *out = avro_schema_incref(writer);
        return HF_OK;
    }
    if (is_avro_record(reader) || is_avro_enum(reader)) {
        if (avro_typeof(writer) != avro_typeof(reader) ||
            strcmp(avro_schema_name(writer), avro_schema_name(reader)) != 0) {
            codec_errf(errstr, errstr_size, "schema: writer type does not match reader %s",
                       avro_schema_name(reader));
            return HF_ERR_CONFIG;
        }
        if (is_avro_record(reader))
            return project_record(writer, reader, out, errstr, errstr_size);
        if (!enum_is_prefix(writer, reader)) {
            codec_errf(errstr, errstr_size,
                       "schema: writer enum %s is not a prefix of the current symbols "
                       "(symbols are append-only)",
                       avro_schema_name(reader));
            return HF_ERR_CONFIG;
        }
    }
    if (is_avro_array(reader) && is_avro_array(writer)) {
        avro_schema_t items = NULL;
        int err = codec_project(avro_schema_array_items(writer), avro_schema_array_items(reader),
                                &items, errstr, errstr_size);
        if (err)
            return err;
        *out = avro_schema_array(items);
        avro_schema_decref(items);
        return *out ? HF_OK : HF_ERR_NOMEM;
    }
    /* Primitives and enums stay the reader's own; avro-c's resolver checks the
     * promotion (int -> long, ...) and the plan checks enum symbols. */
    *out = avro_schema_incref(reader);
    return HF_OK;
}
