/* Pictures of plans: one SVG with, per plan, the layout (time across,
 * address up, one rectangle per storage) and the live-memory curve under it.
 *
 * Training graphs have 10,000+ storages, most far below a pixel.  Storages
 * at least SVG_MIN_PX in both directions are drawn as rectangles; the rest
 * are painted into a coarse raster of cells, emitted as one rectangle per run
 * of covered cells in a row.  The file stays small and looks the same.
 *
 * Each storage is coloured by its kind (parameter, gradient, optimizer state,
 * saved activation, temporary, input, output: planner/peak.c's classes, the
 * report's "live at peak" kinds; the legend shows those drawn) and carries a
 * <title> tooltip: tensor, size, lifetime in steps, the op that makes it,
 * kind.  A merged raster run's tooltip names the largest storage in it.
 *
 * A fitted step (--fit) marks what the fit changed: storages a recompute
 * clone makes and storages a Reload brings back from the host get colours of
 * their own (in the raster too: a marked storage wins its cell), and the
 * host buffers, which take no device bytes, are counted in a note.
 */
#include "svg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

#define SVG_W 1200 /* plot width, px */
/* Panel heights: one plan gets room; a comparison of several stays on one
 * screen. */
static int svg_layout_h(size_t n) {
    return n > 1 ? 200 : 360;
}
static int svg_curve_h(size_t n) {
    return n > 1 ? 60 : 120;
}
#define SVG_MARGIN 70
#define SVG_GAP 60
#define SVG_CELL 2     /* raster cell, px */
#define SVG_MIN_PX 3.0 /* storages narrower or lower than this go to the raster */

/* What a storage is drawn as: its kind (planner/peak.c's classes, the same as the report's
 * "live at peak" lines), or a fit's mark.  A raster cell keeps the highest kind painted
 * into it, so the rarer kinds and the marked storages stay visible among merged ones. */
enum svg_kind {
    SVG_EMPTY = 0,
    SVG_TEMPORARY,
    SVG_SAVED,
    SVG_INPUT,
    SVG_OUTPUT,
    SVG_GRADIENT,
    SVG_STATE,
    SVG_PARAMETER,
    SVG_RECOMPUTED,
    SVG_RELOADED,
    SVG_N_KINDS
};
static const char *const svg_kind_class[SVG_N_KINDS] = {"",  "t", "s", "i", "o",
                                                        "g", "m", "p", "r", "l"};
static const char *const svg_kind_fill[SVG_N_KINDS] = {"",        "#76b7b2", "#4e79a7", "#59a14f",
                                                       "#e15759", "#edc948", "#9c755f", "#bab0ac",
                                                       "#f28e2b", "#b07aa1"};
static const char *const svg_kind_label[SVG_N_KINDS] = {
    "",         "temporary",       "saved activation", "input",      "output",
    "gradient", "optimizer state", "parameter",        "recomputed", "reloaded from host"};

static enum svg_kind svg_storage_kind(const graph_storage *st, int kind) {
    if (st->reloaded) return SVG_RELOADED;
    if (st->recomputed) return SVG_RECOMPUTED;
    switch (kind) {
    case PLANNER_KIND_PARAMETER: return SVG_PARAMETER;
    case PLANNER_KIND_GRADIENT: return SVG_GRADIENT;
    case PLANNER_KIND_STATE: return SVG_STATE;
    case PLANNER_KIND_SAVED: return SVG_SAVED;
    case PLANNER_KIND_INPUT: return SVG_INPUT;
    case PLANNER_KIND_OUTPUT: return SVG_OUTPUT;
    default: return SVG_TEMPORARY; /* temporaries (a host copy has no device bytes to draw) */
    }
}

/* What a fit changed in one plan's graph (all zero for an unchanged step). */
typedef struct svg_marks {
    size_t n_recomputed, n_reloaded, n_host;
    uint64_t recomputed_bytes, reloaded_bytes, host_bytes;
} svg_marks;

static svg_marks svg_count_marks(const graph *g) {
    svg_marks k = {0};
    for (size_t s = 0; s < g->n_storages; s++) {
        const graph_storage *st = &g->storages[s];
        if (st->host) k.n_host++, k.host_bytes += st->host_size;
        if (st->recomputed) k.n_recomputed++, k.recomputed_bytes += st->size;
        if (st->reloaded) k.n_reloaded++, k.reloaded_bytes += st->size;
    }
    return k;
}

