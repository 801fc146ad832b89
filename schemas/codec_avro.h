/* Declarations shared by the codec files that use avro-c (schemas/codec*.c). Only
 * these files include <avro.h> (STYLE.md: only the codec beside schemas/ does). */
#ifndef HF_CODEC_AVRO_H
#define HF_CODEC_AVRO_H

#include <avro.h>

#include "codec_internal.h"

/* How to fill one struct from an avro record value: for each descriptor field, the
 * index of that field in the value's record schema, or -1 when the writer schema
 * lacks it (its default is then already in tmpl). */
typedef struct codec_plan codec_plan_t;
struct codec_plan {
    const codec_rec_desc_t *rd;
    int *index;              /* rd->fields_count entries */
    codec_plan_t **children; /* per field: plan of a RECORD or of ARRAY items */
    void *tmpl;              /* rd->struct_size bytes: zeros and absent fields' defaults */
};

/* Builds the plan for values of record schema value_schema, checking every field's
 * type and enum symbols against the descriptor. exact: the schema must have the
 * descriptor's fields in the same order, as the current schemas do. Otherwise
 * (a projection for an older writer) absent fields take their default from
 * reader_json, the current schema text, and a field without one is an error. */
int codec_plan_new(const codec_rec_desc_t *rd, avro_schema_t value_schema, bool exact,
                   const char *reader_json, codec_plan_t **out, char *errstr,
                   size_t errstr_size) HF_MUST_CHECK;
void codec_plan_free(codec_plan_t *plan);

/* The reader schema restricted to the fields the writer also has (recursively),
 * so avro-c's resolver, which rejects reader fields missing from the writer
 * (defaults are a TODO in avro-c 1.11), can still resolve an older writer. */
int codec_project(avro_schema_t writer, avro_schema_t reader, avro_schema_t *out, char *errstr,
                  size_t errstr_size) HF_MUST_CHECK;

/* Struct -> avro value of the current schema (value reset by the caller). */
int codec_value_from_struct(const codec_rec_desc_t *rd, const void *src, avro_value_t *val,
                            char *errstr, size_t errstr_size) HF_MUST_CHECK;
/* Avro value -> struct, following plan. */
int codec_value_to_struct(const codec_plan_t *plan, avro_value_t *val, void *dst, char *errstr,
                          size_t errstr_size) HF_MUST_CHECK;

/* See codec_validate.c. HF_ERR_DECODE with a reason naming record. */
int codec_validate_body(avro_schema_t writer, const char *record, const uint8_t *body, size_t len,
                        char *errstr, size_t errstr_size) HF_MUST_CHECK;

#endif
