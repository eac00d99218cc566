/* The one table of step changers (planner/changer.h): the library plans
 * every change through it (api_plan.c).  A new changer is a row here and
 * the file that implements it. */
#include "api_internal.h"

#include <string.h>

/* The setup q gives a changer into c, or NULL when q does not ask for it. */
typedef const void *api_asked_fn(const api_request *q, api_change *c);

static const void *api_asked_fit(const api_request *q, api_change *c) {
    if (!q->fit) return NULL;
    c->fit = (fit_setup){.mode = q->fit,
                         .max_overhead = q->max_overhead,
                         .device = q->device,
                         .arena_budget = q->budget.budget - q->budget.reserve,
                         .budget_text = q->budget.budget_text};
    return &c->fit;
}

static const void *api_asked_shard(const api_request *q, api_change *c) {
    (void)c;
    return q->shard && q->shard->kind ? q->shard : NULL;
}

static const void *api_asked_pipeline(const api_request *q, api_change *c) {
    (void)c;
    return q->pipeline;
}

/* In the order a request asking for several is served (the option checks
 * refuse most pairs before). */
static const struct {
    const planner_changer *changer;
    api_asked_fn *asked;
} api_changers[] = {
    {&fit_changer, api_asked_fit},
    {&shard_changer, api_asked_shard},
    {&pipe_changer, api_asked_pipeline},
};

void api_change_of(const api_request *q, api_change *c) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sizeof api_changers / sizeof *api_changers; i++) {
        const void *setup = api_changers[i].asked(q, c);
        if (!setup) continue;
        c->changer = api_changers[i].changer;
        c->setup = setup;
        return;
    }
}

const planner_changer *api_changer_find(const char *name) {
    for (size_t i = 0; i < sizeof api_changers / sizeof *api_changers; i++)
        if (strcmp(api_changers[i].changer->name, name) == 0) return api_changers[i].changer;
    return NULL;
}
