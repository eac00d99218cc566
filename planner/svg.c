/* Pictures of plans: one SVG with, per plan, the layout (time across,
 * address up, one rectangle per storage) and the live-memory curve under it.
 *
 * Training graphs have 10,000+ storages, most far below a pixel.  Storages
 * at least SVG_MIN_PX in both directions are drawn as rectangles; the rest
 * are painted into a coarse raster of cells, emitted as one rectangle per run
 * of covered cells in a row.  The file stays small and looks the same.
 */
#include "planner.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

#define SVG_W 1200     /* plot width, px */
#define SVG_LAYOUT_H 360
#define SVG_CURVE_H 120
#define SVG_MARGIN 70
#define SVG_GAP 60
#define SVG_CELL 2     /* raster cell, px */
#define SVG_MIN_PX 3.0 /* storages narrower or lower than this go to the raster */

static int svg_fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
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

static double svg_mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* One panel: layout of p at vertical offset y0, scaled so that `scale_top`
 * bytes fill the layout height (the same for every panel of a picture). */
static int svg_panel(FILE *f, const plan *p, const char *title, double y0, uint64_t scale_top) {
    const graph *g = p->g;
    size_t steps = g->n_ops, ns = g->n_storages;
    double xs = (double)SVG_W / (double)(steps ? steps : 1);
    double ys = (double)SVG_LAYOUT_H / (double)(scale_top ? scale_top : 1);
    int cols = SVG_W / SVG_CELL, rows = SVG_LAYOUT_H / SVG_CELL;
    /* raster cells: 0 empty, 1 activation, 2 persistent */
    unsigned char *cell = calloc((size_t)cols * (size_t)rows, 1);
    if (!cell) return -1;

    fprintf(f, "<g transform=\"translate(%d,%.1f)\">\n", SVG_MARGIN, y0);
    fprintf(f, "<text x=\"0\" y=\"-8\" class=\"title\">");
    svg_escape(f, title);
    fprintf(f, ": theoretical %.1f MiB, actual %.1f MiB, fragmentation %.2f%%</text>\n", svg_mib(p->theoretical),
            svg_mib(p->actual),
            p->theoretical ? 100.0 * ((double)p->actual - (double)p->theoretical) / (double)p->theoretical : 0.0);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", SVG_W, SVG_LAYOUT_H);
    size_t drawn = 0;
    for (size_t s = 0; s < ns; s++) {
        uint64_t size = g->storages[s].size;
        if (!size) continue;
        double x0 = p->start[s] * xs, x1 = (p->end[s] + 1) * xs;
        double top = SVG_LAYOUT_H - (double)(p->offsets[s] + size) * ys;
        double h = (double)size * ys;
        int pers = g->storages[s].persistent;
        if (x1 - x0 >= SVG_MIN_PX && h >= SVG_MIN_PX) {
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"%s\"/>\n", x0, top, x1 - x0,
                    h, pers ? "p" : "a");
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
            for (int c = c0; c <= c1; c++)
                if (cell[(size_t)r * cols + c] < 1 + pers) cell[(size_t)r * cols + c] = (unsigned char)(1 + pers);
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols;) {
            unsigned char v = cell[(size_t)r * cols + c];
            int e = c;
            while (e < cols && cell[(size_t)r * cols + e] == v) e++;
            if (v)
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"%s\"/>\n", c * SVG_CELL,
                        r * SVG_CELL, (e - c) * SVG_CELL, SVG_CELL, v == 2 ? "p" : "a");
            c = e;
        }
    free(cell);
    /* the actual peak */
    double peak_y = SVG_LAYOUT_H - (double)p->actual * ys;
    fprintf(f, "<line x1=\"0\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"peak\"/>\n", peak_y, SVG_W, peak_y);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"label\">%.1f MiB</text>\n", SVG_W + 4, peak_y + 4, svg_mib(p->actual));
    fprintf(f, "<text x=\"-6\" y=\"%d\" class=\"axis\" text-anchor=\"end\">0</text>\n", SVG_LAYOUT_H);

    /* live bytes per step, as the max within each pixel column */
    int64_t *delta = calloc(steps + 1, sizeof *delta);
    double *colmax = calloc(SVG_W, sizeof *colmax);
    if (!delta || !colmax) {
        free(delta);
        free(colmax);
        return -1;
    }
    for (size_t s = 0; s < ns; s++) {
        delta[p->start[s]] += (int64_t)g->storages[s].size;
        delta[p->end[s] + 1] -= (int64_t)g->storages[s].size;
    }
    int64_t live = 0;
    for (size_t t = 0; t < steps; t++) {
        live += delta[t];
        int c0 = (int)(t * xs), c1 = (int)((t + 1) * xs - 1e-9);
        for (int c = c0; c <= c1 && c < SVG_W; c++)
            if ((double)live > colmax[c]) colmax[c] = (double)live;
    }
    double cy0 = SVG_LAYOUT_H + 20, cys = (double)SVG_CURVE_H / (double)(scale_top ? scale_top : 1);
    fprintf(f, "<rect x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", cy0, SVG_W, SVG_CURVE_H);
    fprintf(f, "<polyline class=\"curve\" points=\"");
    for (int c = 0; c < SVG_W; c++)
        fprintf(f, "%d,%.1f %d,%.1f ", c, cy0 + SVG_CURVE_H - colmax[c] * cys, c + 1, cy0 + SVG_CURVE_H - colmax[c] * cys);
    fprintf(f, "\"/>\n<text x=\"0\" y=\"%.1f\" class=\"axis\">live bytes per step (max %.1f MiB at the theoretical peak); "
               "%zu steps, %zu storages (%zu drawn one by one)</text>\n",
            cy0 + SVG_CURVE_H + 16, svg_mib(p->theoretical), steps, ns, drawn);
    free(delta);
    free(colmax);
    fprintf(f, "</g>\n");
    return 0;
}

