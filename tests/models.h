/* The small models the test suite builds for itself (tests/models.c).  Each
 * is a training-graph shape worth planning: branches, residuals, views,
 * in-place writes, multi-output nodes, and a whole forward+backward+SGD step. */
#ifndef ROAMC_TEST_MODELS_H
#define ROAMC_TEST_MODELS_H

#include "testgraph.h"

typedef struct test_model {
    const char *name;
    tg *(*build)(void);
} test_model;

/* Valid models, NULL-terminated. */
extern const test_model test_models_valid[];

/* The valid model called name, built (the caller frees it with tg_free);
 * NULL when no valid model has that name. */
tg *test_model_build(const char *name);

/* Models that roamc must reject, each with a fragment its message must hold. */
typedef struct test_bad_model {
    const char *name;
    tg *(*build)(void);
    const char *message;
} test_bad_model;

extern const test_bad_model test_models_bad[];

#endif