static bool svg_marks_any(const svg_marks *k) {
    return k->n_recomputed || k->n_reloaded || k->n_host;
}

static void svg_escape(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* "123.4 MiB" / "1.23 GiB": the unit that keeps 3-4 digits. */
static const char *svg_size(double b, char *buf, size_t len) {
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        snprintf(buf, len, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, len, "%.1f KiB", b / 1024.0);
    return buf;
}

/* A round tick spacing (1, 2 or 5 times a power of ten) giving about
 * `want` ticks up to top. */
static double svg_tick_step(double top, int want) {
    double raw = top / want, unit = 1;
    while (unit * 10 <= raw) unit *= 10;
    if (raw > 5 * unit) return 10 * unit;
    if (raw > 2 * unit) return 5 * unit;
    if (raw > unit) return 2 * unit;
    return unit;
}

/* The panel's title line (the plan's peaks and fragmentation) and the frame
 * of its layout. */
static void svg_panel_title(FILE *f, const plan *p, const char *title, int layout_h) {
    char b1[32], b2[32];
    fprintf(f, "<text x=\"0\" y=\"-8\" class=\"title\">");
    svg_escape(f, title);
    fprintf(f, ": theoretical %s, actual %s, fragmentation %.2f%%</text>\n",
            svg_size((double)p->theoretical, b1, sizeof b1),
            svg_size((double)p->actual, b2, sizeof b2),
            p->theoretical
                ? 100.0 * ((double)p->actual - (double)p->theoretical) / (double)p->theoretical
                : 0.0);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", SVG_W,
            layout_h);
}

/* A storage's tooltip text: tensor, size, lifetime, maker, kind. */
static void svg_storage_title(FILE *f, const plan *p, size_t s, const unsigned char *kinds,
                              const int *makers) {
    const graph *g = p->g;
    const fe_model *m = g->model;
    const graph_storage *st = &g->storages[s];
    char b[32];
    svg_escape(f, m->values[st->root].name);
    fprintf(f, ": %s (%llu B), %s; steps %d-%d (%d steps); ",
            svg_size((double)st->size, b, sizeof b), (unsigned long long)st->size,
            planner_kind_name(kinds[s]), (int)p->start[s], (int)p->end[s],
            (int)(p->end[s] - p->start[s] + 1));
    int op = makers[s];
    if (op < 0) {
        fputs((m->values[st->root].kind & FE_INITIALIZER) ? "an initializer" : "a graph input", f);
        return;
    }
    fputs("made by ", f);
    svg_escape(f, m->nodes[op].op_type);
    if (m->nodes[op].name[0]) {
        fputs(" '", f);
        svg_escape(f, m->nodes[op].name);
        fputc('\'', f);
    }
    fprintf(f, " (#%d)", op);
}

/* The storages of one plan, as svg_storage_rects draws them. */
typedef struct svg_storages {
    const plan *p;
    unsigned char *kinds; /* per storage: enum planner_kind */
    int *makers;          /* per storage: the op that makes it, -1 for an input */
} svg_storages;

/* Emits the raster (cells hold an svg_kind; best: per cell the largest storage of that
 * kind painted into it, or -1) as one rectangle per run of equal, covered cells in a row, its
 * tooltip naming the largest storage merged into the run. */
static void svg_raster_runs(FILE *f, const svg_storages *S, const unsigned char *cell,
                            const int *best, int cols, int rows) {
    const graph *g = S->p->g;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols;) {
            size_t at = (size_t)r * cols;
            unsigned char v = cell[at + c];
            int e = c, big = -1;
            for (; e < cols && cell[at + e] == v; e++)
                if (best[at + e] >= 0 &&
                    (big < 0 || g->storages[best[at + e]].size > g->storages[big].size))
                    big = best[at + e];
            if (v) {
                fprintf(f,
                        "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                        "class=\"%s\"><title>storages under %g px merged; the largest: ",
                        c * SVG_CELL, r * SVG_CELL, (e - c) * SVG_CELL, SVG_CELL, svg_kind_class[v],
                        SVG_MIN_PX);
                if (big >= 0) svg_storage_title(f, S->p, (size_t)big, S->kinds, S->makers);
                fputs("</title></rect>\n", f);
            }
            c = e;
        }
}

