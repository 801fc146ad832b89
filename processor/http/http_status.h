/* The HTTP front's read model of reservations (GET /v1/reservations/{id}): a
 * background thread follows holdfast.ledger (read_committed, every partition)
 * into a RocksDB store of its own, one record per reservation — its latest
 * ledger event, with the allocations of the event that held them. The store
 * keeps how far it read per partition in the same atomic write as the records,
 * so a restarted front resumes there instead of replaying the ledger. The
 * ledger is written in the same transaction as the reply, so a reservation
 * whose reply a client has seen shows here within the reader's lag (a get
 * may wait up to wait_ms for it). */
#ifndef HF_HTTP_STATUS_H
#define HF_HTTP_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "hf_err.h"
#include "kafka.h"
#include "records.h"

typedef struct http_status http_status_t;

/* Opens (creating) the store in dir and starts following topic from where the
 * store left off. The row of a reservation that ended (committed, released,
 * expired, rejected, paid late) more than retention_ms ago is deleted by a
 * bounded sweep on the reader thread (the gateway's reservation_retention_ms:
 * it forgets the reservation then too). */
int http_status_new(const kafka_conf_t *kconf, const char *topic, const char *dir,
                    int64_t retention_ms, http_status_t **out, char *errstr,
                    size_t errstr_size) HF_MUST_CHECK;
void http_status_destroy(http_status_t *s); /* accepts NULL */

/* The latest ledger state of rid: HF_OK with *out, HF_ERR_NOTFOUND when the
 * ledger has no event for it (after waiting up to wait_ms for one). */
int http_status_get(http_status_t *s, const char *rid, int wait_ms,
                    hf_ledger_event_t *out) HF_MUST_CHECK;

/* ms since the reader was last at the end of every ledger partition; -1 before
 * it first got there. */
int64_t http_status_staleness_ms(const http_status_t *s);

#endif
