/* The codec's registry and entry points (codec.h): every compiled-in schema and
 * every historical writer schema, keyed by fingerprint, and per-thread avro-c
 * values so that encode and decode allocate nothing per call beyond what avro-c's
 * string reader needs. Schemas, plans and value interfaces are built once by
 * codec_init and only read afterwards; each thread lazily creates its own values,
 * reader, writer and scratch buffer, freed when the thread exits. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "codec_avro.h"

typedef struct {
    hf_rec_type_t type;
    uint64_t fingerprint;
    char *canonical;                    /* Parsing Canonical Form */
    avro_schema_t writer;               /* the schema records were written with */
    avro_schema_t value_schema;         /* current schema, or its projection */
    avro_value_iface_t *value_iface;    /* generic values of value_schema */
    avro_value_iface_t *resolver_iface; /* writer -> value_schema; NULL if current */
    codec_plan_t *plan;
    size_t encoded_len_max; /* header + worst-case body */
} codec_entry_t;

typedef struct {
    codec_entry_t *entries; /* [0, HF_REC__COUNT): current, by type; then history */
    size_t entries_count;
    size_t scratch_size; /* header + the largest body any record can encode to */
    unsigned generation;
} codec_registry_t;

typedef struct {
    avro_value_t value;    /* generic value of the entry's value_schema */
    avro_value_t resolved; /* resolver value writing into value (old writers) */
    bool ready;
} codec_slot_t;

typedef struct {
    unsigned generation; /* of the registry the slots were made for */
    avro_reader_t reader;
    avro_writer_t writer;
    uint8_t *scratch;
    size_t slots_count;
    codec_slot_t *slots;
} codec_tls_t;

static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(codec_registry_t *) g_reg;
static unsigned g_generation;
static pthread_once_t g_tls_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_tls_key;
static _Thread_local codec_tls_t *t_tls;

/* The id resolver of Confluent-framed records (codec.h), swapped as one pair. */
typedef struct {
    codec_id_resolver_fn fn;
    void *opaque;
} codec_resolver_t;
static pthread_mutex_t g_resolver_lock = PTHREAD_MUTEX_INITIALIZER;
static codec_resolver_t g_resolver;

/* ---- per-thread state */

static void tls_free(codec_tls_t *tls)
{
    if (!tls)
        return;
    for (size_t i = 0; tls->slots && i < tls->slots_count; i++) {
        if (!tls->slots[i].ready)
            continue;
        if (tls->slots[i].resolved.iface)
            avro_value_decref(&tls->slots[i].resolved);
        avro_value_decref(&tls->slots[i].value);
    }
    if (tls->reader)
        avro_reader_free(tls->reader);
    if (tls->writer)
        avro_writer_free(tls->writer);
    free(tls->scratch);
    free(tls->slots);
    free(tls);
}

static void tls_destructor(void *arg)
{
    tls_free(arg);
    t_tls = NULL;
}

static void tls_key_create(void)
{
    if (pthread_key_create(&g_tls_key, tls_destructor) != 0)
        abort(); /* only with PTHREAD_KEYS_MAX keys in use: nothing can work */
}

static codec_tls_t *tls_new(const codec_registry_t *reg)
{
    static const char empty[1];
    codec_tls_t *tls = calloc(1, sizeof *tls);
    if (!tls)
        return NULL;
    tls->generation = reg->generation;
    tls->slots_count = reg->entries_count;
    tls->slots = calloc(reg->entries_count, sizeof *tls->slots);
    tls->scratch = malloc(reg->scratch_size);
    tls->reader = avro_reader_memory(empty, 0);
    tls->writer = avro_writer_memory(empty, 0);
    if (!tls->slots || !tls->scratch || !tls->reader || !tls->writer) {
        tls_free(tls);
        return NULL;
    }
    return tls;
}

/* This thread's state for reg, rebuilt after a codec_shutdown + codec_init. */
static codec_tls_t *tls_get(const codec_registry_t *reg)
{
    if (t_tls && t_tls->generation == reg->generation)
        return t_tls;
    pthread_once(&g_tls_once, tls_key_create);
    tls_free(t_tls);
    t_tls = tls_new(reg);
    pthread_setspecific(g_tls_key, t_tls);
    return t_tls;
}

