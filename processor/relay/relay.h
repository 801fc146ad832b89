/* The relay stage: a stateless, exactly-once pass-through from
 * holdfast.counter-commands to holdfast.bench-relay. It runs the same task loop
 * and codec as the counter but keeps no state, so benchmarking it next to the
 * counter on the same input shows what state and rules cost. */
#ifndef HF_RELAY_H
#define HF_RELAY_H

#include "stage.h"

const stage_def_t *relay_stage(void);

#endif