/* The storages of p: one rectangle each, with its tooltip, where it is at least SVG_MIN_PX
 * in both directions, the rest painted into the raster.  present[k] is set for each
 * svg_kind drawn.  Returns how many were drawn one by one. */
static size_t svg_storage_rects(FILE *f, const plan *p, double xs, double ys, int layout_h,
                                bool *present) {
    const graph *g = p->g;
    size_t ns = g->n_storages;
    int cols = SVG_W / SVG_CELL, rows = layout_h / SVG_CELL;
    svg_storages S = {.p = p};
    planner_storage_classes(g, &S.kinds, &S.makers);
    /* raster cells: an svg_kind each, and the largest storage painted there */
    unsigned char *cell = xcalloc((size_t)cols * (size_t)rows, 1);
    int *best = xmallocarray((size_t)cols * (size_t)rows, sizeof *best);
    for (size_t k = 0; k < (size_t)cols * (size_t)rows; k++) best[k] = -1;
    size_t drawn = 0;
    for (size_t s = 0; s < ns; s++) {
        uint64_t size = g->storages[s].size;
        if (!size) continue;
        double x0 = p->start[s] * xs, x1 = (p->end[s] + 1) * xs;
        double top = layout_h - (double)(p->offsets[s] + size) * ys;
        double h = (double)size * ys;
        enum svg_kind kind = svg_storage_kind(&g->storages[s], S.kinds[s]);
        present[kind] = true;
        if (x1 - x0 >= SVG_MIN_PX && h >= SVG_MIN_PX) {
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                    "class=\"%s\"><title>",
                    x0, top, x1 - x0, h, svg_kind_class[kind]);
            svg_storage_title(f, p, s, S.kinds, S.makers);
            fputs("</title></rect>\n", f);
            drawn++;
            continue;
        }
        int c0 = (int)(x0 / SVG_CELL), c1 = (int)((x1 - 1e-9) / SVG_CELL);
        int r0 = (int)(top / SVG_CELL), r1 = (int)((top + h - 1e-9) / SVG_CELL);
        if (c0 < 0) c0 = 0;
        if (r0 < 0) r0 = 0;
        if (c1 >= cols) c1 = cols - 1;
        if (r1 >= rows) r1 = rows - 1;
        for (int r = r0; r <= r1; r++)
            for (int c = c0; c <= c1; c++) {
                size_t at = (size_t)r * cols + c;
                if (cell[at] < kind) cell[at] = (unsigned char)kind, best[at] = -1;
                if (cell[at] == kind && (best[at] < 0 || g->storages[best[at]].size < size))
                    best[at] = (int)s; /* the largest of the kind the cell shows */
            }
    }
    svg_raster_runs(f, &S, cell, best, cols, rows);
    free(cell);
    free(best);
    free(S.kinds);
    free(S.makers);
    return drawn;
}

/* A fitted step's note at the right of the title line: what is marked, and
 * the host buffers, which the device layout does not hold.  Nothing for an
 * unchanged step. */
static void svg_marks_note(FILE *f, const graph *g) {
    svg_marks k = svg_count_marks(g);
    if (!svg_marks_any(&k)) return;
    char b[32];
    const char *sep = "";
    fprintf(f, "<text x=\"%d\" y=\"-8\" class=\"axis\" text-anchor=\"end\">", SVG_W);
    if (k.n_recomputed) {
        fprintf(f, "%zu storages recomputed (%s)", k.n_recomputed,
                svg_size((double)k.recomputed_bytes, b, sizeof b));
        sep = "; ";
    }
    if (k.n_reloaded) {
        fprintf(f, "%s%zu reloaded (%s)", sep, k.n_reloaded,
                svg_size((double)k.reloaded_bytes, b, sizeof b));
        sep = "; ";
    }
    if (k.n_host)
        fprintf(f, "%shost: %s in %zu buffers, not in the device layout", sep,
                svg_size((double)k.host_bytes, b, sizeof b), k.n_host);
    fputs("</text>\n", f);
}

/* The actual peak: a dashed line across the layout, labelled at its right. */
static void svg_peak_marker(FILE *f, const plan *p, double ys, int layout_h) {
    char b1[32];
    double peak_y = layout_h - (double)p->actual * ys;
    fprintf(f, "<line x1=\"0\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"peak\"/>\n", peak_y, SVG_W,
            peak_y);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"label\">%s</text>\n", SVG_W + 4, peak_y + 4,
            svg_size((double)p->actual, b1, sizeof b1));
}

