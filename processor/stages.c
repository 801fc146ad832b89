/* The stage registry: name -> definition. Adding a stage = one line here. */
#include "stages.h"

#include <string.h>

#include "counter/counter.h"
#include "relay/relay.h"

typedef struct {
    const char *name;
    const stage_def_t *(*def)(void);
} stage_entry_t;

static const stage_entry_t stage_entries[] = {
    {"counter", counter_stage},
    {"relay", relay_stage}, /* benchmark baseline */
};

const stage_def_t *stages_find(const char *name)
{
    for (size_t i = 0; i < sizeof stage_entries / sizeof stage_entries[0]; i++)
        if (strcmp(stage_entries[i].name, name) == 0)
            return stage_entries[i].def();
    return NULL;
}

const char *stages_names(void) { return "counter, relay"; }
