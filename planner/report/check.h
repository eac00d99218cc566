/* planner/report/check.h — `roamc check`: validate a plan file against its model. */
#ifndef ROAMC_REPORT_CHECK_H
#define ROAMC_REPORT_CHECK_H

#include <stdio.h>

#include "frontend.h"

/* `roamc check MODEL PLAN [--input-shape ...] [--dim ...] [--train ...]`:
 * the checks of shared/tools/check_plan.py, with the model sized under the
 * bindings of fopt; train (NULL: not given) derives the step checked from
 * MODEL, for a plan made with --train.  With no bindings in fopt (NULL or
 * empty), those the plan records are used, and a plan of a training step
 * that a forward-only MODEL is not gets the step --train derives with its
 * defaults (plan_model.h, plan_model_load; a "note:" line says so).  Prints
 * "VALID ..." or up to 20 "INVALID: ..." lines to out and returns 0
 * (valid), 1 (invalid) or 2 (unreadable model or plan; message to err). */
int plan_check_file(const char *model_path, const fe_options *fopt, const fe_train_options *train,
                    const char *plan_path, FILE *out, FILE *err);

#endif
