/* layout_cmd.c — `roamc layout`: the layout engine alone, on a buffer-list
 * CSV (shared/DESIGN.md).  See cmd_layout.h for the interface. */
#include "layout_cmd.h"
#include "planner.h"

#include "budget.h"

#include "layout.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The exit statuses of `roamc layout` (its --help and planner.h). */
typedef enum cl_exit {
    CL_EXIT_OK = 0,
    CL_EXIT_ERROR = 1,   /* roamc failed (an invalid layout, a write error) */
    CL_EXIT_USAGE = 2,   /* bad command line or input file */
    CL_EXIT_CAPACITY = 3 /* no layout within --capacity (found or proved) */
} cl_exit;

typedef struct cl_options {
    const char *input;
    const char *output; /* NULL: report only */
    uint64_t capacity;  /* 0: none */
    int has_capacity;
    double time_limit; /* seconds, for the roam method */
    uint64_t align;
    const char *method;
    uint64_t work;          /* roam: work budget of the exact search, 0: time only */
    int engines;            /* roam: LAYOUT_ENGINE_* (dev), 0: both */
    layout_bnb_rules rules; /* roam: pruning rules (dev flags --no-RULE) */
} cl_options;

/* The dev flags --no-RULE: each turns one pruning rule of the branch and
 * bound off, to measure what it is worth (the answer stays exact). */
static int *cl_rule(layout_bnb_rules *r, const char *name) {
    static const char *const names[] = {"canonical", "dominance", "section", "monotonic", "tight",
                                        "floor",     "fit",       "twins",   "decompose", "mirror",
                                        "hatless",   "reorder",   "energy"};
    int *fields[] = {&r->canonical, &r->dominance, &r->section, &r->monotonic, &r->tight,
                     &r->floor,     &r->fit,       &r->twins,   &r->decompose, &r->mirror,
                     &r->hatless,   &r->reorder,   &r->energy};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (strcmp(name, names[k]) == 0) return fields[k];
    return NULL;
}

static void cl_usage(FILE *f) {
    fprintf(
        f,
        "usage: roamc layout BUFFERS.csv [-o OUT.csv] [--capacity SIZE] [--time-limit SECONDS]\n"
        "                    [--align BYTES] [--method roam|llfb|greedy|bestfit|pytorch]\n"
        "  BUFFERS.csv: header id,lower,upper,size (or buffer,start,end,size), lifetimes [lower, "
        "upper)\n"
        "  -o OUT.csv: the input columns plus offset (written only on success)\n"
        "  --capacity: exit 3 unless the layout fits in SIZE (bytes, or 250MiB, 16G, 80GB:\n"
        "            K/M/G/T and KiB/MiB/GiB/TiB powers of 1024, kB/MB/GB/TB of 1000)\n"
        "  --time-limit: seconds for the whole command, reading and writing included (above 0,\n"
        "            at most 1000000; default 10); the exact steps of roam stop on a work budget\n"
        "            and use it as a backstop, and the report says when it cut them; shorter than\n"
        "            the heuristics need, the bestfit layout is given and the report says so\n"
        "  --align: offsets are multiples of BYTES, a power of two from 1 to 2^30, sizes are\n"
        "            rounded up to it (default 1)\n"
        "  --method: roam (default: best heuristic, then exact search and ILP), a heuristic,\n"
        "            or pytorch (replay of the CUDA caching allocator; ignores --align)\n"
        "  roam: with --capacity, a layout within it or a proof that none exists (exit 3);\n"
        "            without, the least height (the report gives the proven lower bound, the gap,\n"
        "            and 'optimal' or 'stopped by time'); unproven, the search uses --time-limit\n"
        "            to the end\n"
        "  --work UNITS: stop the exact search on a work budget instead (10^7 ~ 1 s; the\n"
        "            answer is then the same on every run and machine)\n"
        "  dev: --engine skyline|bnb|sweep|both, --no-RULE (canonical dominance section monotonic\n"
        "            tight floor fit twins decompose reorder mirror hatless) to measure each\n"
        "            pruning rule; --with-energy turns on the energy rule (off by default)\n");
}

static int cl_parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-' || *s == '+') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

