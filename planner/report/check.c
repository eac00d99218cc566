/* `roamc check MODEL PLAN`: shared/tools/check_plan.py in C.
 *
 * Trusts nothing in the plan but its claims: sizes come from the model,
 * liveness from the schedule, both peaks from the buffers.  The rules and
 * their order follow check_plan.py so that both give the same verdict; the
 * one difference is that a node's reads from inside its subgraphs count as
 * reads here (check_plan.py does not look into subgraphs).
 */
#include "check.h"
#include "plan_model.h"
#include "planner.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "graph_streams.h"
#include "layout.h"

#define CHECK_MAX_SHOWN 20
/* Stream ids this check takes: happens-before keeps a clock per stream id
 * and op, so an absurd id would be an absurd allocation. */
#define CHECK_MAX_STREAM 4096

typedef struct check_ctx {
    FILE *out;
    size_t problems;
} check_ctx;

static void check_problem(check_ctx *c, const char *fmt, ...) {
    if (c->problems < CHECK_MAX_SHOWN) {
        va_list ap;
        va_start(ap, fmt);
        fputs("INVALID: ", c->out);
        vfprintf(c->out, fmt, ap);
        fputc('\n', c->out);
        va_end(ap);
    }
    c->problems++;
}

/* Ends a group of checks: 1 when problems were found (and listed). */
static int check_verdict(check_ctx *c) {
    if (!c->problems) return 0;
    if (c->problems > CHECK_MAX_SHOWN)
        fprintf(c->out, "INVALID: ... and %zu more\n", c->problems - CHECK_MAX_SHOWN);
    return 1;
}

/* Reads an integer field; false (and a problem) when absent or not an integer. */
static bool check_int(check_ctx *c, json_t *obj, const char *key, size_t bi, long long *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        check_problem(c, "buffer %zu lacks '%s'", bi, key);
        return false;
    }
    if (!json_is_integer(v)) {
        check_problem(c, "buffer %zu: '%s' is not an integer", bi, key);
        return false;
    }
    *out = json_integer_value(v);
    return true;
}

typedef struct check_buffer {
    long long size, offset, start, end;
    bool host; /* a host buffer (an Offload's output): no offset, no device bytes */
} check_buffer;

typedef struct check_mutation_ctx {
    check_ctx *c;
    const graph *g;
    const int *step_of;
    const graph_hb *hb;
} check_mutation_ctx;

/* " (streams 0 and 2: no wait orders them)" when a and b run on two
 * streams, else "": what a message adds for a plan of several streams. */
static const char *check_cross(const graph_hb *hb, int a, int b, char *buf, size_t len) {
    buf[0] = 0;
    if (hb->stream[a] != hb->stream[b])
        snprintf(buf, len, " (streams %d and %d: no wait orders them)", hb->stream[a],
                 hb->stream[b]);
    return buf;
}

/* "node 171 (addcdiv_)" */
static const char *check_op(const graph *g, int op, char *buf, size_t len) {
    snprintf(buf, len, "node %d (%s)", op, g->model->nodes[op].op_type);
    return buf;
}

/* One pair of the mutation order: the schedule must run `before` first.
 * The message names the write, the other access and the tensor (view)
 * through which that access reaches the storage. */
static int check_mutation(void *ctx, const graph_mutation *mu) {
    check_mutation_ctx *mc = ctx;
    if (graph_hb_before(mc->hb, mu->before, mu->after)) return 0;
    const fe_model *m = mc->g->model;
    char w[160], r[160], x[64];
    check_cross(mc->hb, mu->before, mu->after, x, sizeof x);
    int other = mu->writer == mu->before ? mu->after : mu->before;
    check_op(mc->g, mu->writer, w, sizeof w);
    check_op(mc->g, other, r, sizeof r);
    const char *written = m->values[mu->written].name, *read = m->values[mu->read].name;
    bool other_writes = false; /* two writes in a row */
    const fe_node *on = &m->nodes[other];
    for (size_t k = 0; on->inplace && k < on->n_outputs; k++)
        if (on->alias[k] >= 0 && on->inputs[on->alias[k]] >= 0 &&
            mc->g->storage_of[on->inputs[on->alias[k]]] == mu->storage)
            other_writes = true;
    char via[320];
    if (mu->read == mu->written)
        snprintf(via, sizeof via, "'%s' itself", read);
    else
        snprintf(via, sizeof via, "the view '%s'", read);
    if (other_writes)
        check_problem(mc->c,
                      "%s overwrites the storage of '%s' in place at step %d, before %s overwrites "
                      "it at step %d; "
                      "the file has %s's write first%s",
                      r, written, mc->step_of[other], w, mc->step_of[mu->writer], w, x);
    else if (mu->writer == mu->after)
        check_problem(mc->c,
                      "%s overwrites '%s' in place at step %d, before %s reads that storage "
                      "through %s at step %d; "
                      "the file reads it before the write%s",
                      w, written, mc->step_of[mu->writer], r, via, mc->step_of[other], x);
    else
        check_problem(mc->c,
                      "%s reads the storage of '%s' through %s at step %d, before %s overwrites it "
                      "in place at "
                      "step %d; the file reads it after the write%s",
                      r, written, via, mc->step_of[other], w, mc->step_of[mu->writer], x);
    return 0;
}