/* The layout's axes: address ticks at round byte counts, step ticks along
 * the bottom. */
static void svg_layout_axes(FILE *f, uint64_t scale_top, size_t steps, double xs, double ys,
                            int layout_h) {
    double unit = scale_top >= (1ull << 30) ? 1024.0 * 1024 * 1024 : 1024.0 * 1024;
    double tick = svg_tick_step((double)scale_top / unit, 5);
    for (double a = 0; a * unit <= (double)scale_top; a += tick) {
        double y = layout_h - a * unit * ys;
        fprintf(f,
                "<line x1=\"-4\" y1=\"%.1f\" x2=\"0\" y2=\"%.1f\" class=\"tick\"/>"
                "<text x=\"-6\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">%g %s</text>\n",
                y, y, y + 4, a, unit > 1024.0 * 1024 ? "GiB" : "MiB");
    }
    double stick = svg_tick_step((double)steps, 8);
    for (double t = 0; t <= (double)steps; t += stick)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">%.0f</text>\n",
                t * xs, layout_h + 13, t);
}

/* Live bytes per step of p, as the max within each of the SVG_W pixel
 * columns; the caller frees the array. */
static double *svg_live_columns(const plan *p, double xs) {
    size_t steps = p->g->n_ops;
    uint64_t *live = xmallocarray(steps, sizeof *live);
    graph_live_bytes(p->g, p->order, live); /* p's lifetimes are the schedule's */
    double *colmax = xcalloc(SVG_W, sizeof *colmax);
    for (size_t t = 0; t < steps; t++) {
        int c0 = (int)(t * xs), c1 = (int)((t + 1) * xs - 1e-9);
        for (int c = c0; c <= c1 && c < SVG_W; c++)
            if ((double)live[t] > colmax[c]) colmax[c] = (double)live[t];
    }
    free(live);
    return colmax;
}

/* The live-memory strip under the layout: its frame and axis, the curve,
 * the theoretical peak (dashed) and the caption, which counts the `drawn`
 * storages. */
static void svg_live_curve(FILE *f, const plan *p, uint64_t scale_top, double xs, int layout_h,
                           int curve_h, size_t drawn) {
    char b1[32];
    const graph *g = p->g;
    size_t steps = g->n_ops, ns = g->n_storages;
    double *colmax = svg_live_columns(p, xs);
    double cy0 = layout_h + 22, cys = (double)curve_h / (double)(scale_top ? scale_top : 1);
    fprintf(f, "<rect x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", cy0,
            SVG_W, curve_h);
    /* the strip's own axis: 0, half and the top of the shared scale */
    for (int k = 0; k <= 2; k++) {
        double v = (double)scale_top * k / 2, y = cy0 + curve_h - v * cys;
        fprintf(f,
                "<line x1=\"-4\" y1=\"%.1f\" x2=\"0\" y2=\"%.1f\" class=\"tick\"/>"
                "<text x=\"-6\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">%s</text>\n",
                y, y, y + 4, k ? svg_size(v, b1, sizeof b1) : "0");
    }
    fprintf(f, "<polyline class=\"curve\" points=\"");
    for (int c = 0; c < SVG_W; c++)
        fprintf(f, "%d,%.1f %d,%.1f ", c, cy0 + curve_h - colmax[c] * cys, c + 1,
                cy0 + curve_h - colmax[c] * cys);
    double tp_y = cy0 + curve_h - (double)p->theoretical * cys;
    fprintf(f, "\"/>\n<line x1=\"0\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"tpeak\"/>\n", tp_y,
            SVG_W, tp_y);
    fprintf(
        f,
        "<text x=\"0\" y=\"%.1f\" class=\"axis\">live bytes per step (theoretical peak %s, "
        "dashed); "
        "%zu steps, %zu storages (%zu drawn one by one, the rest merged per %d px cell)</text>\n",
        cy0 + curve_h + 16, svg_size((double)p->theoretical, b1, sizeof b1), steps, ns, drawn,
        SVG_CELL);
    free(colmax);
}

/* One panel: layout of p at vertical offset y0, scaled so that `scale_top`
 * bytes fill the layout height (the same for every panel of a picture). */
