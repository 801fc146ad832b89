/* Topic names with the deployment prefix applied once at start-up. */
#include "topics.h"

#include <stdio.h>
#include <string.h>

#include "hf_assert.h"

static const char *const base_names[HF_T__COUNT] = {
#define HF_TOPIC_NAME(id, name) name,
    HF_TOPIC_MAP(HF_TOPIC_NAME)
#undef HF_TOPIC_NAME
};

static char prefix_buf[HF_TOPIC_PREFIX_MAX + 1];
static char full_names[HF_T__COUNT][HF_TOPIC_PREFIX_MAX + 64];
static int names_ready;

void topics_set_prefix(const char *prefix)
{
    hf_assert(strlen(prefix) <= HF_TOPIC_PREFIX_MAX);
    snprintf(prefix_buf, sizeof prefix_buf, "%s", prefix);
    for (int i = 0; i < HF_T__COUNT; i++)
        snprintf(full_names[i], sizeof full_names[i], "%s%s", prefix_buf, base_names[i]);
    names_ready = 1;
}

const char *topics_prefix(void)
{
    return prefix_buf;
}

const char *topic_name(hf_topic_id_t id)
{
    hf_assert(id >= 0 && id < HF_T__COUNT);
    if (!names_ready)
        topics_set_prefix("");
    return full_names[id];
}

const char *topic_base_name(hf_topic_id_t id)
{
    hf_assert(id >= 0 && id < HF_T__COUNT);
    return base_names[id];
}

int topic_id_of_base(const char *base_name)
{
    for (int i = 0; i < HF_T__COUNT; i++)
        if (strcmp(base_names[i], base_name) == 0)
            return i;
    return -1;
}