/* The input symbols of m as "N=5, seq=128" (for messages), into buf. */
static void check_symbols(const fe_model *m, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < m->n_symbols && off < len; i++) {
        if (m->symbols[i].kind != FE_SYMBOL_INPUT) continue;
        int w = snprintf(buf + off, len - off, "%s%s=%lld", off ? ", " : "", m->symbols[i].name,
                         (long long)m->symbols[i].value);
        if (w < 0) break;
        off += (size_t)w;
    }
    if (!buf[0]) snprintf(buf, len, "none");
}

/* Which model the plan was made for (PLAN_FORMAT.md "model_sha256",
 * "sizes_sha256"): another file's plan, or the same file's sized by other
 * bindings, is refused before anything else, since every other check would
 * then compare the sizes of two different graphs.  A plan that records no
 * digest (written before roamc did, or by another tool) gets a note and the
 * remaining checks.  Returns 1 when the plan is for another model, else 0. */
static int check_identity(const fe_model *m, json_t *plan, const char *plan_path, check_ctx *c) {
    char model_hex[65], sizes_hex[65];
    plan_model_digests(m, model_hex, sizes_hex);
    json_t *named = json_object_get(plan, "model");
    const char *for_model = json_is_string(named) ? json_string_value(named) : "?";
    const char *keys[2] = {"model_sha256", "sizes_sha256"};
    const char *have[2] = {model_hex, sizes_hex};
    for (int k = 0; k < 2; k++) {
        json_t *dg = json_object_get(plan, keys[k]);
        if (!dg) {
            fprintf(c->out,
                    "note: %s records no %s (written by an older roamc or another tool): not "
                    "checked that "
                    "it was made for %s%s\n",
                    plan_path, keys[k], m->path, k ? " as sized now" : "");
            continue;
        }
        const char *v = json_is_string(dg) ? json_string_value(dg) : "";
        if (strlen(v) != 64 || strspn(v, "0123456789abcdef") != 64) {
            check_problem(c, "%s must be 64 lowercase hex digits", keys[k]);
            return 1;
        }
        if (strcmp(v, have[k]) == 0) continue;
        const char *from = fe_meta(m, "roamc.derived_from");
        if (k == 0 && from && strcmp(from, m->path) == 0) {
            /* the step --train derived here: the file itself is not compared */
            check_problem(c,
                          "the plan was made for another training step: its SHA-256 is %.16s..., "
                          "the step --train derives from %s with the options given %.16s...: "
                          "give the --train options (--loss, --optimizer, --frozen) and "
                          "bindings the plan was made with",
                          v, m->path, have[k]);
        } else if (k == 0 && strcmp(for_model, m->path) == 0) {
            check_problem(c,
                          "the plan was made for other contents of %s (changed since?): it "
                          "records SHA-256 %.16s..., the file has %.16s...",
                          m->path, v, have[k]);
        } else if (k == 0) {
            check_problem(c,
                          "the plan was made for another model: it names '%s', SHA-256 %.16s..., "
                          "but %s has SHA-256 %.16s...",
                          for_model, v, m->path, have[k]);
        } else {
            char sym[512];
            check_symbols(m, sym, sizeof sym);
            check_problem(c,
                          "the plan was made for %s sized otherwise (other --input-shape/--dim "
                          "bindings): its "
                          "sizes_sha256 is %.16s..., this check sizes the model to %.16s... (input "
                          "symbols: %s)",
                          m->path, v, have[k], sym);
        }
        return 1;
    }
    return 0;
}

