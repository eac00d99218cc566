/* planner/cmd/files.h — every file one planning run writes, all or nothing. */
#ifndef ROAMC_CMD_FILES_H
#define ROAMC_CMD_FILES_H

#include <stddef.h>

#include "planner.h"

/* Writes files->plan, files->tree and files->buffers for p and files->svg with the n_svg
 * plans and titles, all or nothing (planner_output_set).  Returns 0, or -1
 * with a message and no file written. */
int planner_files_write(const planner_files *files, const plan *p, const char *model_path,
                        const plan *const *svg_plans, const char *const *titles, size_t n_svg,
                        char *err, size_t errlen);

#endif