static codec_slot_t *tls_slot(codec_tls_t *tls, const codec_entry_t *e, size_t idx)
{
    codec_slot_t *slot = &tls->slots[idx];
    if (slot->ready)
        return slot;
    if (avro_generic_value_new(e->value_iface, &slot->value))
        return NULL;
    if (e->resolver_iface) {
        if (avro_resolved_writer_new_value(e->resolver_iface, &slot->resolved)) {
            avro_value_decref(&slot->value);
            return NULL;
        }
        avro_resolved_writer_set_dest(&slot->resolved, &slot->value);
    }
    slot->ready = true;
    return slot;
}

/* ---- registry */

static void entry_free(codec_entry_t *e)
{
    free(e->canonical);
    codec_plan_free(e->plan);
    if (e->resolver_iface)
        avro_value_iface_decref(e->resolver_iface);
    if (e->value_iface)
        avro_value_iface_decref(e->value_iface);
    if (e->value_schema)
        avro_schema_decref(e->value_schema);
    if (e->writer)
        avro_schema_decref(e->writer);
}

static void registry_free(codec_registry_t *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; reg->entries && i < reg->entries_count; i++)
        entry_free(&reg->entries[i]);
    free(reg->entries);
    free(reg);
}

/* Fingerprint and parsed writer schema of one schema text. */
static int entry_parse(codec_entry_t *e, hf_rec_type_t type, const char *json, char *errstr,
                       size_t errstr_size)
{
    const char *name = hf_rec_type_name(type);
    int err = codec_parsing_canonical_form(json, &e->canonical, errstr, errstr_size);
    if (err)
        return err;
    e->type = type;
    e->fingerprint = codec_crc64_avro(e->canonical, strlen(e->canonical));
    if (avro_schema_from_json_length(json, strlen(json), &e->writer)) {
        e->writer = NULL;
        codec_errf(errstr, errstr_size, "schema %s: avro-c rejects it: %s", name, avro_strerror());
        return HF_ERR_CONFIG;
    }
    if (!is_avro_record(e->writer) || strcmp(avro_schema_name(e->writer), name) != 0) {
        codec_errf(errstr, errstr_size, "schema for %s does not define record %s", name, name);
        return HF_ERR_CONFIG;
    }
    return HF_OK;
}

static int entry_init_current(codec_entry_t *e, hf_rec_type_t type, char *errstr,
                              size_t errstr_size)
{
    const char *json = hf_schema_json[type];
    int err = entry_parse(e, type, json, errstr, errstr_size);
    if (err)
        return err;
    e->value_schema = avro_schema_incref(e->writer);
    if (!(e->value_iface = avro_generic_class_from_schema(e->value_schema))) {
        codec_errf(errstr, errstr_size, "schema %s: %s", hf_rec_type_name(type), avro_strerror());
        return HF_ERR_CONFIG;
    }
    return codec_plan_new(codec_rec_descs[type], e->value_schema, true, json, &e->plan, errstr,
                          errstr_size);
}

static int entry_init_history(codec_entry_t *e, const codec_history_t *h,
                              const codec_entry_t *current, char *errstr, size_t errstr_size)
{
    const char *name = hf_rec_type_name(h->type);
    int err = entry_parse(e, h->type, h->json, errstr, errstr_size);
    if (err)
        return err;
    if ((err = codec_project(e->writer, current->value_schema, &e->value_schema, errstr,
                             errstr_size)))
        return err;
    e->value_iface = avro_generic_class_from_schema(e->value_schema);
    e->resolver_iface = avro_resolved_writer_new(e->writer, e->value_schema);
    if (!e->value_iface || !e->resolver_iface) {
        codec_errf(errstr, errstr_size, "older schema %s (%016" PRIx64 ") does not resolve: %s",
                   name, e->fingerprint, avro_strerror());
        return HF_ERR_CONFIG;
    }
    return codec_plan_new(codec_rec_descs[h->type], e->value_schema, false, hf_schema_json[h->type],
                          &e->plan, errstr, errstr_size);
}