/* Takes the value of option argv[*i]: "--name=value" or "--name value". */
static const char *cl_value(int argc, char **argv, int *i, const char *name) {
    size_t len = strlen(name);
    if (argv[*i][len] == '=') return argv[*i] + len + 1;
    if (*i + 1 < argc) return argv[++*i];
    return NULL;
}

static int cl_is_option(const char *arg, const char *name) {
    size_t len = strlen(name);
    return strncmp(arg, name, len) == 0 && (arg[len] == '\0' || arg[len] == '=');
}

/* What the command line asks for (cl_parse), or how one option of it was
 * taken (cl_parse_value, cl_parse_choice). */
typedef enum cl_parsed {
    CL_RUN,      /* options valid: run */
    CL_HELP,     /* --help printed: exit 0 */
    CL_USAGE,    /* bad usage, reported: exit CL_EXIT_USAGE */
    CL_NOT_MINE, /* not an option of that parser */
} cl_parsed;

/* The options with a number: --capacity, --time-limit, --align, --work. */
static cl_parsed cl_parse_value(int argc, char **argv, int *i, cl_options *o) {
    const char *a = argv[*i], *v;
    if (cl_is_option(a, "--capacity")) {
        v = cl_value(argc, argv, i, "--capacity");
        char err[256];
        /* a size as every size option takes it (250MiB, 16G); 0 and plain
         * counts up to 2^64 - 1 as before */
        if (cl_parse_u64(v, &o->capacity) != 0 &&
            (!v || planner_size_parse(v, &o->capacity, err, sizeof err) != 0)) {
            fprintf(stderr,
                    "roamc layout: --capacity wants a size (bytes, or with a unit: 250MiB, 16G, "
                    "80GB), not '%s'\nTry 'roamc layout --help'.\n",
                    v ? v : "");
            return CL_USAGE;
        }
        o->has_capacity = 1;
    } else if (cl_is_option(a, "--time-limit")) {
        v = cl_value(argc, argv, i, "--time-limit");
        char err[256];
        if (!v || planner_time_limit_parse(v, &o->time_limit, err, sizeof err) != 0) {
            fprintf(stderr, "roamc layout: %s\nTry 'roamc layout --help'.\n",
                    v ? err : "--time-limit needs a value");
            return CL_USAGE;
        }
    } else if (cl_is_option(a, "--align")) {
        v = cl_value(argc, argv, i, "--align");
        char err[256];
        if (!v || planner_size_parse(v, &o->align, err, sizeof err) != 0 ||
            o->align > ((uint64_t)1 << 30) || (o->align & (o->align - 1))) {
            fprintf(stderr,
                    "roamc layout: --align wants a power of two from 1 to 2^30 (1073741824) bytes, "
                    "not '%s'\nTry 'roamc layout --help'.\n",
                    v ? v : "");
            return CL_USAGE;
        }
    } else if (cl_is_option(a, "--work")) {
        v = cl_value(argc, argv, i, "--work");
        if (cl_parse_u64(v, &o->work) != 0 || o->work == 0) {
            fprintf(stderr, "roamc layout: --work needs a number of work units >= 1, got '%s'\n",
                    v ? v : "");
            return CL_USAGE;
        }
    } else {
        return CL_NOT_MINE;
    }
    return CL_RUN;
}

