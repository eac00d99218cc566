/* layout_csv.c — the buffer-list CSV of shared/DESIGN.md.
 *
 *     id,lower,upper,size          (or buffer,start,end,size)
 *     b1,0,3,4
 *
 * Lifetimes in the file are half-open [lower, upper); in memory they are
 * closed [lower, upper - 1], the convention of layout.h.  Fields may have
 * blanks around them, lines may end in \r\n, blank lines are skipped.  No
 * quoting: a field is everything between two commas.  Every error names
 * file:line:column (1-based; the column of the offending field).
 */
#include "base.h"
#include "layout.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CSV_COLUMNS 4

static const char *const csv_headers[2][CSV_COLUMNS] = {
    {"id", "lower", "upper", "size"},
    {"buffer", "start", "end", "size"},
};

/* One field of a line: [begin, end) with the blanks around it trimmed. */
typedef struct csv_field {
    const char *begin, *end;
    size_t column; /* 1-based column where the field (untrimmed) starts */
} csv_field;

/* Reading state, so that error messages can say where they are. */
typedef struct csv_reader {
    const char *path;
    size_t line;
    char *err;
    size_t errlen;
} csv_reader;

static int csv_error(const csv_reader *r, size_t column, const char *fmt, ...) {
    if (r->err && r->errlen > 0) {
        int k = column ? snprintf(r->err, r->errlen, "%s:%zu:%zu: ", r->path, r->line, column)
                       : snprintf(r->err, r->errlen, "%s:%zu: ", r->path, r->line);
        if (k >= 0 && (size_t)k < r->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->err + k, r->errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
        /* messages quote the file's fields: no control byte reaches the terminal */
        for (char *c = r->err; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    }
    return -1;
}

/* Splits line (NUL-terminated, without newline) at commas into fields[],
 * which has room for max + 1: returns the number of fields, max + 1 meaning
 * "more than max" (fields[max] is then the first extra one). */
static size_t csv_split(const char *line, csv_field *fields, size_t max) {
    size_t nf = 0;
    const char *p = line;
    for (;;) {
        const char *q = strchr(p, ',');
        const char *stop = q ? q : p + strlen(p);
        csv_field *f = &fields[nf++];
        f->column = (size_t)(p - line) + 1;
        f->begin = p;
        f->end = stop;
        while (f->begin < f->end && isspace((unsigned char)*f->begin)) f->begin++;
        while (f->end > f->begin && isspace((unsigned char)f->end[-1])) f->end--;
        if (!q || nf == max + 1) return nf;
        p = q + 1;
    }
}

static int csv_field_is(const csv_field *f, const char *word) {
    size_t len = (size_t)(f->end - f->begin);
    return strlen(word) == len && memcmp(f->begin, word, len) == 0;
}

/* Parses a field as a decimal number no larger than max. */
static int csv_number(const csv_reader *r, const csv_field *f, const char *name, uint64_t max,
                      uint64_t *out) {
    int len = (int)(f->end - f->begin);
    if (len == 0) return csv_error(r, f->column, "%s: empty field", name);
    if (*f->begin == '-')
        return csv_error(r, f->column, "%s: negative number '%.*s'", name, len, f->begin);
    uint64_t v = 0;
    for (const char *p = f->begin; p < f->end; p++) {
        if (*p == '+' && p == f->begin && f->end - f->begin > 1) continue;
        if (!isdigit((unsigned char)*p))
            return csv_error(r, f->column, "%s: not a non-negative integer: '%.*s'", name, len,
                             f->begin);
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (max - d) / 10)
            return csv_error(r, f->column, "%s: number '%.*s' is too large (max %" PRIu64 ")", name,
                             len, f->begin, max);
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int csv_blank(const char *s) {
    while (isspace((unsigned char)*s)) s++;
    return *s == '\0';
}

/* Parses the header line; sets *kind. */
static int csv_header(const csv_reader *r, const char *line, int *kind) {
    csv_field f[CSV_COLUMNS + 1];
    size_t nf = csv_split(line, f, CSV_COLUMNS);
    for (int k = 0; k < 2; k++) {
        if (!csv_field_is(&f[0], csv_headers[k][0])) continue;
        for (size_t c = 1; c < CSV_COLUMNS; c++) {
            if (c >= nf)
                return csv_error(r, 0, "header: missing column '%s' (expected '%s,%s,%s,%s')",
                                 csv_headers[k][c], csv_headers[k][0], csv_headers[k][1],
                                 csv_headers[k][2], csv_headers[k][3]);
            if (!csv_field_is(&f[c], csv_headers[k][c]))
                return csv_error(r, f[c].column, "header: column %zu is '%.*s', expected '%s'",
                                 c + 1, (int)(f[c].end - f[c].begin), f[c].begin,
                                 csv_headers[k][c]);
        }
        if (nf > CSV_COLUMNS)
            return csv_error(r, f[CSV_COLUMNS].column, "header: unexpected extra column");
        *kind = k;
        return 0;
    }
    return csv_error(r, 1, "header must be 'id,lower,upper,size' or 'buffer,start,end,size'");
}

/* A growing array of buffers and ids. */
typedef struct csv_rows {
    layout_buffer *bufs;
    char **ids;
    size_t *lines; /* line of each row, to name the first of two duplicates */
    size_t n, cap;
} csv_rows;

/* Appends a row.  Never fails: the rows take memory in proportion to the
 * file (each at least a few bytes of it), as reading it does. */
static void csv_rows_push(csv_rows *rows, layout_buffer b, const char *id, size_t idlen,
                          size_t line) {
    if (rows->n == rows->cap) {
        size_t cap = rows->cap ? 2 * rows->cap : 256;
        rows->bufs = xreallocarray(rows->bufs, cap, sizeof *rows->bufs);
        rows->ids = xreallocarray(rows->ids, cap, sizeof *rows->ids);
        rows->lines = xreallocarray(rows->lines, cap, sizeof *rows->lines);
        rows->cap = cap;
    }
    char *copy = xmalloc(idlen + 1);
    memcpy(copy, id, idlen);
    copy[idlen] = '\0';
    rows->bufs[rows->n] = b;
    rows->ids[rows->n] = copy;
    rows->lines[rows->n] = line;
    rows->n++;
}

/* Parses one data line into rows. */
static int csv_row(const csv_reader *r, const char *line, int kind, csv_rows *rows) {
    const char *const *names = csv_headers[kind];
    csv_field f[CSV_COLUMNS + 1];
    size_t nf = csv_split(line, f, CSV_COLUMNS);
    if (nf < CSV_COLUMNS)
        return csv_error(r, (size_t)(f[nf - 1].end - line) + 1,
                         "missing column '%s' (%zu of %d fields)", names[nf], nf, CSV_COLUMNS);
    if (nf > CSV_COLUMNS)
        return csv_error(r, f[CSV_COLUMNS].column, "too many fields (expected %d)", CSV_COLUMNS);
    if (f[0].begin == f[0].end) return csv_error(r, f[0].column, "%s: empty field", names[0]);
    uint64_t lower, upper, size;
    if (csv_number(r, &f[1], names[1], INT32_MAX, &lower) != 0 ||
        csv_number(r, &f[2], names[2], INT32_MAX, &upper) != 0 ||
        csv_number(r, &f[3], names[3], UINT64_MAX, &size) != 0)
        return -1;
    if (upper <= lower)
        return csv_error(r, f[2].column,
                         "empty lifetime: %s %" PRIu64 " <= %s %" PRIu64
                         " (lifetimes are half-open [%s, %s))",
                         names[2], upper, names[1], lower, names[1], names[2]);
    layout_buffer b = {size, (int32_t)lower, (int32_t)(upper - 1)};
    csv_rows_push(rows, b, f[0].begin, (size_t)(f[0].end - f[0].begin), r->line);
    return 0;
}

/* Sort record for finding duplicate ids. */
static int csv_id_cmp(const void *pa, const void *pb) {
    char *const *a = *(char **const *)pa;
    char *const *b = *(char **const *)pb;
    int c = strcmp(*a, *b);
    return c ? c : (a > b) - (a < b); /* equal ids: keep file order */
}

static int csv_check_duplicates(csv_reader *r, const csv_rows *rows) {
    char ***by_id = xmallocarray(rows->n, sizeof *by_id);
    for (size_t i = 0; i < rows->n; i++) by_id[i] = &rows->ids[i];
    qsort(by_id, rows->n, sizeof *by_id, csv_id_cmp);
    int rc = 0;
    for (size_t k = 1; k < rows->n && rc == 0; k++) {
        if (strcmp(*by_id[k - 1], *by_id[k]) == 0) {
            size_t first = (size_t)(by_id[k - 1] - rows->ids),
                   second = (size_t)(by_id[k] - rows->ids);
            r->line = rows->lines[second];
            rc = csv_error(r, 1, "duplicate id '%s' (first on line %zu)", rows->ids[second],
                           rows->lines[first]);
        }
    }
    free(by_id);
    return rc;
}

static void csv_rows_free(csv_rows *rows) {
    for (size_t i = 0; i < rows->n; i++) free(rows->ids[i]);
    free(rows->ids);
    free(rows->bufs);
    free(rows->lines);
}

int layout_csv_read(const char *path, layout_csv *out, char *err, size_t errlen) {
    csv_reader r = {path, 0, err, errlen};
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (err && errlen) snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    csv_rows rows = {0};
    char *line = NULL;
    size_t linecap = 0;
    int kind = -1, rc = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&line, &linecap, f)) >= 0) {
        r.line++;
        if ((size_t)len != strlen(line)) {
            rc = csv_error(&r, strlen(line) + 1, "NUL byte in line");
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (csv_blank(line)) continue;
        rc = kind < 0 ? csv_header(&r, line, &kind) : csv_row(&r, line, kind, &rows);
    }
    if (rc == 0 && ferror(f)) rc = csv_error(&r, 0, "read error: %s", strerror(errno));
    if (rc == 0 && kind < 0) {
        r.line = 1;
        rc = csv_error(&r, 0, "empty file (expected header 'id,lower,upper,size')");
    }
    if (rc == 0) rc = csv_check_duplicates(&r, &rows);
    free(line);
    fclose(f);
    if (rc != 0) {
        csv_rows_free(&rows);
        return -1;
    }
    free(rows.lines);
    out->bufs = rows.bufs;
    out->ids = rows.ids;
    out->n = rows.n;
    out->header_kind = kind;
    return 0;
}

int layout_csv_write(FILE *f, const layout_csv *csv, const uint64_t *offsets) {
    const char *const *names = csv_headers[csv->header_kind ? 1 : 0];
    if (fprintf(f, "%s,%s,%s,%s,offset\n", names[0], names[1], names[2], names[3]) < 0) return -1;
    for (size_t i = 0; i < csv->n; i++) {
        const layout_buffer *b = &csv->bufs[i];
        if (fprintf(f, "%s,%" PRId32 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 "\n", csv->ids[i],
                    b->start, (int64_t)b->end + 1, b->size, offsets[i]) < 0)
            return -1;
    }
    return ferror(f) ? -1 : 0;
}

void layout_csv_free(layout_csv *csv) {
    for (size_t i = 0; i < csv->n; i++) free(csv->ids[i]);
    free(csv->ids);
    free(csv->bufs);
    memset(csv, 0, sizeof *csv);
}