static int registry_check(codec_registry_t *reg, char *errstr, size_t errstr_size)
{
    for (size_t i = 0; i < reg->entries_count; i++) {
        for (size_t j = i + 1; j < reg->entries_count; j++) {
            if (reg->entries[i].fingerprint == reg->entries[j].fingerprint) {
                codec_errf(errstr, errstr_size, "schemas %s and %s share fingerprint %016" PRIx64,
                           hf_rec_type_name(reg->entries[i].type),
                           hf_rec_type_name(reg->entries[j].type), reg->entries[i].fingerprint);
                return HF_ERR_CONFIG;
            }
        }
    }
    for (int t = 0; t < HF_REC__COUNT; t++) {
        codec_entry_t *e = &reg->entries[t];
        e->encoded_len_max = CODEC_HEADER_LEN + codec_desc_body_len_max(codec_rec_descs[t]);
        if (e->encoded_len_max > reg->scratch_size)
            reg->scratch_size = e->encoded_len_max;
    }
    return HF_OK;
}

static int registry_build(codec_registry_t **out, char *errstr, size_t errstr_size)
{
    codec_registry_t *reg = calloc(1, sizeof *reg);
    int err = HF_ERR_NOMEM;

    if (!reg || !(reg->entries = calloc(HF_REC__COUNT + codec_history_count, sizeof *reg->entries)))
        goto fail;
    reg->entries_count = HF_REC__COUNT + codec_history_count;
    for (int t = 0; t < HF_REC__COUNT; t++)
        if ((err = entry_init_current(&reg->entries[t], (hf_rec_type_t)t, errstr, errstr_size)))
            goto fail;
    for (size_t h = 0; h < codec_history_count; h++)
        if ((err = entry_init_history(&reg->entries[HF_REC__COUNT + h], &codec_history[h],
                                      &reg->entries[codec_history[h].type], errstr, errstr_size)))
            goto fail;
    if ((err = registry_check(reg, errstr, errstr_size)))
        goto fail;
    *out = reg;
    return HF_OK;
fail:
    registry_free(reg);
    return err;
}

int codec_init(char *errstr, size_t errstr_size)
{
    codec_registry_t *reg = NULL;
    int err = HF_OK;

    pthread_mutex_lock(&g_init_lock);
    if (atomic_load(&g_reg))
        goto done;
    if ((err = registry_build(&reg, errstr, errstr_size)))
        goto done;
    reg->generation = ++g_generation;
    atomic_store(&g_reg, reg);
done:
    pthread_mutex_unlock(&g_init_lock);
    return err;
}

void codec_shutdown(void)
{
    pthread_mutex_lock(&g_init_lock);
    codec_registry_t *reg = atomic_exchange(&g_reg, NULL);
    tls_free(t_tls); /* other threads free theirs on exit or next use */
    t_tls = NULL;
    pthread_once(&g_tls_once, tls_key_create);
    pthread_setspecific(g_tls_key, NULL);
    registry_free(reg);
    pthread_mutex_unlock(&g_init_lock);
}

uint64_t codec_fingerprint(hf_rec_type_t type)
{
    codec_registry_t *reg = atomic_load(&g_reg);
    if (!reg || (int)type < 0 || type >= HF_REC__COUNT)
        return 0;
    return reg->entries[type].fingerprint;
}

const char *codec_canonical_form(hf_rec_type_t type)
{
    codec_registry_t *reg = atomic_load(&g_reg);
    if (!reg || (int)type < 0 || type >= HF_REC__COUNT)
        return NULL;
    return reg->entries[type].canonical;
}

/* ---- encode */

static void put_header(uint8_t *buf, uint64_t fingerprint)
{
    buf[0] = CODEC_MAGIC_0;
    buf[1] = CODEC_MAGIC_1;
    for (int i = 0; i < 8; i++)
        buf[2 + i] = (uint8_t)(fingerprint >> (8 * i));
}

/* Writes the body into buf when the worst case fits there, else into scratch
 * (sized for the worst case of every type), so avro-c never runs out of room. */
