/* planner/cmd/layout_cmd.h — `roamc layout`: the layout engine on a buffer list. */
#ifndef ROAMC_CMD_LAYOUT_H
#define ROAMC_CMD_LAYOUT_H

/* `roamc layout BUFFERS.csv [-o OUT.csv] [--capacity B] [--time-limit S]
 * [--align B] [--method roam|llfb|greedy|bestfit|pytorch]` (layout_cmd.c):
 * the layout engine alone on a buffer-list CSV.  argv[0] is "layout".
 * Prints the height, the live-size lower bound, the fragmentation and the
 * time.  Returns the exit status: 0 success; 1 I/O or internal error; 2 bad
 * usage or bad input (message on stderr, no output file); 3 --capacity given
 * and no layout fits it (proved by the lower bound, or none found in time;
 * no output file). */
int cmd_layout(int argc, char **argv);

#endif