/* The options that choose: --engine, --method, --no-RULE, --with-RULE. */
static cl_parsed cl_parse_choice(int argc, char **argv, int *i, cl_options *o) {
    const char *a = argv[*i], *v;
    if (cl_is_option(a, "--engine")) {
        v = cl_value(argc, argv, i, "--engine");
        static const char *const names[] = {"skyline", "bnb", "both", "sweep"};
        static const int engines[] = {LAYOUT_ENGINE_SKYLINE, LAYOUT_ENGINE_BNB,
                                      LAYOUT_ENGINE_SKYLINE | LAYOUT_ENGINE_BNB,
                                      LAYOUT_ENGINE_SWEEP};
        o->engines = 0;
        for (size_t k = 0; v && k < sizeof names / sizeof names[0]; k++)
            if (strcmp(v, names[k]) == 0) o->engines = engines[k];
        if (!o->engines) {
            fprintf(stderr, "roamc layout: unknown --engine '%s' (skyline, bnb, sweep, both)\n",
                    v ? v : "");
            return CL_USAGE;
        }
    } else if (strncmp(a, "--no-", 5) == 0 && cl_rule(&o->rules, a + 5)) {
        *cl_rule(&o->rules, a + 5) = 0;
    } else if (strncmp(a, "--with-", 7) == 0 && cl_rule(&o->rules, a + 7)) {
        *cl_rule(&o->rules, a + 7) = 1; /* a rule that is off by default (energy) */
    } else if (cl_is_option(a, "--method")) {
        v = cl_value(argc, argv, i, "--method");
        static const char *const methods[] = {"roam", "llfb", "greedy", "bestfit", "pytorch"};
        o->method = NULL;
        for (size_t k = 0; v && k < sizeof methods / sizeof methods[0]; k++)
            if (strcmp(v, methods[k]) == 0) o->method = methods[k];
        if (!o->method) {
            fprintf(stderr,
                    "roamc layout: unknown --method '%s' (choose from roam, llfb, greedy, bestfit, "
                    "pytorch)\nTry 'roamc layout --help'.\n",
                    v ? v : "");
            return CL_USAGE;
        }
    } else {
        return CL_NOT_MINE;
    }
    return CL_RUN;
}

static cl_parsed cl_parse(int argc, char **argv, cl_options *o) {
    *o = (cl_options){NULL, NULL, 0, 0, 10.0, 1, "roam", 0, 0, {0}};
    layout_solve_opts defaults;
    layout_solve_defaults(&defaults);
    o->rules = defaults.rules;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        cl_parsed r;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cl_usage(stdout);
            return CL_HELP;
        } else if (cl_is_option(a, "-o") || cl_is_option(a, "--output")) {
            v = cl_value(argc, argv, &i, a[1] == 'o' ? "-o" : "--output");
            if (!v || !*v) {
                fprintf(stderr, "roamc layout: %s needs a file name\n", a);
                return CL_USAGE;
            }
            o->output = v;
        } else if ((r = cl_parse_value(argc, argv, &i, o)) != CL_NOT_MINE ||
                   (r = cl_parse_choice(argc, argv, &i, o)) != CL_NOT_MINE) {
            if (r != CL_RUN) return r;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "roamc layout: unknown option '%s'\nTry 'roamc layout --help'.\n", a);
            return CL_USAGE;
        } else if (!o->input) {
            o->input = a;
        } else {
            fprintf(stderr, "roamc layout: more than one input file ('%s', '%s')\n", o->input, a);
            return CL_USAGE;
        }
    }
    if (!o->input) {
        fprintf(stderr, "roamc layout: missing BUFFERS.csv\nTry 'roamc layout --help'.\n");
        return CL_USAGE;
    }
    return CL_RUN;
}

/* Writes the CSV to path all or nothing (planner_output_set). */
static int cl_write_atomic(const char *path, const layout_csv *csv, const uint64_t *offsets) {
    planner_output_set set = {0};
    char err[2048];
    planner_outputs_add(&set, "-o", path);
    if (planner_outputs_open(&set, err, sizeof err) != 0) {
        fprintf(stderr, "roamc layout: %s\n", err);
        return -1;
    }
    int ok = layout_csv_write(set.slot[0].f, csv, offsets) == 0;
    if (planner_outputs_commit(&set, ok, err, sizeof err) != 0) {
        if (!ok) snprintf(err, sizeof err, "-o %s: cannot write: I/O error", path);
        fprintf(stderr, "roamc layout: %s\n", err);
        return -1;
    }
    return 0;
}

/* The problem as the engine sees it: csv's buffers with sizes rounded up to
 * o->align into bufs[csv->n].  Returns CL_EXIT_OK, or CL_EXIT_USAGE (reported)
 * when a size or their sum overflows 64 bits. */