static int write_body(codec_tls_t *tls, const codec_registry_t *reg, const codec_entry_t *e,
                      avro_value_t *value, uint8_t *buf, size_t buf_size, uint8_t **body,
                      size_t *body_len)
{
    bool direct = buf_size >= e->encoded_len_max;
    *body = (direct ? buf : tls->scratch) + CODEC_HEADER_LEN;
    avro_writer_memory_set_dest(
        tls->writer, (const char *)*body,
        (int64_t)((direct ? buf_size : reg->scratch_size) - CODEC_HEADER_LEN));
    if (avro_value_write(tls->writer, value))
        return HF_ERR_ENCODE;
    *body_len = (size_t)avro_writer_tell(tls->writer);
    return HF_OK;
}

int codec_encode(const hf_record_t *rec, uint8_t *buf, size_t buf_size, size_t *len_out,
                 char *errstr, size_t errstr_size)
{
    if (!rec) {
        codec_errf(errstr, errstr_size, "codec_encode: NULL argument");
        return HF_ERR_INVAL;
    }
    return codec_encode_as(rec->type, &rec->u, buf, buf_size, len_out, errstr, errstr_size);
}

int codec_encode_as(hf_rec_type_t type, const void *src, uint8_t *buf, size_t buf_size,
                    size_t *len_out, char *errstr, size_t errstr_size)
{
    codec_registry_t *reg = atomic_load(&g_reg);
    char detail[384];
    uint8_t *body;
    size_t body_len;
    int err;

    if (!reg || !src || !buf || !len_out) {
        codec_errf(errstr, errstr_size, "codec_encode: %s",
                   reg ? "NULL argument" : "codec_init not called");
        return HF_ERR_INVAL;
    }
    if ((int)type < 0 || type >= HF_REC__COUNT) {
        codec_errf(errstr, errstr_size, "codec_encode: unknown record type %d", (int)type);
        return HF_ERR_ENCODE;
    }
    const codec_entry_t *e = &reg->entries[type];
    codec_tls_t *tls = tls_get(reg);
    codec_slot_t *slot = tls ? tls_slot(tls, e, type) : NULL;
    if (!slot) {
        codec_errf(errstr, errstr_size, "codec_encode: out of memory");
        return HF_ERR_NOMEM;
    }
    avro_value_reset(&slot->value);
    err = codec_value_from_struct(e->plan->rd, src, &slot->value, detail, sizeof detail);
    if (err) {
        codec_errf(errstr, errstr_size, "%s.%s", e->plan->rd->name, detail);
        return err;
    }
    if ((err = write_body(tls, reg, e, &slot->value, buf, buf_size, &body, &body_len))) {
        codec_errf(errstr, errstr_size, "%s: avro-c could not write the body", e->plan->rd->name);
        return err;
    }
    if (CODEC_HEADER_LEN + body_len > buf_size) {
        codec_errf(errstr, errstr_size, "%s: needs %zu bytes, the buffer has %zu",
                   e->plan->rd->name, CODEC_HEADER_LEN + body_len, buf_size);
        return HF_ERR_LIMIT;
    }
    if (body != buf + CODEC_HEADER_LEN)
        memcpy(buf + CODEC_HEADER_LEN, body, body_len);
    put_header(buf, e->fingerprint);
    *len_out = CODEC_HEADER_LEN + body_len;
    return HF_OK;
}

int codec_encode_confluent(const hf_record_t *rec, uint32_t schema_id, uint8_t *buf,
                           size_t buf_size, size_t *len_out, char *errstr, size_t errstr_size)
{
    int err = codec_encode(rec, buf, buf_size, len_out, errstr, errstr_size);
    if (err)
        return err;
    /* The same body behind the shorter header: move it 5 bytes towards the front. */
    size_t body_len = *len_out - CODEC_HEADER_LEN;
    memmove(buf + CODEC_CONFLUENT_HEADER_LEN, buf + CODEC_HEADER_LEN, body_len);
    buf[0] = CODEC_CONFLUENT_MAGIC;
    for (int i = 0; i < 4; i++)
        buf[1 + i] = (uint8_t)(schema_id >> (8 * (3 - i)));
    *len_out = CODEC_CONFLUENT_HEADER_LEN + body_len;
    return HF_OK;
}