/* Format, version, the model the plan is for (check_identity) and align
 * (*align, 1 when absent).  Returns 0, or 1 with the problems listed. */
static int check_header(check_ctx *c, const fe_model *m, json_t *plan, const char *plan_path,
                        long long *align) {
    json_t *fmt = json_object_get(plan, "format"), *ver = json_object_get(plan, "version");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "roam-plan") != 0 ||
        !json_is_integer(ver) || json_integer_value(ver) < 1 || json_integer_value(ver) > 2) {
        check_problem(c, "plan must have format 'roam-plan' and version 1 or 2");
        return check_verdict(c);
    }
    if (json_integer_value(ver) == 1 &&
        (json_object_get(plan, "stream") || json_object_get(plan, "streams") ||
         json_object_get(plan, "waits"))) {
        check_problem(c, "streams and waits need version 2");
        return check_verdict(c);
    }
    if (check_identity(m, plan, plan_path, c)) {
        check_verdict(c);
        return 1;
    }
    *align = 1;
    json_t *al = json_object_get(plan, "align");
    if (al) {
        if (!json_is_integer(al) || json_integer_value(al) < 1) {
            check_problem(c, "align must be a positive integer");
            return check_verdict(c);
        }
        *align = json_integer_value(al);
    }
    return 0;
}

/* The streams of a version 2 plan (DESIGN.md "Several streams"): a stream
 * id per step ("stream"; absent: all on stream 0, and then no waits), ids
 * that "streams" declares when it declares any, and waits [a, b] with a
 * before b in the schedule; then happens-before into *hb.  Returns 0, or 1
 * with the problem listed (*hb then unset). */
static int check_streams(check_ctx *c, const graph *g, json_t *plan, const int *step_of,
                         const int *order, graph_hb *hb) {
    size_t n = g->n_ops;
    json_t *per_step = json_object_get(plan, "stream"), *waits = json_object_get(plan, "waits");
    if (!per_step) {
        if (waits && (!json_is_array(waits) || json_array_size(waits))) {
            check_problem(c, "waits given without a stream per step");
            return check_verdict(c);
        }
        char err[256];
        graph_hb_build(hb, &(graph_hb_order){n, order, NULL, 1, NULL, 0}, err, sizeof err);
        return 0;
    }
    int *stream = xmallocarray(n ? n : 1, sizeof *stream);
    bool ok = json_is_array(per_step) && json_array_size(per_step) == n;
    int n_streams = 1;
    for (size_t s = 0; ok && s < n; s++) {
        json_t *v = json_array_get(per_step, s);
        ok = json_is_integer(v) && json_integer_value(v) >= 0 &&
             json_integer_value(v) < CHECK_MAX_STREAM;
        if (ok) stream[s] = (int)json_integer_value(v);
        if (ok && stream[s] + 1 > n_streams) n_streams = stream[s] + 1;
    }
    if (!ok) {
        free(stream);
        check_problem(c,
                      "'stream' must give a stream id (an integer >= 0) for each step of the "
                      "schedule (this check takes ids below %d)",
                      CHECK_MAX_STREAM);
        return check_verdict(c);
    }
    json_t *declared = json_object_get(plan, "streams");
    if (json_is_array(declared) && json_array_size(declared)) {
        for (size_t s = 0; s < n; s++) {
            bool found = false;
            for (size_t k = 0; k < json_array_size(declared) && !found; k++) {
                json_t *id = json_object_get(json_array_get(declared, k), "id");
                found = json_is_integer(id) && json_integer_value(id) == stream[s];
            }
            if (!found) {
                check_problem(c, "'stream' uses stream ids that 'streams' does not declare: %d",
                              stream[s]);
                free(stream);
                return check_verdict(c);
            }
        }
    }
    size_t nw = json_is_array(waits) ? json_array_size(waits) : 0;
    int *w = xmallocarray(2 * nw + 1, sizeof *w);
    for (size_t k = 0; k < nw; k++) {
        json_t *p = json_array_get(waits, k);
        json_t *a = json_array_get(p, 0), *b = json_array_get(p, 1);
        if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_integer(a) ||
            !json_is_integer(b) || json_integer_value(a) < 0 || json_integer_value(b) < 0 ||
            (size_t)json_integer_value(a) >= n || (size_t)json_integer_value(b) >= n) {
            check_problem(c, "each wait must be [a, b], two node indices (wait %zu is not)", k);
            break;
        }
        w[2 * k] = (int)json_integer_value(a), w[2 * k + 1] = (int)json_integer_value(b);
        if (step_of[w[2 * k]] >= step_of[w[2 * k + 1]]) {
            check_problem(c, "wait [%d, %d]: node %d does not come before node %d in the schedule",
                          w[2 * k], w[2 * k + 1], w[2 * k], w[2 * k + 1]);
            break;
        }
    }
    if (waits && !json_is_array(waits)) check_problem(c, "'waits' must be a list of [a, b] pairs");
    char err[256];
    if (!c->problems)
        graph_hb_build(hb, &(graph_hb_order){n, order, stream, n_streams, w, nw}, err, sizeof err);
    free(stream);
    free(w);
    return check_verdict(c);
}