static cl_exit cl_problem(const cl_options *o, const layout_csv *csv, layout_buffer *bufs) {
    size_t n = csv->n;
    for (size_t i = 0; i < n; i++) {
        bufs[i] = csv->bufs[i];
        uint64_t s = bufs[i].size;
        if (s % o->align != 0 && s > UINT64_MAX - o->align) {
            fprintf(stderr,
                    "roamc layout: %s: size of '%s' overflows when rounded up to %" PRIu64 "\n",
                    o->input, csv->ids[i], o->align);
            return CL_EXIT_USAGE;
        }
        bufs[i].size = (s + o->align - 1) / o->align * o->align;
    }
    /* All offsets and heights stay below the sum of the sizes: it must fit. */
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].size > UINT64_MAX - sum) {
            fprintf(stderr, "roamc layout: %s: the sizes add up to more than 2^64 bytes\n",
                    o->input);
            return CL_EXIT_USAGE;
        }
        sum += bufs[i].size;
    }
    return CL_EXIT_OK;
}

/* What a method gave, for the report. */
typedef struct cl_run {
    uint64_t height;
    const char *detail; /* roam: how the exact steps did against the heuristic */
    const char *winner; /* roam: the best heuristic and its height */
    uint64_t h0;
    int proven;
    int timed_out;  /* the time backstop cut the exact steps */
    int too_short;  /* the time was up before the heuristics: bestfit */
    int have_solve; /* roam: sr holds the exact search's result */
    layout_solve_result sr;
    layout_pytorch_stats pt;
} cl_run;

/* The roam method: best heuristic as the warm start, then the exact
 * search: decide --capacity, or minimise the height. */
static void cl_roam(const cl_options *o, const layout_buffer *bufs, size_t n, double t_start,
                    uint64_t *offsets, cl_run *run) {
    run->h0 = layout_best_heuristic(bufs, n, o->align, offsets, &run->winner);
    double left =
        0.9 * (t_start + o->time_limit - roamc_now()); /* a tenth for checking and writing */
    /* The plans' exact layout first (search at the bound, GLPK on small
     * problems, local search over first-fit orders), with at most half of
     * the time: on the committed models' buffer lists its local search
     * reaches the live-size bound where the searches below alone do not
     * (mnasnet1_0, mobilenet_v2_b32, efficientnet_b0_b32, vit_b_16_b1).
     * Its search at the bound leaves a mark where it gave up, and
     * layout_solve's probe at that capacity continues from there instead of
     * repeating the strategies that already failed (before, a search that
     * needed most of the time started twice and got half of it).  Not
     * under --work (which is the exact search's own budget) nor for dev
     * --engine. */
    layout_search_mark mark = {0};
    if (!o->work && !o->engines && left > 1e-3) {
        layout_effort e = {0, 0.5 * left, o->has_capacity ? o->capacity : 0,
                           LAYOUT_SHARES_PORTFOLIO, &mark};
        layout_result er;
        uint64_t *warm = xmallocarray(n, sizeof *warm);
        memcpy(warm, offsets, n * sizeof *warm);
        layout_exact(&(layout_problem){bufs, n, o->align}, warm, &e, offsets, &er);
        free(warm);
        left = 0.9 * (t_start + o->time_limit - roamc_now());
    }
    layout_solve_opts so;
    layout_solve_defaults(&so);
    so.capacity = o->has_capacity ? (o->capacity ? o->capacity : 1) : 0;
    so.work = o->work;
    so.time_limit_s = left > 1e-3 ? left : 1e-3;
    so.engines = o->engines;
    so.rules = o->rules;
    so.resume = mark.capacity ? &mark : NULL;
    run->have_solve = 1;
    layout_solve(&(layout_problem){bufs, n, o->align}, offsets, &so, offsets, &run->sr);
    run->height = run->sr.height;
    run->proven = run->sr.status == LAYOUT_SOLVE_OPTIMAL;
    run->timed_out = run->sr.stopped_by_time;
    run->detail = run->height < run->h0 ? "improved on" : "no better than";
}

