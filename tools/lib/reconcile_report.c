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

int reconcile_print(const reconcile_t *rc, bool snapshot_quiet, int attempts, bool quiescent,
                    const char *records_json, double seconds, FILE *out)
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
        quiescent, "elapsed_ms", (json_int_t)(seconds * 1000.0));
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return HF_ERR_NOMEM;
    fprintf(out, "%s\n", s);
    fflush(out);
    free(s);
    return HF_OK;
}