/* The schedule: a permutation of the nodes (order[step], step_of[node]),
 * its streams (check_streams, into *hb), topological under happens-before,
 * and in the mutation order of every storage written in place (DESIGN.md
 * "Ordering edges").  Returns 0, or 1 with the problems listed. */
static int check_schedule(check_ctx *c, const graph *g, json_t *plan, int *step_of, int *order,
                          graph_hb *hb, bool *built) {
    const fe_model *m = g->model;
    size_t n = g->n_ops;
    json_t *sched = json_object_get(plan, "schedule");
    for (size_t i = 0; i < n; i++) step_of[i] = -1;
    bool perm = json_is_array(sched) && json_array_size(sched) == n;
    for (size_t s = 0; perm && s < n; s++) {
        json_t *v = json_array_get(sched, s);
        long long idx = json_is_integer(v) ? json_integer_value(v) : -1;
        if (idx < 0 || (size_t)idx >= n || step_of[idx] >= 0)
            perm = false;
        else
            step_of[idx] = (int)s, order[s] = (int)idx;
    }
    if (!perm) {
        check_problem(c, "schedule must list every node index 0..%zu exactly once", n - 1);
        return check_verdict(c);
    }
    if (check_streams(c, g, plan, step_of, order, hb)) return 1;
    *built = true;

    /* topological: every read after its producer, on its stream or through waits */
    for (size_t s = 0; s < n; s++) {
        const fe_node *nd = &m->nodes[order[s]];
        for (size_t k = 0; k < nd->n_inputs; k++) {
            int t = nd->inputs[k];
            if (t < 0 || m->values[t].producer < 0) continue;
            char x[64];
            if (!graph_hb_before(hb, m->values[t].producer, order[s]))
                check_problem(c, "node %d (step %zu) reads '%s' before its producer runs%s",
                              order[s], s, m->values[t].name,
                              check_cross(hb, m->values[t].producer, order[s], x, sizeof x));
        }
    }
    if (check_verdict(c)) return 1;

    /* walked by the same rule graph_build makes its edges from, so that a
     * reader through a view of the storage counts; check_mutation never
     * stops the walk */
    check_mutation_ctx mc = {c, g, step_of, hb};
    graph_mutation_order(g, check_mutation, &mc);
    return check_verdict(c);
}

/* Tensor t is made by an ai.roamc Offload: it lives in host memory. */
static bool check_is_offloaded(const graph *g, int t) {
    return g->storages[g->storage_of[t]].host;
}

/* The plan's buffers into bufs[0..nb) and, for each tensor they name,
 * buf_of[value] (-1: none): every field present, sizes and lifetimes in
 * range, offsets aligned, no tensor twice, none larger than its buffer.
 * Returns 0, or 1 after a buffer too malformed to read further (listed);
 * the other problems are listed for the caller's verdict. */
