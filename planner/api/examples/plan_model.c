/* plan_model MODEL.onnx [PLAN.json] [NAME=VALUE ...]: plan a model with
 * libroamc (the options are roamc's long options without the dashes:
 * order=lescea, budget=16GiB, dim=batch=8, ...), print the peaks and the
 * first buffers, and write the plan file.  Exit status: the roamc_status. */
#include <stdio.h>
#include <string.h>

#include <roamc.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: plan_model MODEL.onnx [PLAN.json] [NAME=VALUE ...]\n");
        return 2;
    }
    roamc_options *o = roamc_options_new();
    int first_opt = argc > 2 && !strchr(argv[2], '=') ? 3 : 2;
    for (int i = first_opt; i < argc; i++) {
        char name[64];
        const char *eq = strchr(argv[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - argv[i]), argv[i]);
        if (roamc_options_set(o, name, eq + 1) != ROAMC_OK) {
            fprintf(stderr, "plan_model: %s\n", roamc_options_error(o));
            roamc_options_free(o);
            return 2;
        }
    }
    roamc_result *r = NULL;
    roamc_status st = roamc_plan_file(o, argv[1], &r);
    roamc_options_free(o);
    if (st != ROAMC_OK && st != ROAMC_NO_FIT) {
        fprintf(stderr, "plan_model: %s\n", roamc_result_error(r));
        roamc_result_free(r);
        return (int)st;
    }
    size_t n_ops, n_bufs;
    roamc_result_schedule(r, &n_ops);
    const uint64_t *off = roamc_result_offsets(r, &n_bufs);
    const uint64_t *size = roamc_result_sizes(r, NULL);
    const int32_t *start = roamc_result_starts(r, NULL), *end = roamc_result_ends(r, NULL);
    printf("%s: %zu operators, %zu buffers\n", argv[1], n_ops, n_bufs);
    printf("theoretical peak %llu B, actual peak %llu B, lower bound %llu B\n",
           (unsigned long long)roamc_result_theoretical_peak(r),
           (unsigned long long)roamc_result_actual_peak(r),
           (unsigned long long)roamc_result_lower_bound(r));
    for (size_t i = 0; i < n_bufs && i < 5; i++)
        printf("  %-40s offset %12llu size %10llu steps [%d, %d]\n", roamc_result_buffer_name(r, i),
               (unsigned long long)off[i], (unsigned long long)size[i], start[i], end[i]);
    if (roamc_result_fits(r) >= 0)
        printf("fits the budget: %s\n", roamc_result_fits(r) ? "yes" : "no");
    if (first_opt == 3 && roamc_result_write(r, argv[2]) != ROAMC_OK) {
        fprintf(stderr, "plan_model: %s\n", roamc_result_error(r));
        st = ROAMC_ERROR;
    }
    roamc_result_free(r);
    return (int)st;
}
