/* The stage registry: name -> definition. Adding a stage = one line here. */
#include "stages.h"

#include <stdio.h>
#include <string.h>

#include "aggregator/aggregator.h"
#include "counter/counter.h"
#include "gateway/gateway.h"
#include "relay/relay.h"

typedef struct {
    const char *name;
    const stage_def_t *(*def)(void);
} stage_entry_t;

/* Also the order in which a process builds its stages' environments: those
 * whose init only reads settings and files first, the gateway (it starts the
 * routing view and waits for it) after them, so every setting is checked
 * before anything waits for a broker. */
static const stage_entry_t stage_entries[] = {
    {"counter", counter_stage},
    {"aggregator", aggregator_stage},
    {"gateway", gateway_stage},
    {"relay", relay_stage}, /* benchmark baseline */
};

const stage_def_t *stages_find(const char *name)
{
    for (size_t i = 0; i < sizeof stage_entries / sizeof stage_entries[0]; i++)
        if (strcmp(stage_entries[i].name, name) == 0)
            return stage_entries[i].def();
    return NULL;
}

const stage_def_t *stages_at(size_t i)
{
    return i < sizeof stage_entries / sizeof stage_entries[0] ? stage_entries[i].def() : NULL;
}

const char *stages_names(void)
{
    static char names[128];
    if (!names[0])
        for (size_t i = 0; i < sizeof stage_entries / sizeof stage_entries[0]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     stage_entries[i].name);
    return names;
}

int stages_env_new(const stage_def_t *def, const hf_config_t *cfg, void **env_out, char *errstr,
                   size_t errstr_size)
{
    *env_out = NULL;
    if (!def->init)
        return HF_OK;
    char why[512] = "";
    int err = def->init(cfg, env_out, why, sizeof why);
    if (err)
        snprintf(errstr, errstr_size, "%s: %s", def->name, why[0] ? why : hf_err_str(err));
    return err;
}

void stages_env_destroy(const stage_def_t *def, void *env)
{
    if (env && def->destroy)
        def->destroy(env);
}