static int check_read_buffers(check_ctx *c, const graph *g, json_t *jb, long long align,
                              check_buffer *bufs, int *buf_of) {
    const fe_model *m = g->model;
    for (size_t bi = 0; bi < json_array_size(jb); bi++) {
        json_t *b = json_array_get(jb, bi);
        check_buffer *B = &bufs[bi];
        json_t *tens = json_is_object(b) ? json_object_get(b, "tensors") : NULL;
        if (!json_is_object(b) || !json_is_array(tens)) {
            check_problem(c, "buffer %zu lacks 'tensors'", bi);
            return check_verdict(c);
        }
        if (!check_int(c, b, "size", bi, &B->size) || !check_int(c, b, "offset", bi, &B->offset) ||
            !check_int(c, b, "start", bi, &B->start) || !check_int(c, b, "end", bi, &B->end))
            return check_verdict(c);
        B->host = false;
        if (B->size < 0 || B->offset < 0 ||
            !(0 <= B->start && B->start <= B->end && B->end < (long long)g->n_ops))
            check_problem(
                c, "buffer %zu has a negative size/offset or a lifetime outside the schedule", bi);
        if (align > 1 && B->offset % align)
            check_problem(c, "buffer %zu offset %lld is not a multiple of align %lld", bi,
                          B->offset, align);
        for (size_t k = 0; k < json_array_size(tens); k++) {
            json_t *tn = json_array_get(tens, k);
            int t = json_is_string(tn) ? fe_find_value(m, json_string_value(tn)) : -1;
            if (t < 0) continue; /* not a value of the model: nothing to size or place */
            if (buf_of[t] >= 0)
                check_problem(c, "tensor '%s' is in buffers %d and %zu", m->values[t].name,
                              buf_of[t], bi);
            buf_of[t] = (int)bi;
            if (check_is_offloaded(g, t))
                check_problem(c,
                              "tensor '%s' lives in host memory (an Offload makes it) but is in "
                              "device buffer %zu",
                              m->values[t].name, bi);
            if ((long long)m->values[t].bytes > B->size)
                check_problem(c, "buffer %zu (%lld bytes) is smaller than tensor '%s' (%llu bytes)",
                              bi, B->size, m->values[t].name,
                              (unsigned long long)m->values[t].bytes);
        }
    }
    return 0;
}

/* The plan's host_buffers (DESIGN.md "A step that fits") into host[0..nh)
 * and buf_of (indices first + i): the fields of a buffer less the offset,
 * every tensor made by an ai.roamc Offload, none in two buffers, none
 * larger than its buffer.  Returns 0, or 1 after one too malformed to
 * read further (listed); the rest are listed for the caller's verdict. */
static int check_read_host_buffers(check_ctx *c, const graph *g, json_t *jh, size_t first,
                                   check_buffer *host, int *buf_of) {
    const fe_model *m = g->model;
    for (size_t hi = 0; hi < json_array_size(jh); hi++) {
        json_t *b = json_array_get(jh, hi);
        check_buffer *B = &host[hi];
        json_t *tens = json_is_object(b) ? json_object_get(b, "tensors") : NULL;
        if (!json_is_object(b) || !json_is_array(tens)) {
            check_problem(c, "host buffer %zu lacks 'tensors'", hi);
            return check_verdict(c);
        }
        if (!check_int(c, b, "size", hi, &B->size) || !check_int(c, b, "start", hi, &B->start) ||
            !check_int(c, b, "end", hi, &B->end))
            return check_verdict(c);
        B->offset = 0, B->host = true;
        if (B->size < 0 || !(0 <= B->start && B->start <= B->end && B->end < (long long)g->n_ops))
            check_problem(
                c, "host buffer %zu has a negative size or a lifetime outside the schedule", hi);
        for (size_t k = 0; k < json_array_size(tens); k++) {
            json_t *tn = json_array_get(tens, k);
            int t = json_is_string(tn) ? fe_find_value(m, json_string_value(tn)) : -1;
            if (t < 0) continue;
            if (!check_is_offloaded(g, t))
                check_problem(c,
                              "tensor '%s' is in host buffer %zu but no ai.roamc Offload makes it",
                              m->values[t].name, hi);
            if (buf_of[t] >= 0)
                check_problem(c, "tensor '%s' is in buffers %d and host buffer %zu",
                              m->values[t].name, buf_of[t], hi);
            buf_of[t] = (int)(first + hi);
            if ((long long)m->values[t].bytes > B->size)
                check_problem(
                    c, "host buffer %zu (%lld bytes) is smaller than tensor '%s' (%llu bytes)", hi,
                    B->size, m->values[t].name, (unsigned long long)m->values[t].bytes);
        }
    }
    return 0;
}

