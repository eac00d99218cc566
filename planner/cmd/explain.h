/* planner/cmd/explain.h — `roamc explain PLAN.json [MODEL]`: what is live at
 * the peak of any plan file (the plan's model found by plan_model.h). */
#ifndef ROAMC_CMD_EXPLAIN_H
#define ROAMC_CMD_EXPLAIN_H

/* `roamc explain PLAN.json [MODEL] [bindings] [--train ...] [--top N]
 * [--report json]`: argv[0] is "explain".  Prints what is live at the peak
 * step of the plan (planner_peak_live_text, or the JSON of --report json).
 * Returns the exit status: 0, 1 on a write error, 2 for bad usage or an
 * unreadable plan or model (message on stderr). */
int cmd_explain(int argc, char **argv);

#endif
