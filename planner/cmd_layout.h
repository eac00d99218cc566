/* planner/cmd_layout — `roamc layout`: solve one buffer-list CSV.
 *
 *   roamc layout BUFFERS.csv [-o OUT.csv] [--capacity B] [--time-limit S]
 *                [--align B] [--method roam|llfb|greedy|bestfit|pytorch]
 *
 * argv[0] is "layout".  Prints the height, the live-size lower bound, the
 * fragmentation and the time.  Exit status: 0 success; 1 I/O or memory
 * error; 2 bad usage or bad input (message on stderr, no output file);
 * 3 --capacity given and no layout fits it (proved by the lower bound, or
 * none found in time; no output file). */
#ifndef ROAMC_CMD_LAYOUT_H
#define ROAMC_CMD_LAYOUT_H

int cmd_layout(int argc, char **argv);

#endif