/* Lays out bufs with o->method into offsets. */
static void cl_layout(const cl_options *o, const layout_csv *csv, const layout_buffer *bufs,
                      double t_start, uint64_t *offsets, cl_run *run) {
    size_t n = csv->n;
    *run = (cl_run){.detail = ""};
    if (strcmp(o->method, "llfb") == 0) {
        run->height = layout_llfb(bufs, n, o->align, offsets);
    } else if (strcmp(o->method, "greedy") == 0) {
        run->height = layout_greedy(bufs, n, o->align, offsets);
    } else if (strcmp(o->method, "bestfit") == 0) {
        run->height = layout_bestfit(bufs, n, o->align, offsets);
    } else if (strcmp(o->method, "pytorch") == 0) {
        run->height = layout_pytorch(csv->bufs, n, 0, offsets, &run->pt);
    } else if (roamc_now() >= t_start + o->time_limit) {
        /* no time left after reading: the fastest valid layout */
        run->height = layout_bestfit(bufs, n, o->align, offsets);
        run->too_short = 1;
    } else {
        cl_roam(o, bufs, n, t_start, offsets, run);
    }
}

/* The report of a run (to rep). */
static void cl_report(FILE *rep, const cl_options *o, size_t n, uint64_t lb, const cl_run *run,
                      double secs) {
    uint64_t height = run->height;
    const layout_solve_result *sr = &run->sr;
    double frag = lb ? 100.0 * (double)(height - lb) / (double)lb : 0.0;
    fprintf(rep, "buffers: %zu\n", n);
    fprintf(rep, "method: %s%s%s%s\n", o->method, *run->detail ? " (exact steps " : "", run->detail,
            *run->detail ? " the heuristic)" : "");
    if (run->winner)
        fprintf(rep, "best heuristic: %s, height %" PRIu64 " bytes\n", run->winner, run->h0);
    fprintf(rep, "height: %" PRIu64 " bytes\n", height);
    fprintf(rep, "lower bound: %" PRIu64 " bytes (live size)\n", lb);
    fprintf(rep, "fragmentation: %.4f%%%s\n", frag, run->proven ? " (optimal)" : "");
    if (run->have_solve) {
        static const char *const status[] = {"optimal", "feasible (within the capacity)",
                                             "infeasible (proved: no layout within the capacity)",
                                             "stopped"};
        fprintf(rep, "status: %s%s\n", status[sr->status],
                sr->status != LAYOUT_SOLVE_STOPPED ? ""
                : sr->stopped_by_time || !o->work  ? " by time (not proved)"
                                                   : " by --work (not proved)");
        if (!o->has_capacity || sr->status == LAYOUT_SOLVE_INFEASIBLE)
            fprintf(rep, "proven lower bound: %" PRIu64 " bytes, gap %.4f%%\n", sr->lower_bound,
                    sr->lower_bound && sr->lower_bound < height
                        ? 100.0 * (double)(height - sr->lower_bound) / (double)sr->lower_bound
                        : 0.0);
        fprintf(rep, "search: %" PRIu64 " nodes, %u capacities probed\n", sr->nodes, sr->probes);
    }
    if (strcmp(o->method, "pytorch") == 0)
        fprintf(rep,
                "pytorch: reserved %" PRIu64 " bytes, allocated peak %" PRIu64
                " bytes, %zu segments\n",
                run->pt.reserved_peak, run->pt.allocated_peak, run->pt.segments);
    fprintf(rep, "time: %.3f s\n", secs);
    if (run->too_short)
        fprintf(rep,
                "time limit: %g s was too short: this is the fastest valid layout (bestfit), not "
                "roam's\n",
                o->time_limit);
    else if (run->timed_out)
        fprintf(rep,
                "time limit: %g s cut the exact steps before their work budget: another run may "
                "differ\n",
                o->time_limit);
}

/* The exit status of a run that was reported: a layout above --capacity
 * is not written (CL_EXIT_CAPACITY), nor one that could not be written
 * (CL_EXIT_ERROR). */
