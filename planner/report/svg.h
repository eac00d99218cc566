/* planner/report/svg.h — the picture of one or more plans (--svg). */
#ifndef ROAMC_REPORT_SVG_H
#define ROAMC_REPORT_SVG_H

#include <stdio.h>

#include "planner.h"

/* Draws n plans of the same graph one above the other on one scale (time
 * across, address up, one rectangle per storage, persistent storages shaded
 * apart, the actual peak marked, the live-bytes curve under each) into f
 * (write errors show at the stream's close).  Storages below a pixel are
 * merged, so the file stays small for 10,000+ storages. */
void plan_svg_stream(const plan *const *plans, const char *const *titles, size_t n, FILE *f);

#endif
