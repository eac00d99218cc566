/* Every file of one planning run (-o, --svg, --dump-tree, --dump-buffers,
 * and with --fit the step itself),
 * written all or nothing through one planner_output_set. */
#include "files.h"
#include "svg.h"

int planner_files_write(const planner_files *files, const planner_files_request *r, char *err,
                        size_t errlen) {
    const plan *p = r->p;
    size_t n_svg = r->n_svg;
    planner_output_set set = {0};
    int i_plan = planner_outputs_add(&set, "-o", files->plan);
    int i_svg = planner_outputs_add(&set, "--svg", n_svg ? files->svg : NULL);
    int i_tree = planner_outputs_add(&set, "--dump-tree", files->tree);
    int i_bufs = planner_outputs_add(&set, "--dump-buffers", files->buffers);
    int i_step = planner_outputs_add(&set, "--emit-train", files->step);
    if (set.n == 0) return 0;
    if (planner_outputs_open(&set, err, errlen)) return -1;
    int rc = 0;
    char why[512] = "";
    if (i_plan >= 0 && plan_write_stream(p, r->model_path, set.slot[i_plan].f))
        rc = roamc_errorf(err, errlen, "-o %s: cannot write the plan: I/O error", files->plan);
    if (rc == 0 && i_tree >= 0 && plan_write_tree(p, set.slot[i_tree].f, why, sizeof why))
        rc = roamc_errorf(err, errlen, "--dump-tree %s: %s", files->tree, why);
    if (rc == 0 && i_bufs >= 0 && plan_write_buffers(p, set.slot[i_bufs].f))
        rc = roamc_errorf(err, errlen, "--dump-buffers %s: cannot write the buffers: I/O error",
                          files->buffers);
    if (rc == 0 && i_step >= 0 &&
        fwrite(files->step_bytes, 1, files->step_len, set.slot[i_step].f) != files->step_len)
        rc = roamc_errorf(err, errlen, "--emit-train %s: cannot write the step: I/O error",
                          files->step);
    if (rc == 0 && i_svg >= 0) plan_svg_stream(r->svg_plans, r->titles, n_svg, set.slot[i_svg].f);
    if (rc) {
        planner_outputs_commit(&set, 0, NULL, 0);
        return -1;
    }
    return planner_outputs_commit(&set, 1, err, errlen);
}