void codec_set_id_resolver(codec_id_resolver_fn fn, void *opaque)
{
    pthread_mutex_lock(&g_resolver_lock);
    g_resolver = (codec_resolver_t){fn, fn ? opaque : NULL};
    pthread_mutex_unlock(&g_resolver_lock);
}

/* ---- decode */

/* The fingerprint a Confluent header stands for, through the installed resolver. */
static int confluent_fingerprint(const uint8_t *bytes, size_t len, uint64_t *fp, char *errstr,
                                 size_t errstr_size)
{
    if (len < CODEC_CONFLUENT_HEADER_LEN) {
        codec_errf(errstr, errstr_size,
                   "record of %zu bytes is shorter than the %d-byte Confluent header", len,
                   CODEC_CONFLUENT_HEADER_LEN);
        return HF_ERR_DECODE;
    }
    uint32_t id = ((uint32_t)bytes[1] << 24) | ((uint32_t)bytes[2] << 16) |
                  ((uint32_t)bytes[3] << 8) | bytes[4];
    pthread_mutex_lock(&g_resolver_lock);
    codec_resolver_t r = g_resolver;
    pthread_mutex_unlock(&g_resolver_lock);
    if (!r.fn) {
        codec_errf(errstr, errstr_size,
                   "Confluent-framed record with schema id %" PRIu32
                   ", but no schema registry is configured to resolve it (set "
                   "schema_registry_url, or HOLDFAST_SCHEMA_REGISTRY_URL for hfctl)",
                   id);
        return HF_ERR_UNKNOWN_SCHEMA;
    }
    char why[256] = "";
    int err = r.fn(r.opaque, id, fp, why, sizeof why);
    if (err)
        codec_errf(errstr, errstr_size, "schema id %" PRIu32 ": %s", id,
                   why[0] ? why : hf_err_str(err));
    return err;
}

/* The entry of the writer schema named by the header, and the header's length. */
static int find_entry(const codec_registry_t *reg, const uint8_t *bytes, size_t len, size_t *idx,
                      size_t *header_len, char *errstr, size_t errstr_size)
{
    uint64_t fp = 0;
    if (len > 0 && bytes[0] == CODEC_CONFLUENT_MAGIC) {
        int err = confluent_fingerprint(bytes, len, &fp, errstr, errstr_size);
        if (err)
            return err;
        for (size_t i = 0; i < reg->entries_count; i++) {
            if (reg->entries[i].fingerprint == fp) {
                *idx = i;
                *header_len = CODEC_CONFLUENT_HEADER_LEN;
                return HF_OK;
            }
        }
        codec_errf(errstr, errstr_size,
                   "schema id %u is registered with a schema this build does not know "
                   "(fingerprint %016" PRIx64 ")",
                   ((unsigned)bytes[1] << 24) | ((unsigned)bytes[2] << 16) |
                       ((unsigned)bytes[3] << 8) | bytes[4],
                   fp);
        return HF_ERR_UNKNOWN_SCHEMA;
    }
    if (len < CODEC_HEADER_LEN) {
        codec_errf(errstr, errstr_size, "record of %zu bytes is shorter than the %d-byte header",
                   len, CODEC_HEADER_LEN);
        return HF_ERR_DECODE;
    }
    if (bytes[0] != CODEC_MAGIC_0 || bytes[1] != CODEC_MAGIC_1) {
        codec_errf(errstr, errstr_size,
                   "neither Avro single-object encoding nor Confluent framing: magic %02x %02x, "
                   "want c3 01 or 00",
                   bytes[0], bytes[1]);
        return HF_ERR_DECODE;
    }
    for (int i = 7; i >= 0; i--)
        fp = (fp << 8) | bytes[2 + i];
    for (size_t i = 0; i < reg->entries_count; i++) {
        if (reg->entries[i].fingerprint == fp) {
            *idx = i;
            *header_len = CODEC_HEADER_LEN;
            return HF_OK;
        }
    }
    codec_errf(errstr, errstr_size, "unknown schema fingerprint %016" PRIx64, fp);
    return HF_ERR_UNKNOWN_SCHEMA;
}

