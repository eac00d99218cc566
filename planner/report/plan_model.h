/* planner/report/plan_model.h — reading a plan file: the JSON object, its
 * string members, and the model it was made for, found and sized as the
 * plan records (roamc check and roamc explain both need it). */
#ifndef ROAMC_PLAN_MODEL_H
#define ROAMC_PLAN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "planner.h"

struct json_t;

/* Reads a plan file: a JSON object.  Returns it (the caller owns the
 * reference), or NULL with "PATH: why" in err. */
struct json_t *plan_json_read(const char *plan_path, char *err, size_t errlen);
/* The string member key of o, or NULL. */
const char *plan_json_str(struct json_t *o, const char *key);

/* The model a plan was made for, sized as the plan was. */
typedef struct plan_model_request {
    const char *plan_path;
    struct json_t *plan;
    const char *model_path; /* as given, or NULL: the plan's "model" */
    /* the user's --input-shape/--dim; NULL or empty: those the plan records
     * (its "shapes" member: every input symbol's value) */
    const fe_options *bindings;
    /* --train and its options as given, or NULL: when the plan is of a
     * training step and the model a forward-only graph whose SHA-256 is not
     * the plan's, the step --train derives with its defaults */
    const fe_train_options *train;
    uint64_t align; /* graph_build's */
} plan_model_request;

/* Where plan_model_load found the model: path gets its path as loaded,
 * note a line on what was assumed ("" when nothing: bindings taken from the
 * plan, the step derived with --train); both len bytes, the caller's. */
typedef struct plan_model_found {
    char *path, *note;
    size_t len;
} plan_model_found;

/* Loads the model of r (planner_step_load) and says where into *found.
 * Returns 0 (free step with planner_step_free), or -1 with a message naming
 * the file and what to give. */
int plan_model_load(const plan_model_request *r, planner_step *step, const plan_model_found *found,
                    char *err, size_t errlen);

#endif
