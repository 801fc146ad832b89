/* Assertions that stay on in release builds (like Redis serverAssert): an
 * invariant that fails means state is wrong, and continuing could oversell. */
#ifndef HF_ASSERT_H
#define HF_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#define hf_assert(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr,                                                                        \
                    "{\"level\":\"fatal\",\"msg\":\"assertion failed\","                           \
                    "\"cond\":\"%s\",\"file\":\"%s\",\"line\":%d}\n",                              \
                    #cond, __FILE__, __LINE__);                                                    \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
