/* holdfast's one failure enum. Failures are things that went wrong (I/O, decode,
 * Kafka); business outcomes (INSUFFICIENT, CONFLICT, ...) are results on the wire
 * and live in schemas/records.h. Codes are stable: never renumber, only append. */
#ifndef HF_ERR_H
#define HF_ERR_H

#define HF_ERR_MAP(X)                                                                              \
    X(OK, 0, "success")                                                                            \
    X(INVAL, -1, "invalid argument")                                                               \
    X(NOMEM, -2, "out of memory")                                                                  \
    X(IO, -3, "storage I/O failed")                                                                \
    X(DECODE, -4, "record could not be decoded")                                                   \
    X(ENCODE, -5, "record could not be encoded")                                                   \
    X(LIMIT, -6, "value exceeds a configured limit")                                               \
    X(KAFKA, -7, "Kafka operation failed")                                                         \
    X(ABORTABLE, -8, "transaction must be aborted and retried")                                    \
    X(FATAL, -9, "fatal error: the task must stop (fenced or broken)")                             \
    X(NOTFOUND, -10, "not found")                                                                  \
    X(TIMEOUT, -11, "timed out")                                                                   \
    X(CORRUPT, -12, "stored state breaks an invariant")                                            \
    X(CONFIG, -13, "bad configuration")                                                            \
    X(UNKNOWN_SCHEMA, -14, "record has a schema fingerprint this build does not know")

typedef enum {
#define HF_ERR_ENUM(name, code, str) HF_ERR_##name = code,
    HF_ERR_MAP(HF_ERR_ENUM)
#undef HF_ERR_ENUM
} hf_err_t;

#define HF_OK HF_ERR_OK

/* "HF_ERR_IO" etc; never NULL. */
const char *hf_err_name(int err);
/* Human sentence; never NULL. */
const char *hf_err_str(int err);

#define HF_MUST_CHECK __attribute__((warn_unused_result))

#endif