int plan_write_svg(const plan *const *plans, const char *const *titles, size_t n, const char *path, char *err,
                   size_t errlen) {
    uint64_t top = 1;
    for (size_t i = 0; i < n; i++) {
        if (plans[i]->actual > top) top = plans[i]->actual;
        if (plans[i]->theoretical > top) top = plans[i]->theoretical;
    }
    char *tmp;
    FILE *f = planner_atomic_open(path, &tmp);
    if (!f) return svg_fail(err, errlen, "%s: cannot create the picture", path);
    double panel_h = SVG_LAYOUT_H + 20 + SVG_CURVE_H + 30;
    double total_h = 2 * SVG_MARGIN / 2 + (double)n * (panel_h + SVG_GAP);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\">\n",
            SVG_W + 2 * SVG_MARGIN + 40, total_h, SVG_W + 2 * SVG_MARGIN + 40, total_h);
    fputs("<style>.a{fill:#4e79a7}.p{fill:#bab0ac}.frame{fill:none;stroke:#888;stroke-width:0.5}"
          ".peak{stroke:#e15759;stroke-width:1;stroke-dasharray:4 3}.curve{fill:none;stroke:#59a14f;stroke-width:1}"
          "text{font-family:sans-serif;font-size:12px}.title{font-size:14px;font-weight:bold}"
          ".label{fill:#e15759}.axis{fill:#555}</style>\n", f);
    fputs("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = svg_panel(f, plans[i], titles[i], SVG_GAP / 2 + 20 + (double)i * (panel_h + SVG_GAP), top);
    fprintf(f, "<text x=\"%d\" y=\"%.0f\" class=\"axis\">time (steps) across, address up; blue: activations and "
               "temporaries, grey: persistent (parameters, optimizer state, outputs); red: actual peak</text>\n",
            SVG_MARGIN, total_h - 10);
    fputs("</svg>\n", f);
    if (planner_atomic_close(f, tmp, path, rc == 0)) rc = -1;
    return rc ? svg_fail(err, errlen, "%s: cannot write the picture", path) : 0;
}
