/* --compare through the API (api_internal.h): the one code path of
 * `roamc MODEL --compare` and of roamc_plan_file with the option compare.
 * The engine is planner/cmd/compare.c (plan_compare_run); the result keeps
 * its rows, which the command prints and the accessors below hand out. */
#include "api_internal.h"

#include <stdlib.h>

roamc_status api_plan_compare(roamc_result *r) {
    char err[2048];
    r->mode = API_COMPARE;
    if (plan_compare_run(&r->step.g, &r->opt, &r->cmp, err, sizeof err))
        return api_fail(r, ROAMC_ERROR, "%s: %s", r->plan_model, err);
    r->have_cmp = true;
    r->main = &r->cmp.rows[r->cmp.n - 1].p;
    r->write_plan = true;
    return ROAMC_OK;
}

size_t roamc_result_compare_count(const roamc_result *r) {
    return r && r->have_cmp ? r->cmp.n : 0;
}

roamc_status roamc_result_compare_row(const roamc_result *r, size_t i, roamc_compare_row *row) {
    if (i >= roamc_result_compare_count(r) || !row) return ROAMC_BAD_INPUT;
    const plan_compare_row *w = &r->cmp.rows[i];
    *row = (roamc_compare_row){.name = w->m->name,
                               .title = w->m->title,
                               .order = planner_order_name(w->m->order),
                               .layout = planner_layout_name(w->m->layout),
                               .order_ran = plan_compare_order_ran(w),
                               .layout_ran = plan_compare_layout_ran(w),
                               .theoretical_peak = w->p.theoretical,
                               .actual_peak = w->actual,
                               .fragmentation_percent = plan_compare_fragmentation(&r->cmp, i),
                               .reduction_vs_pytorch_percent = plan_compare_vs_pytorch(&r->cmp, i),
                               .seconds = w->seconds,
                               .note = w->note};
    return ROAMC_OK;
}