/* Lifetimes against the schedule: every tensor an operator touches is in a
 * buffer live at that step, graph outputs live to the end, graph inputs
 * from step 0; and tensors share a buffer only through aliasing nodes (one
 * storage each).  Lists the problems for the caller's verdict. */
static void check_lifetimes(check_ctx *c, const graph *g, const int *order,
                            const check_buffer *bufs, size_t nb, const int *buf_of) {
    const fe_model *m = g->model;
    size_t n = g->n_ops;
    for (size_t s = 0; s < n; s++) {
        const fe_node *nd = &m->nodes[order[s]];
        for (size_t k = 0; k < nd->n_inputs + nd->n_outputs; k++) {
            int t = k < nd->n_inputs ? nd->inputs[k] : nd->outputs[k - nd->n_inputs];
            if (t < 0) continue;
            if (buf_of[t] < 0) {
                check_problem(c, "tensor '%s' (node %d) is in no buffer", m->values[t].name,
                              order[s]);
                continue;
            }
            const check_buffer *B = &bufs[buf_of[t]];
            /* host memory is touched by its Offload (written) and Reloads
             * (read) alone: a device op cannot read it */
            bool copy = graph_is_roamc_op(nd, k < nd->n_inputs ? "Reload" : "Offload");
            if (B->host && !copy)
                check_problem(c,
                              "node %d (%s) %s '%s', which lives in host memory: only an "
                              "ai.roamc %s may",
                              order[s], nd->op_type, k < nd->n_inputs ? "reads" : "writes",
                              m->values[t].name,
                              k < nd->n_inputs ? "Reload read it" : "Offload make it");
            if (!(B->start <= (long long)s && (long long)s <= B->end))
                check_problem(
                    c, "tensor '%s' is used at step %zu outside its buffer's lifetime [%lld,%lld]",
                    m->values[t].name, s, B->start, B->end);
        }
    }
    for (size_t i = 0; i < m->n_outputs; i++) {
        int t = m->outputs[i];
        if (buf_of[t] >= 0 && bufs[buf_of[t]].end != (long long)n - 1)
            check_problem(c, "graph output '%s' is freed before the end", m->values[t].name);
    }
    for (size_t i = 0; i < m->n_inputs; i++) {
        int t = m->inputs[i];
        if ((m->values[t].kind & FE_GRAPH_INPUT) && buf_of[t] >= 0 && bufs[buf_of[t]].start != 0)
            check_problem(c, "graph input '%s' is not live from step 0", m->values[t].name);
    }
    int *first_storage = xmallocarray(nb, sizeof *first_storage);
    for (size_t bi = 0; bi < nb; bi++) first_storage[bi] = -1;
    for (size_t t = 0; t < m->n_values; t++) {
        int bi = buf_of[t];
        if (bi < 0) continue;
        if (first_storage[bi] < 0)
            first_storage[bi] = g->storage_of[t];
        else if (first_storage[bi] != g->storage_of[t] && first_storage[bi] != -2) {
            check_problem(c, "buffer %d holds tensors no aliasing node ties together (e.g. '%s')",
                          bi, m->values[t].name);
            first_storage[bi] = -2;
        }
    }
    free(first_storage);
}

/* What the memory rule between streams needs (check_shared_addresses). */
typedef struct check_shared {
    const graph *g;
    const graph_hb *hb;
    const int *order;
    const int *buf_of;
} check_shared;

typedef struct check_clash_ctx {
    check_ctx *c;
    const graph_hb *hb;
} check_clash_ctx;

/* One pair of buffers that share addresses and that no order separates. */
static int check_clash(void *ctx, int earlier, int later, int n, int f) {
    check_clash_ctx *cc = ctx;
    check_problem(cc->c,
                  "buffers %d and %d share addresses, but node %d (stream %d, touching %d) is not "
                  "ordered before node %d (stream %d, first to touch %d)",
                  earlier, later, n, cc->hb->stream[n], earlier, f, cc->hb->stream[f], later);
    return cc->c->problems > CHECK_MAX_SHOWN;
}

