/* planner/report/files.h — every file one planning run writes, all or nothing. */
#ifndef ROAMC_REPORT_FILES_H
#define ROAMC_REPORT_FILES_H

#include <stddef.h>

#include "planner.h"

/* What one planning run writes: the plan p of the model at model_path
 * (the path the plan names), and the picture of n_svg plans with their
 * titles. */
typedef struct planner_files_request {
    const plan *p;
    const char *model_path;
    const plan *const *svg_plans;
    const char *const *titles;
    size_t n_svg;
} planner_files_request;

/* Writes files->plan, files->tree and files->buffers for r->p, files->step
 * (files->step_bytes) and files->svg with r's plans and titles, all or
 * nothing (planner_output_set).  Returns 0, or -1 with a message and no
 * file written. */
int planner_files_write(const planner_files *files, const planner_files_request *r, char *err,
                        size_t errlen);

#endif
