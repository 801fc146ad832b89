/* Cheap record initialisation. hf_record_t is a union sized by its largest member
 * (a DeadLetter carries 16 KiB of original bytes), so `hf_record_t r = {...}`
 * clears all of it; on the hot path only the member in use is cleared. */
#include <stddef.h>
#include <string.h>

#include "records.h"

static const size_t body_sizes[HF_REC__COUNT] = {
#define HF_REC_SIZE(UP, Name, ctype, field) [HF_REC_##UP] = sizeof(ctype),
    HF_REC_MAP(HF_REC_SIZE)
#undef HF_REC_SIZE
};

hf_record_t *hf_record_reset(hf_record_t *r, hf_rec_type_t type)
{
    r->type = type;
    memset(&r->u, 0, body_sizes[type]);
    return r;
}