/* DESIGN.md "Several streams", the memory rule: two buffers that share an
 * address are ordered, every node touching the earlier happening before
 * the first touching the later (graph_hb_check_layout, as check_plan.py
 * walks it).  Only for plans on more than one stream.  Returns 0, or 1
 * with the problems listed. */
static int check_shared_addresses(check_ctx *c, const check_shared *s, const check_buffer *bufs,
                                  size_t nb, const uint64_t *offs) {
    const graph *g = s->g;
    const fe_model *m = g->model;
    bool several = false;
    for (size_t i = 1; i < g->n_ops && !several; i++)
        several = s->hb->stream[s->order[i]] != s->hb->stream[s->order[0]];
    if (!several) return 0;
    /* the ops touching each device buffer, through the tensors they read and write */
    size_t *start = xcalloc(nb + 1, sizeof *start);
    for (int pass = 0; pass < 2; pass++) {
        size_t *fill = pass ? xmallocarray(nb + 1, sizeof *fill) : NULL;
        int *ops = pass ? xmallocarray(start[nb] + 1, sizeof *ops) : NULL;
        if (pass) memcpy(fill, start, (nb + 1) * sizeof *fill);
        for (size_t op = 0; op < g->n_ops; op++) {
            const fe_node *nd = &m->nodes[op];
            for (size_t k = 0; k < nd->n_inputs + nd->n_outputs; k++) {
                int t = k < nd->n_inputs ? nd->inputs[k] : nd->outputs[k - nd->n_inputs];
                if (t < 0 || s->buf_of[t] < 0 || (size_t)s->buf_of[t] >= nb) continue;
                if (pass)
                    ops[fill[s->buf_of[t]]++] = (int)op;
                else
                    start[s->buf_of[t] + 1]++;
            }
        }
        if (!pass) {
            for (size_t b = 0; b < nb; b++) start[b + 1] += start[b];
            continue;
        }
        graph_hb_touches t;
        graph_hb_touches_build(s->hb, nb, start, ops, &t);
        uint64_t *size = xmallocarray(nb + 1, sizeof *size);
        int32_t *bstart = xmallocarray(nb + 1, sizeof *bstart);
        for (size_t b = 0; b < nb; b++)
            size[b] = (uint64_t)bufs[b].size, bstart[b] = (int32_t)bufs[b].start;
        check_clash_ctx cc = {c, s->hb};
        graph_hb_check_layout(s->hb, &t, &(graph_hb_buffers){size, bstart, NULL, offs}, check_clash,
                              &cc);
        graph_hb_touches_free(&t);
        free(size);
        free(bstart);
        free(fill);
        free(ops);
    }
    free(start);
    return check_verdict(c);
}

/* Addresses and peaks: no two buffers live at the same time overlap, and
 * the peaks the plan claims are those of its buffers; then the VALID line.
 * Returns 0 (valid), or 1 with the problems listed. */
static int check_addresses(check_ctx *c, json_t *plan, const char *plan_path, size_t n,
                           const check_buffer *bufs, size_t nb, const check_shared *s) {
    layout_buffer *lb = xmallocarray(nb, sizeof *lb);
    uint64_t *offs = xmallocarray(nb, sizeof *offs);
    for (size_t bi = 0; bi < nb; bi++) {
        lb[bi] = (layout_buffer){(uint64_t)bufs[bi].size, (int32_t)bufs[bi].start,
                                 (int32_t)bufs[bi].end};
        offs[bi] = (uint64_t)bufs[bi].offset;
    }
    int rc = 1;
    size_t x, y;
    if (layout_validate(lb, nb, offs, 1, &x, &y)) {
        check_problem(c, "buffers %zu and %zu overlap in address while both live", x < y ? x : y,
                      x < y ? y : x);
        rc = check_verdict(c);
        goto done;
    }
    if (check_shared_addresses(c, s, bufs, nb, offs)) goto done;
    uint64_t theoretical = layout_live_peak(lb, nb), actual = layout_height(lb, nb, offs);
    json_t *peak = json_object_get(plan, "peak");
    json_t *pt = json_object_get(peak, "theoretical"), *pa = json_object_get(peak, "actual");
    if (!json_is_integer(pt) || (uint64_t)json_integer_value(pt) != theoretical)
        check_problem(c, "plan claims theoretical peak %lld, buffers give %llu",
                      json_is_integer(pt) ? json_integer_value(pt) : -1LL,
                      (unsigned long long)theoretical);
    if (!json_is_integer(pa) || (uint64_t)json_integer_value(pa) != actual)
        check_problem(c, "plan claims actual peak %lld, buffers give %llu",
                      json_is_integer(pa) ? json_integer_value(pa) : -1LL,
                      (unsigned long long)actual);
    if ((rc = check_verdict(c))) goto done;
    fprintf(c->out,
            "VALID %s: %zu nodes, %zu buffers, theoretical %llu B, actual %llu B, fragmentation "
            "%.3f%%\n",
            plan_path, n, nb, (unsigned long long)theoretical, (unsigned long long)actual,
            theoretical ? 100.0 * ((double)actual - (double)theoretical) / (double)theoretical
                        : 0.0);
done:
    free(lb);
    free(offs);
    return rc;
}

