/* --max-batch through the API (api_internal.h): the one code path of
 * `roamc MODEL --max-batch --budget B` and of roamc_plan_file with the
 * option max-batch; and the result's answers that are not a plan: the
 * batch found, each pipeline stage's peaks, the rows of --compare. */
#include "api_internal.h"

#include <stdlib.h>

roamc_status api_max_batch(const api_batch_run *b, roamc_result *r) {
    char err[2048];
    api_batch_run run = *b;
    run.q.found = r->batch;
    free(r->model_path);
    r->model_path = xstrdup(b->q.model_path);
    r->budget = *b->q.budget;
    int rc = planner_max_batch(&run.q, run.report, err, sizeof err);
    if (rc != 0 && rc != PLANNER_EXIT_NO_FIT)
        return api_fail(r, rc == 2 ? ROAMC_BAD_INPUT : ROAMC_ERROR, "%s", err);
    r->have_batch = true;
    r->fits = rc == 0;
    if (rc == PLANNER_EXIT_NO_FIT)
        return api_fail(r, ROAMC_NO_FIT, "%s: not even batch 1 fits the budget %s", b->q.model_path,
                        b->q.budget->budget_text);
    return ROAMC_OK;
}

int64_t roamc_result_max_batch(const roamc_result *r, int64_t *pytorch) {
    if (pytorch) *pytorch = r && r->have_batch ? r->batch[1] : -1;
    return r && r->have_batch ? r->batch[0] : -1;
}

size_t roamc_result_stage_count(const roamc_result *r) {
    bool pipeline = r && r->mode == API_CHANGED && r->changer == api_changer_find("pipeline");
    return pipeline && r->main ? r->view.n_steps : 0;
}

roamc_status roamc_result_stage_peak(const roamc_result *r, size_t i, uint64_t *theoretical,
                                     uint64_t *actual) {
    if (i >= roamc_result_stage_count(r)) return ROAMC_BAD_INPUT;
    const plan *p = r->changer->step_plan(r->changed, i);
    if (theoretical) *theoretical = p->theoretical;
    if (actual) *actual = p->actual;
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
