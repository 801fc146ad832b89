/* The registry of stages a holdfast process can run, by name. */
#ifndef HF_STAGES_H
#define HF_STAGES_H

#include "stage.h"

/* NULL when no stage has that name. */
const stage_def_t *stages_find(const char *name);
/* "counter" ... for messages. */
const char *stages_names(void);

#endif
