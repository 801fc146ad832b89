/* The registry of stages a holdfast process can run, by name, and the building
 * of a stage's environment at start. */
#ifndef HF_STAGES_H
#define HF_STAGES_H

#include "config.h"
#include "stage.h"

/* NULL when no stage has that name. */
const stage_def_t *stages_find(const char *name);
/* The i-th stage of the registry, NULL past the end: the order in which a
 * process builds its stages' environments (those that only read settings and
 * files first, any that wait for a broker last). */
const stage_def_t *stages_at(size_t i);
/* "counter" ... for messages. */
const char *stages_names(void);
/* Builds def's environment with its init (*env_out NULL for a stage without
 * one); errstr starts with the stage's name. Called before any task starts. */
int stages_env_new(const stage_def_t *def, const hf_config_t *cfg, void **env_out, char *errstr,
                   size_t errstr_size) HF_MUST_CHECK;
/* Frees what stages_env_new built; accepts NULL env. */
void stages_env_destroy(const stage_def_t *def, void *env);

#endif