static void svg_panel(FILE *f, const plan *p, const char *title, double y0, uint64_t scale_top,
                      size_t n_panels, bool *present) {
    const int layout_h = svg_layout_h(n_panels), curve_h = svg_curve_h(n_panels);
    size_t steps = p->g->n_ops;
    double xs = (double)SVG_W / (double)(steps ? steps : 1);
    double ys = (double)layout_h / (double)(scale_top ? scale_top : 1);
    fprintf(f, "<g transform=\"translate(%d,%.1f)\">\n", SVG_MARGIN, y0);
    svg_panel_title(f, p, title, layout_h);
    svg_marks_note(f, p->g);
    size_t drawn = svg_storage_rects(f, p, xs, ys, layout_h, present);
    svg_peak_marker(f, p, ys, layout_h);
    svg_layout_axes(f, scale_top, steps, xs, ys, layout_h);
    svg_live_curve(f, p, scale_top, xs, layout_h, curve_h, drawn);
    fprintf(f, "</g>\n");
}

void plan_svg_stream(const plan *const *plans, const char *const *titles, size_t n, FILE *f) {
    uint64_t top = 1;
    bool marked = false;
    for (size_t i = 0; i < n; i++) {
        svg_marks k = svg_count_marks(plans[i]->g);
        marked = marked || svg_marks_any(&k);
        if (plans[i]->actual > top) top = plans[i]->actual;
        if (plans[i]->theoretical > top) top = plans[i]->theoretical;
    }
    double panel_h = svg_layout_h(n) + 22 + svg_curve_h(n) + 24;
    double total_h = 40 + (double)n * (panel_h + SVG_GAP) - SVG_GAP / 2;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 "
            "%d %.0f\">\n",
            SVG_W + 2 * SVG_MARGIN + 40, total_h, SVG_W + 2 * SVG_MARGIN + 40, total_h);
    fputs("<style>", f);
    for (int k = 1; k < SVG_N_KINDS; k++)
        fprintf(f, ".%s{fill:%s}", svg_kind_class[k], svg_kind_fill[k]);
    fputs(".frame{fill:none;stroke:#888;stroke-width:0.5}"
          ".peak{stroke:#e15759;stroke-width:1;stroke-dasharray:4 "
          "3}.curve{fill:none;stroke:#59a14f;stroke-width:1}"
          "text{font-family:sans-serif;font-size:12px}.title{font-size:14px;font-weight:bold}"
          ".label{fill:#e15759}.axis{fill:#555;font-size:11px}.tick{stroke:#888}"
          ".tpeak{stroke:#59a14f;stroke-dasharray:4 3}</style>\n",
          f);
    fputs("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    bool present[SVG_N_KINDS] = {false};
    for (size_t i = 0; i < n; i++)
        svg_panel(f, plans[i], titles[i], 40 + SVG_GAP / 2 + (double)i * (panel_h + SVG_GAP), top,
                  n, present);
    /* legend: a colour per kind drawn (parameter first, as the report lists kinds), the
     * fit's marks where a plan has them; then the peak line and how to read the picture */
    static const enum svg_kind legend_order[] = {SVG_PARAMETER, SVG_GRADIENT,   SVG_STATE,
                                                 SVG_SAVED,     SVG_TEMPORARY,  SVG_INPUT,
                                                 SVG_OUTPUT,    SVG_RECOMPUTED, SVG_RELOADED};
    fprintf(f, "<g transform=\"translate(%d,8)\" class=\"axis\">", SVG_MARGIN);
    double x = 0;
    for (size_t i = 0; i < sizeof legend_order / sizeof *legend_order; i++) {
        enum svg_kind k = legend_order[i];
        bool mark = k == SVG_RECOMPUTED || k == SVG_RELOADED;
        if (mark ? !marked : !present[k]) continue;
        fprintf(f,
                "<rect x=\"%.0f\" width=\"12\" height=\"10\" class=\"%s\"/><text x=\"%.0f\" "
                "y=\"10\">%s</text>",
                x, svg_kind_class[k], x + 16, svg_kind_label[k]);
        x += 16 + 6.2 * (double)strlen(svg_kind_label[k]) + 16;
    }
    fputs("<line x1=\"0\" y1=\"21\" x2=\"20\" y2=\"21\" class=\"peak\"/><text x=\"24\" "
          "y=\"26\">actual peak</text><text x=\"120\" y=\"26\">time (steps) across, address "
          "up; hover a block for its tensor, size, lifetime, maker and kind</text></g>\n",
          f);
    fputs("</svg>\n", f);
}