static int read_body(codec_tls_t *tls, const codec_entry_t *e, codec_slot_t *slot,
                     const uint8_t *body, size_t body_len)
{
    avro_value_t *target = e->resolver_iface ? &slot->resolved : &slot->value;
    avro_value_reset(target);
    avro_reader_memory_set_source(tls->reader, (const char *)body, (int64_t)body_len);
    return avro_value_read(tls->reader, target) ? HF_ERR_DECODE : HF_OK;
}

/* Decodes into dst, the struct of the record's type; want >= 0: only a record
 * of that type (anything else fails before dst is written). */
static int decode(const codec_registry_t *reg, const uint8_t *bytes, size_t len, int want,
                  hf_rec_type_t *type_out, void *dst, char *errstr, size_t errstr_size)
{
    char detail[384];
    size_t idx = 0, header_len = 0;
    int err = find_entry(reg, bytes, len, &idx, &header_len, errstr, errstr_size);
    if (err)
        return err;
    const codec_entry_t *e = &reg->entries[idx];
    const char *name = e->plan->rd->name;
    if (want >= 0 && (int)e->type != want) {
        codec_errf(errstr, errstr_size, "a %s where a %s was expected", name,
                   hf_rec_type_name((hf_rec_type_t)want));
        return HF_ERR_DECODE;
    }
    const uint8_t *body = bytes + header_len;
    size_t body_len = len - header_len;
    if ((err = codec_validate_body(e->writer, name, body, body_len, errstr, errstr_size)))
        return err;
    codec_tls_t *tls = tls_get(reg);
    codec_slot_t *slot = tls ? tls_slot(tls, e, idx) : NULL;
    if (!slot) {
        codec_errf(errstr, errstr_size, "%s: out of memory", name);
        return HF_ERR_NOMEM;
    }
    if ((err = read_body(tls, e, slot, body, body_len))) {
        codec_errf(errstr, errstr_size, "%s: avro-c could not read the body", name);
        return err;
    }
    *type_out = e->type;
    if ((err = codec_value_to_struct(e->plan, &slot->value, dst, detail, sizeof detail)))
        codec_errf(errstr, errstr_size, "%s.%s", name, detail);
    return err;
}

int codec_decode(const uint8_t *bytes, size_t len, hf_record_t *rec, char *errstr,
                 size_t errstr_size)
{
    codec_registry_t *reg = atomic_load(&g_reg);
    if (!reg || !rec || (!bytes && len)) {
        codec_errf(errstr, errstr_size, "codec_decode: %s",
                   reg ? "NULL argument" : "codec_init not called");
        return HF_ERR_INVAL;
    }
    return decode(reg, bytes, len, -1, &rec->type, &rec->u, errstr, errstr_size);
}

int codec_decode_as(const uint8_t *bytes, size_t len, hf_rec_type_t type, void *dst, char *errstr,
                    size_t errstr_size)
{
    codec_registry_t *reg = atomic_load(&g_reg);
    if (!reg || !dst || (!bytes && len) || (int)type < 0 || type >= HF_REC__COUNT) {
        codec_errf(errstr, errstr_size, "codec_decode_as: %s",
                   reg ? "NULL argument or unknown type" : "codec_init not called");
        return HF_ERR_INVAL;
    }
    hf_rec_type_t got = type;
    return decode(reg, bytes, len, (int)type, &got, dst, errstr, errstr_size);
}

int codec_to_json(const uint8_t *bytes, size_t len, char **json_out, char *errstr,
                  size_t errstr_size)
{
    codec_registry_t *reg = atomic_load(&g_reg);
    hf_record_t *rec = NULL;
    int err = HF_ERR_INVAL;

    if (json_out)
        *json_out = NULL;
    if (!reg || !json_out || (!bytes && len)) {
        codec_errf(errstr, errstr_size, "codec_to_json: %s",
                   reg ? "NULL argument" : "codec_init not called");
        goto done;
    }
    if (!(rec = malloc(sizeof *rec))) { /* ~17 KiB: too big for some thread stacks */
        err = HF_ERR_NOMEM;
        goto done;
    }
    if ((err = decode(reg, bytes, len, -1, &rec->type, &rec->u, errstr, errstr_size)))
        goto done;
    err = codec_json_render(rec, json_out, errstr, errstr_size);
done:
    free(rec);
    return err;
}
