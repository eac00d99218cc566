/* layout_cmd.c — `roamc layout`: the layout engine alone, on a buffer-list
 * CSV (shared/DESIGN.md).  See cmd_layout.h for the interface. */
#include "layout_cmd.h"
#include "planner.h"

#include "api_internal.h"

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

/* The sizes of csv rounded up to o->align must fit 64 bits, and so must
 * their sum (every offset and height stays below it).  Returns
 * CL_EXIT_OK, or CL_EXIT_USAGE (reported, naming the buffer). */
static cl_exit cl_check_sizes(const cl_options *o, const layout_csv *csv) {
    uint64_t sum = 0;
    for (size_t i = 0; i < csv->n; i++) {
        uint64_t s = csv->bufs[i].size;
        if (s % o->align != 0 && s > UINT64_MAX - o->align) {
            fprintf(stderr,
                    "roamc layout: %s: size of '%s' overflows when rounded up to %" PRIu64 "\n",
                    o->input, csv->ids[i], o->align);
            return CL_EXIT_USAGE;
        }
        s = (s + o->align - 1) / o->align * o->align;
        if (s > UINT64_MAX - sum) {
            fprintf(stderr, "roamc layout: %s: the sizes add up to more than 2^64 bytes\n",
                    o->input);
            return CL_EXIT_USAGE;
        }
        sum += s;
    }
    return CL_EXIT_OK;
}

/* The problem of csv as the library takes it (roamc_layout: the engine
 * and its options); time counts from t_start. */
static roamc_layout *cl_problem(const cl_options *o, const layout_csv *csv, double t_start) {
    roamc_layout *l = roamc_layout_new();
    for (size_t i = 0; i < csv->n; i++) {
        const layout_buffer *b = &csv->bufs[i];
        roamc_status st = roamc_layout_add_interval(l, b->size, o->align, b->start, b->end, NULL);
        ROAMC_ASSERT(st == ROAMC_OK); /* the CSV reader's lifetimes, the parser's alignment */
    }
    l->capacity = o->capacity;
    l->has_capacity = o->has_capacity;
    l->time_limit = o->time_limit;
    l->work = o->work;
    l->method = o->method;
    l->engines = o->engines;
    l->rules = &o->rules;
    l->t_start = t_start;
    return l;
}

/* The report of a run (to rep). */
static void cl_report(FILE *rep, const cl_options *o, const roamc_layout *l, double secs) {
    uint64_t height = l->height, lb = l->live_bound;
    const layout_solve_result *sr = &l->sr;
    int proven = l->have_solve && sr->status == LAYOUT_SOLVE_OPTIMAL;
    double frag = lb ? 100.0 * (double)(height - lb) / (double)lb : 0.0;
    fprintf(rep, "buffers: %zu\n", l->n);
    fprintf(rep, "method: %s%s%s%s\n", o->method, *l->detail ? " (exact steps " : "", l->detail,
            *l->detail ? " the heuristic)" : "");
    if (l->winner) fprintf(rep, "best heuristic: %s, height %" PRIu64 " bytes\n", l->winner, l->h0);
    fprintf(rep, "height: %" PRIu64 " bytes\n", height);
    fprintf(rep, "lower bound: %" PRIu64 " bytes (live size)\n", lb);
    fprintf(rep, "fragmentation: %.4f%%%s\n", frag, proven ? " (optimal)" : "");
    if (l->have_solve) {
        static const char *const status[] = {"optimal", "feasible (within the capacity)",
                                             "infeasible (proved: no layout within the capacity)",
                                             "stopped"};
        /* what stopped it, truly: a search that ran out of ideas with
         * time left was not stopped by time */
        fprintf(rep, "status: %s%s%s%s\n", status[sr->status],
                sr->status != LAYOUT_SOLVE_STOPPED ? ""
                : sr->stop == LAYOUT_STOP_TIME     ? " by time"
                : sr->stop == LAYOUT_STOP_WORK     ? " by --work"
                                                   : ": ",
                sr->status != LAYOUT_SOLVE_STOPPED || sr->stop == LAYOUT_STOP_TIME ||
                        sr->stop == LAYOUT_STOP_WORK
                    ? ""
                    : layout_stop_name(sr->stop),
                sr->status == LAYOUT_SOLVE_STOPPED ? " (not proved)" : "");
        if (sr->bound.bound > sr->bound.live)
            fprintf(rep,
                    "window bound: %" PRIu64 " bytes (%zu buffers around steps %" PRId64
                    "..%" PRId64 " cannot fit lower)\n",
                    sr->bound.bound, sr->bound.window_buffers, sr->bound.window_start,
                    sr->bound.window_end);
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
                l->pt.reserved_peak, l->pt.allocated_peak, l->pt.segments);
    fprintf(rep, "time: %.3f s\n", secs);
    if (l->too_short)
        fprintf(rep,
                "time limit: %g s was too short: this is the fastest valid layout (bestfit), not "
                "roam's\n",
                o->time_limit);
    else if (l->timed_out)
        fprintf(rep,
                "time limit: %g s cut the exact steps before their work budget: another run may "
                "differ\n",
                o->time_limit);
}

