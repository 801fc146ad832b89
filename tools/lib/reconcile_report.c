/* The reconciler's verdict as one line of JSON: verdict, counts, the first
 * violations whole, every violation counted by kind. Built with jansson so
 * keys and details with any bytes stay valid JSON. */
#include <jansson.h>
#include <stdlib.h>

#include "reconcile_int.h"

static json_t *counts_json(const rc_counts_t *n)
{
    json_t *o = json_object();
#define C(field) json_object_set_new(o, #field, json_integer((json_int_t)n->field))
    C(pairs);
    C(stock_levels);
    C(counter_states);
    C(holds);
    C(holds_ok);
    C(holds_refused);
    C(holds_open);
    C(holds_committed);
    C(holds_released);
    C(holds_revoked);
    C(reservations);
    C(held);
    C(committed);
    C(released);
    C(expired);
    C(rejected);
    C(late_payments);
    C(late_rereserved);
    C(replies);
    C(reply_keys);
    C(feeds);
    C(feeds_applied);
    C(dead_letters);
    C(pairs_on_hand_exact);
    C(pairs_on_hand_bounded);
    C(pairs_feed_order_ambiguous);
    C(ledger_held_units);
    C(counter_reserved_units);
    C(open_units_without_reservation);
    C(reservations_out_of_step);
    C(expiries);
    C(gateway_expiry_lag_ms_max);
    C(gateway_expiry_lag_ms_p99);
    C(counter_expiry_releases);
    C(counter_expiry_lag_ms_max);
    C(counter_expiry_lag_ms_p99);
    C(ledger_sold_units);
    C(counter_committed_units);
    C(stock_fed_units_max);
    C(escrow_pairs);
    C(allotments);
    C(escrow_states);
    C(escrow_grants);
    C(escrow_granted_units);
    C(escrow_recalls);
    C(escrow_recalled_units);
    C(escrow_requests);
    C(escrow_returns);
    C(escrow_returned_units);
    C(escrow_sales);
    C(escrow_sold_units);
    C(escrow_sales_revoked);
    C(escrow_allotted_units);
    C(escrow_held_units);
#undef C
    return o;
}

static const char *scope_name(rc_scope_t s)
{
    return s == RC_SCOPE_RECORD ? "record" : s == RC_SCOPE_SNAPSHOT ? "snapshot" : "quiescent";
}

static json_t *violation_json(const rc_violation_t *v)
{
    json_t *o = json_pack("{s:s,s:i,s:s,s:s,s:s}", "kind", rc_kind_name(v->kind), "check",
                          rc_kind_check(v->kind), "scope", scope_name(rc_kind_scope(v->kind)),
                          "key", v->key, "detail", v->detail);
    if (o && v->offset >= 0) {
        json_object_set_new(o, "topic", json_string(v->topic));
        json_object_set_new(o, "partition", json_integer(v->partition));
        json_object_set_new(o, "offset", json_integer((json_int_t)v->offset));
    }
    return o;
}

static json_t *violations_json(const reconcile_t *rc, json_t **by_kind_out)
{
    const rc_violation_t *shown = NULL;
    size_t n = reconcile_violations_shown(rc, &shown);
    json_t *list = json_array(), *by_kind = json_object();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, violation_json(&shown[i]));
    for (int k = 0; k < RC_K__COUNT; k++)
        if (reconcile_violations_of(rc, (rc_kind_t)k))
            json_object_set_new(
                by_kind, rc_kind_name((rc_kind_t)k),
                json_integer((json_int_t)reconcile_violations_of(rc, (rc_kind_t)k)));
    *by_kind_out = by_kind;
    return list;
}

/* The replay's throughput, its shards and what the tables and the process
 * held at most: how long a million records take and what memory they need. */
static json_t *run_json(const reconcile_t *rc, const rc_run_t *run)
{
    rc_tables_t t;
    reconcile_tables_peak(rc, &t);
    double secs = run->seconds > 0 ? run->seconds : 0;
    double per_s = secs > 0 ? (double)run->records / secs : 0;
    double s_per_million = run->snapshot_records ? secs * 1e6 / (double)run->snapshot_records : 0;
    json_t *tables = json_object();
#define T(field) json_object_set_new(tables, #field, json_integer((json_int_t)t.field))
    T(pairs);
    T(holds);
    T(reservations);
    T(reply_keys);
    T(sales);
    T(allotments);
    T(dead_letters);
#undef T
    json_object_set_new(tables, "mib", json_real((double)t.bytes / 1048576.0));
    return json_pack("{s:I,s:I,s:f,s:f,s:f,s:i,s:i,s:o,s:I,s:f}", "records",
                     (json_int_t)run->records, "snapshot_records",
                     (json_int_t)run->snapshot_records, "seconds", secs, "records_per_s", per_s,
                     "seconds_per_million_records", s_per_million, "shards", (int)run->shards,
                     "passes", (int)run->passes, "tables_peak", tables, "peak_rss_mib",
                     (json_int_t)(run->peak_rss_kib / 1024), "spill_mib",
                     (double)run->spill_bytes_max / 1048576.0);
}

int reconcile_print_run(const reconcile_t *rc, bool snapshot_quiet, int attempts, bool quiescent,
                        const char *records_json, const rc_run_t *run, FILE *out)
{
    rc_counts_t n;
    reconcile_counts(rc, &n);
    json_t *counts = counts_json(&n);
    json_t *records = records_json ? json_loads(records_json, 0, NULL) : NULL;
    if (records)
        json_object_set_new(counts, "records", records);
    json_t *by_kind = NULL, *list = violations_json(rc, &by_kind);
    json_t *o = json_pack(
        "{s:s,s:o,s:o,s:I,s:o,s:{s:b,s:i},s:b,s:I}", "verdict",
        rc_verdict_name(reconcile_verdict(rc, snapshot_quiet)), "counts", counts, "violations",
        list, "violations_total", (json_int_t)reconcile_violations_total(rc), "violations_by_kind",
        by_kind, "snapshot", "quiet", snapshot_quiet, "attempts", attempts, "quiescent_enforced",
        quiescent, "elapsed_ms", (json_int_t)(run->seconds * 1000.0));
    if (o && run->passes > 0)
        json_object_set_new(o, "run", run_json(rc, run));
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (!s)
        return HF_ERR_NOMEM;
    fprintf(out, "%s\n", s);
    fflush(out);
    free(s);
    return HF_OK;
}

int reconcile_print(const reconcile_t *rc, bool snapshot_quiet, int attempts, bool quiescent,
                    const char *records_json, double seconds, FILE *out)
{
    rc_run_t run = {.seconds = seconds};
    return reconcile_print_run(rc, snapshot_quiet, attempts, quiescent, records_json, &run, out);
}
