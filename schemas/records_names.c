/* Wire names of holdfast's enums and record types (declared in records.h). The
 * symbol tables here are the C side of the Avro enums: codec_init checks them
 * against every schema's symbols, so a drift between records.h and an .avsc file
 * stops the process at start instead of mislabelling records. */
#include <ctype.h>
#include <string.h>

#include "codec_internal.h"

/* Defined unsized: their declarations in codec_internal.h carry the records.h
 * counts, so a symbol added on one side only is a compile error. */
const char *const hf_outcome_symbols[] = {
    "OK", "INSUFFICIENT", "EXISTS", "CONFLICT", "EXPIRED", "NOT_FOUND", "INVALID", "REVOKED",
};
const char *const hf_cmd_symbols[] = {"HOLD", "COMMIT", "RELEASE", "SHORTFALL"};
const char *const hf_feed_kind_symbols[] = {"RECEIVE", "ADJUST", "COUNT", "SAFETY_STOCK",
                                            "COUNT_AS_OF"};
const char *const hf_hold_status_symbols[] = {"HELD", "COMMITTED", "RELEASED", "REVOKING",
                                              "REFUSED"};
const char *const hf_reply_outcome_symbols[] = {
    "HELD",     "COMMITTED", "RELEASED", "EXPIRED", "REJECTED_INSUFFICIENT", "REJECTED_INVALID",
    "CONFLICT", "NOT_FOUND", "BUSY",
};
const char *const hf_ledger_kind_symbols[] = {
    "HELD", "COMMITTED", "RELEASED", "EXPIRED", "REJECTED", "LATE_PAYMENT",
};
const char *const hf_signal_kind_symbols[] = {"SOLD_OUT", "BACK_IN_STOCK"};
const char *const hf_res_status_symbols[] = {"PENDING",  "HELD",    "COMMITTED",
                                             "RELEASED", "EXPIRED", "REJECTED"};
const char *const hf_hold_ref_status_symbols[] = {"HOLD_SENT", "HELD", "REFUSED", "RELEASE_SENT"};
const char *const hf_rebook_symbols[] = {"NONE", "PENDING", "COMMITTED", "REFUNDED"};
const char *const hf_payment_event_kind_symbols[] = {"UNKNOWN",   "PROCESSING", "REQUIRES_ACTION",
                                                     "SUCCEEDED", "FAILED",     "CANCELED"};

static const char *const rec_type_names[HF_REC__COUNT] = {
#define HF_REC_NAME(UP, Name, type, field) [HF_REC_##UP] = #Name,
    HF_REC_MAP(HF_REC_NAME)
#undef HF_REC_NAME
};

/* Out-of-range values come from corrupt memory or a newer peer; a name is still
 * printed so logs stay readable. */
static const char *symbol_or_unknown(const char *const *symbols, size_t count, int v)
{
    if (v < 0 || (size_t)v >= count)
        return "UNKNOWN";
    return symbols[v];
}

#define HF_SYMBOLS_COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *hf_outcome_name(hf_outcome_t v)
{
    return symbol_or_unknown(hf_outcome_symbols, HF_SYMBOLS_COUNT(hf_outcome_symbols), (int)v);
}

const char *hf_cmd_name(hf_cmd_t v)
{
    return symbol_or_unknown(hf_cmd_symbols, HF_SYMBOLS_COUNT(hf_cmd_symbols), (int)v);
}

const char *hf_feed_kind_name(hf_feed_kind_t v)
{
    return symbol_or_unknown(hf_feed_kind_symbols, HF_SYMBOLS_COUNT(hf_feed_kind_symbols), (int)v);
}

const char *hf_hold_status_name(hf_hold_status_t v)
{
    return symbol_or_unknown(hf_hold_status_symbols, HF_SYMBOLS_COUNT(hf_hold_status_symbols),
                             (int)v);
}

const char *hf_reply_outcome_name(hf_reply_outcome_t v)
{
    return symbol_or_unknown(hf_reply_outcome_symbols, HF_SYMBOLS_COUNT(hf_reply_outcome_symbols),
                             (int)v);
}

const char *hf_ledger_kind_name(hf_ledger_kind_t v)
{
    return symbol_or_unknown(hf_ledger_kind_symbols, HF_SYMBOLS_COUNT(hf_ledger_kind_symbols),
                             (int)v);
}

const char *hf_signal_kind_name(hf_signal_kind_t v)
{
    return symbol_or_unknown(hf_signal_kind_symbols, HF_SYMBOLS_COUNT(hf_signal_kind_symbols),
                             (int)v);
}

const char *hf_res_status_name(hf_res_status_t v)
{
    return symbol_or_unknown(hf_res_status_symbols, HF_SYMBOLS_COUNT(hf_res_status_symbols),
                             (int)v);
}

const char *hf_hold_ref_status_name(hf_hold_ref_status_t v)
{
    return symbol_or_unknown(hf_hold_ref_status_symbols,
                             HF_SYMBOLS_COUNT(hf_hold_ref_status_symbols), (int)v);
}

const char *hf_rebook_name(hf_rebook_t v)
{
    return symbol_or_unknown(hf_rebook_symbols, HF_SYMBOLS_COUNT(hf_rebook_symbols), (int)v);
}

const char *hf_payment_event_kind_name(hf_payment_event_kind_t v)
{
    return symbol_or_unknown(hf_payment_event_kind_symbols,
                             HF_SYMBOLS_COUNT(hf_payment_event_kind_symbols), (int)v);
}

/* name is sym in lower case ("requires_action" for "REQUIRES_ACTION"). */
static bool is_lower_of(const char *name, const char *sym)
{
    size_t i = 0;
    while (sym[i] && name[i] == (char)tolower((unsigned char)sym[i]))
        i++;
    return !sym[i] && !name[i];
}

/* The webhook's event types are the symbols in lower case after "payment."
 * (a provider's own names, such as Stripe's payment_intent.*, are mapped by
 * the adapter that signs the webhook). */
hf_payment_event_kind_t hf_payment_event_kind_parse(const char *s)
{
    static const char prefix[] = "payment.";
    bool dotted = strncmp(s, prefix, sizeof prefix - 1) == 0;
    for (int k = HF_PAY_UNKNOWN + 1; k < HF_PAY__COUNT; k++) {
        const char *sym = hf_payment_event_kind_symbols[k];
        if (dotted ? is_lower_of(s + sizeof prefix - 1, sym) : strcmp(s, sym) == 0)
            return (hf_payment_event_kind_t)k;
    }
    return HF_PAY_UNKNOWN;
}

const char *hf_rec_type_name(hf_rec_type_t t)
{
    return symbol_or_unknown(rec_type_names, HF_REC__COUNT, (int)t);
}