/* The exit status of a run that was reported: a layout above --capacity
 * is not written (CL_EXIT_CAPACITY), nor one that could not be written
 * (CL_EXIT_ERROR). */
static cl_exit cl_finish(const cl_options *o, const layout_csv *csv, const roamc_layout *l,
                         double secs) {
    if (o->has_capacity && l->height > o->capacity && l->have_solve &&
        l->sr.status == LAYOUT_SOLVE_INFEASIBLE) {
        fprintf(stderr,
                "roamc layout: proved that no layout fits within the capacity of %" PRIu64
                " bytes (%" PRIu64 " search nodes); no output written\n",
                o->capacity, l->sr.nodes);
        return CL_EXIT_CAPACITY;
    }
    if (o->has_capacity && l->height > o->capacity) {
        fprintf(stderr,
                "roamc layout: no layout within the capacity of %" PRIu64 " bytes found in %.1f s"
                " (best height %" PRIu64 " bytes, lower bound %" PRIu64 "); no output written\n",
                o->capacity, secs, l->height, l->live_bound);
        return CL_EXIT_CAPACITY;
    }
    if (o->output && cl_write_atomic(o->output, csv, l->offsets) != 0) return CL_EXIT_ERROR;
    return CL_EXIT_OK;
}

/* Lays out (roamc_layout_solve, the library's engine), reports and writes
 * the problem of csv; returns the exit status. */
static cl_exit cl_solve(const cl_options *o, const layout_csv *csv, double t_start) {
    roamc_layout *l = cl_problem(o, csv, t_start);
    double t0 = roamc_now();
    planner_progress_stage("layout (%s) of %zu buffers", o->method, csv->n);
    roamc_status st = roamc_layout_solve(l);
    double secs = roamc_now() - t0;
    planner_progress_end();
    cl_exit rc;
    if (st == ROAMC_NO_FIT && !l->have_solve && l->stop == ROAMC_STOP_INFEASIBLE) {
        /* the live-size bound is above the capacity: nothing was laid out */
        fprintf(stderr, "roamc layout: %s\n", l->error);
        rc = CL_EXIT_CAPACITY;
    } else if (st == ROAMC_BAD_INPUT) {
        fprintf(stderr, "roamc layout: %s: %s\n", o->input, l->error);
        rc = CL_EXIT_USAGE;
    } else if (st == ROAMC_ERROR) {
        /* never report a layout that is not one (a bug, if it happens) */
        fprintf(stderr, "roamc layout: internal error: invalid layout (buffers '%s' and '%s')\n",
                csv->ids[l->bad_a], csv->ids[l->bad_b]);
        rc = CL_EXIT_ERROR;
    } else {
        /* with the CSV on stdout, the report goes to stderr */
        cl_report(o->output && strcmp(o->output, "-") == 0 ? stderr : stdout, o, l, secs);
        rc = cl_finish(o, csv, l, secs);
    }
    roamc_layout_free(l);
    return rc;
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
    cl_exit rc = cl_check_sizes(&o, &csv);
    if (rc == CL_EXIT_OK) rc = cl_solve(&o, &csv, t_start);
    planner_progress_end();
    layout_csv_free(&csv);
    return rc;
}