/* The checks of shared/tools/check_plan.py, group by group: each group
 * lists its problems and the first group with any ends the check. */
static int check_plan_json(const graph *g, json_t *plan, const char *plan_path, FILE *out) {
    check_ctx c = {out, 0};
    long long align = 1;
    if (check_header(&c, g->model, plan, plan_path, &align)) return 1;
    int *step_of = xmallocarray(g->n_ops, sizeof *step_of);
    int *order = xmallocarray(g->n_ops, sizeof *order);
    int *buf_of = xmallocarray(g->model->n_values, sizeof *buf_of);
    check_buffer *bufs = NULL;
    graph_hb hb;
    bool hb_built = false;
    int rc = check_schedule(&c, g, plan, step_of, order, &hb, &hb_built);
    json_t *jb = json_object_get(plan, "buffers"), *jh = json_object_get(plan, "host_buffers");
    if (rc == 0 && !json_is_array(jb)) {
        check_problem(&c, "plan has no buffers list");
        rc = check_verdict(&c);
    }
    if (rc == 0 && jh && !json_is_array(jh)) {
        check_problem(&c, "host_buffers must be a list");
        rc = check_verdict(&c);
    }
    if (rc == 0) {
        /* device buffers first, then host buffers: one index for buf_of */
        size_t nb = json_array_size(jb), nh = json_array_size(jh);
        bufs = xcalloc(nb + nh, sizeof *bufs);
        for (size_t i = 0; i < g->model->n_values; i++) buf_of[i] = -1;
        rc = check_read_buffers(&c, g, jb, align, bufs, buf_of);
        if (rc == 0) rc = check_read_host_buffers(&c, g, jh, nb, bufs + nb, buf_of);
        if (rc == 0) {
            check_lifetimes(&c, g, order, bufs, nb + nh, buf_of);
            rc = check_verdict(&c);
        }
        check_shared sh = {g, &hb, order, buf_of};
        if (rc == 0) rc = check_addresses(&c, plan, plan_path, g->n_ops, bufs, nb, &sh);
    }
    if (hb_built) graph_hb_free(&hb);
    free(step_of);
    free(order);
    free(buf_of);
    free(bufs);
    return rc;
}

int plan_check_file(const char *model_path, const fe_options *fopt, const fe_train_options *train,
                    const char *plan_path, FILE *out, FILE *err) {
    char msg[2048], path[4096], note[4096];
    json_t *plan = plan_json_read(plan_path, msg, sizeof msg);
    if (!plan) {
        fprintf(err, "roamc: %s\n", msg);
        return 2;
    }
    /* the model sized as the plan records (its bindings), and for a plan of
     * a step --train derived, that step derived again */
    plan_model_request r = {.plan_path = plan_path,
                            .plan = plan,
                            .model_path = model_path,
                            .bindings = fopt,
                            .train = train,
                            .align = 1};
    planner_step step;
    plan_model_found found = {path, note, sizeof path < sizeof note ? sizeof path : sizeof note};
    if (plan_model_load(&r, &step, &found, msg, sizeof msg)) {
        fprintf(err, "roamc: %s\n", msg);
        json_decref(plan);
        return 2;
    }
    if (note[0]) fprintf(out, "note: %s\n", note);
    int rc = check_plan_json(&step.g, plan, plan_path, out);
    json_decref(plan);
    planner_step_free(&step);
    return rc;
}