static cl_exit cl_finish(const cl_options *o, const layout_csv *csv, uint64_t lb, const cl_run *run,
                         double secs, const uint64_t *offsets) {
    if (o->has_capacity && run->height > o->capacity && run->have_solve &&
        run->sr.status == LAYOUT_SOLVE_INFEASIBLE) {
        fprintf(stderr,
                "roamc layout: proved that no layout fits within the capacity of %" PRIu64
                " bytes (%" PRIu64 " search nodes); no output written\n",
                o->capacity, run->sr.nodes);
        return CL_EXIT_CAPACITY;
    }
    if (o->has_capacity && run->height > o->capacity) {
        fprintf(stderr,
                "roamc layout: no layout within the capacity of %" PRIu64 " bytes found in %.1f s"
                " (best height %" PRIu64 " bytes, lower bound %" PRIu64 "); no output written\n",
                o->capacity, secs, run->height, lb);
        return CL_EXIT_CAPACITY;
    }
    if (o->output && cl_write_atomic(o->output, csv, offsets) != 0) return CL_EXIT_ERROR;
    return CL_EXIT_OK;
}

/* Lays out, checks, reports and writes the problem of csv; returns the exit
 * status. */
static cl_exit cl_solve(const cl_options *o, const layout_csv *csv, layout_buffer *bufs,
                        uint64_t *offsets, double t_start) {
    size_t n = csv->n;
    uint64_t lb = layout_live_peak(bufs, n);
    if (o->has_capacity && lb > o->capacity) {
        fprintf(stderr,
                "roamc layout: cannot fit: the live-size lower bound is %" PRIu64
                " bytes, above the capacity of %" PRIu64 " bytes\n",
                lb, o->capacity);
        return CL_EXIT_CAPACITY;
    }
    double t0 = roamc_now();
    planner_progress_stage("layout (%s) of %zu buffers", o->method, n);
    cl_run run;
    cl_layout(o, csv, bufs, t_start, offsets, &run);
    double secs = roamc_now() - t0;
    planner_progress_end();
    /* Never report a layout that is not one (a bug, if it happens). */
    size_t a, b;
    int pytorch = strcmp(o->method, "pytorch") == 0;
    if (layout_validate(pytorch ? csv->bufs : bufs, n, offsets, pytorch ? 1 : o->align, &a, &b) !=
        0) {
        fprintf(stderr, "roamc layout: internal error: invalid layout (buffers '%s' and '%s')\n",
                csv->ids[a], csv->ids[b]);
        return CL_EXIT_ERROR;
    }
    /* with the CSV on stdout, the report goes to stderr */
    cl_report(o->output && strcmp(o->output, "-") == 0 ? stderr : stdout, o, n, lb, &run, secs);
    return cl_finish(o, csv, lb, &run, secs, offsets);
}

int cmd_layout(int argc, char **argv) {
    /* --time-limit bounds the whole command, from here to exit */
    double t_start = roamc_now();
    cl_options o;
    cl_parsed parsed = cl_parse(argc, argv, &o);
    if (parsed != CL_RUN) return parsed == CL_HELP ? CL_EXIT_OK : CL_EXIT_USAGE;

    layout_csv csv;
    char err[2048];
    /* the output checked before any work: never the input, always writable */
    planner_output_set outs = {0};
    planner_outputs_add(&outs, "-o", o.output);
    const char *inputs[1] = {o.input};
    if (planner_outputs_check(&outs, inputs, 1, err, sizeof err) != 0) {
        fprintf(stderr, "roamc layout: %s\n", err);
        return CL_EXIT_USAGE;
    }
    /* a progress line on a terminal (cleared before the report) */
    planner_progress_start(isatty(STDERR_FILENO));
    planner_progress_stage("reading %s", o.input);
    if (layout_csv_read(o.input, &csv, err, sizeof err) != 0) {
        planner_progress_end();
        fprintf(stderr, "roamc layout: %s\n", err);
        return CL_EXIT_USAGE;
    }
    /* The engine works on sizes rounded up to align; the file keeps its own. */
    layout_buffer *bufs = xmallocarray(csv.n, sizeof *bufs);
    uint64_t *offsets = xmallocarray(csv.n, sizeof *offsets);
    cl_exit rc = cl_problem(&o, &csv, bufs);
    if (rc == CL_EXIT_OK) rc = cl_solve(&o, &csv, bufs, offsets, t_start);
    planner_progress_end();
    free(bufs);
    free(offsets);
    layout_csv_free(&csv);
    return rc;
}
