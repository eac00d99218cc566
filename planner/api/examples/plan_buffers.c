/* plan_buffers: lay out a compiler's buffer list with libroamc, as an ML
 * compiler's memory planner would: intervals of steps, mixed alignments,
 * one input buffer the runtime has placed already (pinned at offset 0), a
 * workspace that only conflicts with two others (a conflict edge), and a
 * capacity.  Prints each offset, the arena's height, the lower bound and
 * why the solver stopped.  Exit 0 when the layout is valid. */
#include <stdio.h>

#include <roamc.h>

int main(void) {
    /* size, alignment, first step, last step (closed) */
    static const struct {
        const char *name;
        unsigned long long size, align;
        long first, last;
    } bufs[] = {{"input", 150528, 64, 0, 1},     {"conv1", 802816, 256, 1, 2},
                {"relu1", 802816, 256, 2, 3},    {"pool1", 200704, 128, 3, 4},
                {"fc_w", 4096, 16, 0, 5},        {"logits", 4000, 4, 4, 5},
                {"scratch", 65536, 4096, -1, -1}};
    size_t n = sizeof bufs / sizeof bufs[0];
    roamc_layout *l = roamc_layout_new();
    for (size_t i = 0; i < n; i++) {
        roamc_status st = bufs[i].first < 0
                              ? roamc_layout_add_buffer(l, bufs[i].size, bufs[i].align, NULL)
                              : roamc_layout_add_interval(l, bufs[i].size, bufs[i].align,
                                                          bufs[i].first, bufs[i].last, NULL);
        if (st != ROAMC_OK) {
            fprintf(stderr, "plan_buffers: %s\n", roamc_layout_error(l));
            return 1;
        }
    }
    roamc_layout_pin(l, 0, 0);          /* the input is where the runtime put it */
    roamc_layout_add_conflict(l, 6, 1); /* scratch is used by conv1 and relu1 */
    roamc_layout_add_conflict(l, 6, 2);
    roamc_layout_set(l, "capacity", "4MiB");
    roamc_layout_set(l, "work", "1000000"); /* the same answer on every machine */
    roamc_status st = roamc_layout_solve(l);
    if (st != ROAMC_OK) {
        fprintf(stderr, "plan_buffers: %s: %s\n", roamc_status_name(st), roamc_layout_error(l));
        roamc_layout_free(l);
        return 1;
    }
    size_t no;
    const uint64_t *off = roamc_layout_offsets(l, &no);
    int ok = 1;
    for (size_t i = 0; i < no; i++) {
        printf("%-8s offset %8llu size %8llu\n", bufs[i].name, (unsigned long long)off[i],
               bufs[i].size);
        ok &= off[i] % bufs[i].align == 0;
    }
    ok &= off[0] == 0;
    static const char *const why[] = {"optimal",    "feasible",   "infeasible",
                                      "work limit", "time limit", "heuristic"};
    printf("height %llu bytes, lower bound %llu, gap %.2f%%, stopped: %s (libroamc %s)\n",
           (unsigned long long)roamc_layout_height(l),
           (unsigned long long)roamc_layout_proven_bound(l), 100.0 * roamc_layout_gap(l),
           why[roamc_layout_stop_reason(l)], roamc_version());
    roamc_layout_free(l);
    return ok ? 0 : 1;
}
