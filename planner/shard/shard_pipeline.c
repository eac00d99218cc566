/* --pipeline-stages: the step cut into stages, each stage's step written
 * with the step editor (its microbatches in the schedule's order, Send and
 * Recv at the cuts) and planned.  What it writes and why: pipeline.h. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base.h"
#include "edit.h"
#include "fit.h"
#include "shard_internal.h"

#define PP_NAME 1024
#define PP_ATEN "org.pytorch.aten"
#define PP_MAX_DEST 8
#define PP_DIV_SUFFIX ".div"

enum pp_pass { PP_NONE = -1, PP_FWD = 0, PP_BWD = 1, PP_OPT = 2 };

/* The step, cut: shared by every stage's emission. */
typedef struct pp_work {
    const pipe_request *r;
    const graph *g;
    const fe_model *m;
    long P, M;
    size_t fwd_end, last_grad; /* the loss's producer, the last gradient's */
    int *pass;                 /* per op: enum pp_pass */
    int *stage;                /* per op: its stage (optimizer ops: their parameter's first) */
    int *tag;                  /* per op after last_grad: the parameter it updates */
    size_t n;                  /* parameters */
    int *pv, *gv;              /* per parameter: value, gradient */
    int *pfirst, *plast;       /* per parameter: stages whose forward reads it; -1 none */
    int *param_of;             /* per value: the parameter it is, -1 */
    int *grad_in;              /* per parameter and stage (n x P): the gradient that stage keeps */
    int *tied_add;             /* per parameter: the add of two stages' parts (dropped), -1 */
    int loss_v, seed_v;        /* M > 1: the loss and its ones_like seed, each divided by M;
                                  -1 when M == 1 */
    int *states, *state_of;
    size_t n_states;
    bool *is_data, *is_buffer; /* per value */
    int *fwd_stage;            /* per value made in the forward: its producer's stage; -1 */
    int *last_fwd_stage;       /* per value: the last stage whose forward reads it; -1 */
    size_t *cut;               /* P: the first forward op of each stage */
    int *dest;                 /* per value: PP_MAX_DEST stages other than its maker's reading it */
    uint8_t *n_dest;           /* per value: how many */
    bool *read_later;          /* per value: read by its stage in the other pass */
    bool *pure_bwd;            /* per op: a backward op placed by the gradients it reads alone */
    double *op_sec;            /* per op, h100 */
    char *err;
    size_t errlen;
} pp_work;

const char *pipe_schedule_name(int schedule) {
    return schedule == PIPE_GPIPE ? "gpipe" : "1f1b";
}

int pipe_schedule_parse(const char *s, int *schedule) {
    if (strcmp(s, "1f1b") == 0) return *schedule = PIPE_1F1B, 0;
    if (strcmp(s, "gpipe") == 0) return *schedule = PIPE_GPIPE, 0;
    return -1;
}

int pipe_check(const pipe_options *po, char *err, size_t errlen) {
    if (po->stages < 1 || po->stages > PIPE_MAX_STAGES)
        return roamc_errorf(err, errlen, "--pipeline-stages is 1 to %d, not %ld", PIPE_MAX_STAGES,
                            po->stages);
    if (po->microbatches < 0 || po->microbatches > PIPE_MAX_MICROBATCHES)
        return roamc_errorf(err, errlen, "--microbatches is 1 to %d, not %ld",
                            PIPE_MAX_MICROBATCHES, po->microbatches);
    if (po->stage >= po->stages)
        return roamc_errorf(err, errlen,
                            "--stage %ld is not a stage of --pipeline-stages %ld (0 to %ld)",
                            po->stage, po->stages, po->stages - 1);
    return 0;
}

/* ------------------------------------------------------------ the step */

static int pp_meta_values(pp_work *w, const char *key, bool required, int **out, size_t *n) {
    sh_meta_source src = {w->m, w->r->step_name, "--pipeline-stages", w->err, w->errlen};
    return sh_meta_list(&src, key, required, out, n);
}

/* Marks the values metadata key names in *mark (per value). */
static int pp_mark(pp_work *w, const char *key, bool *mark) {
    int *v;
    size_t n;
    if (pp_meta_values(w, key, false, &v, &n)) return free(v), -1;
    for (size_t k = 0; k < n; k++) mark[v[k]] = true;
    free(v);
    return 0;
}

/* Parameters, gradients, states, data inputs, buffers; the passes. */
static int pp_read_step(pp_work *w) {
    const fe_model *m = w->m;
    const char *loss = fe_meta(m, "roamc.loss");
    int lv = loss ? fe_find_value(m, loss) : -1;
    if (lv < 0 || m->values[lv].producer < 0)
        return roamc_errorf(w->err, w->errlen,
                            "%s: --pipeline-stages needs metadata roamc.loss naming the loss a "
                            "node makes: the forward pass it cuts ends there",
                            w->r->step_name);
    w->fwd_end = (size_t)m->values[lv].producer;
    size_t ng;
    if (pp_meta_values(w, "roamc.parameters", true, &w->pv, &w->n) ||
        pp_meta_values(w, "roamc.gradients", true, &w->gv, &ng))
        return -1;
    if (ng != w->n)
        return roamc_errorf(w->err, w->errlen,
                            "%s: metadata roamc.parameters names %zu values, roamc.gradients %zu: "
                            "--pipeline-stages needs one gradient per parameter, in the same order",
                            w->r->step_name, w->n, ng);
    w->param_of = xmallocarray(m->n_values ? m->n_values : 1, sizeof *w->param_of);
    for (size_t v = 0; v < m->n_values; v++) w->param_of[v] = -1;
    w->last_grad = w->fwd_end;
    for (size_t i = 0; i < w->n; i++) {
        w->param_of[w->pv[i]] = (int)i;
        int p = m->values[w->gv[i]].producer;
        if (p < 0 || (size_t)p <= w->fwd_end)
            return roamc_errorf(w->err, w->errlen,
                                "%s: gradient '%s' of parameter '%s' is made by no backward node",
                                w->r->step_name, m->values[w->gv[i]].name,
                                m->values[w->pv[i]].name);
        if ((size_t)p > w->last_grad) w->last_grad = (size_t)p;
    }
    if (pp_meta_values(w, "roamc.optimizer_state", false, &w->states, &w->n_states)) return -1;
    w->state_of = xmallocarray(w->n_states ? w->n_states : 1, sizeof *w->state_of);
    for (size_t k = 0; k < w->n_states; k++) {
        const char *s = m->values[w->states[k]].name;
        int best = -1;
        size_t best_len = 0;
        for (size_t i = 0; i < w->n; i++) {
            const char *pn = m->values[w->pv[i]].name;
            size_t len = strlen(pn);
            if (len > best_len && strncmp(s, pn, len) == 0 && s[len] == '.')
                best = (int)i, best_len = len;
        }
        if (best < 0)
            return roamc_errorf(w->err, w->errlen,
                                "%s: optimizer state '%s' is named after no parameter "
                                "(PARAM.what): --pipeline-stages cannot tell which stage keeps it",
                                w->r->step_name, s);
        w->state_of[k] = best;
    }
    w->is_data = xcalloc(m->n_values ? m->n_values : 1, sizeof *w->is_data);
    w->is_buffer = xcalloc(m->n_values ? m->n_values : 1, sizeof *w->is_buffer);
    if (pp_mark(w, "roamc.data_inputs", w->is_data) || pp_mark(w, "roamc.buffers", w->is_buffer))
        return -1;
    w->pass = xmallocarray(m->n_nodes ? m->n_nodes : 1, sizeof *w->pass);
    for (size_t op = 0; op < m->n_nodes; op++)
        w->pass[op] = op <= w->fwd_end ? PP_FWD : op <= w->last_grad ? PP_BWD : PP_OPT;
    return 0;
}

/* Each op after the last gradient tagged with the one parameter whose
 * value, gradient or state it reaches through the storages it touches. */
static int pp_tag_updates(pp_work *w) {
    const graph *g = w->g;
    int *tag = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof *tag);
    for (size_t s = 0; s < g->n_storages; s++) tag[s] = -1;
    for (size_t i = 0; i < w->n; i++) {
        tag[g->storage_of[w->pv[i]]] = (int)i;
        tag[g->storage_of[w->gv[i]]] = (int)i;
    }
    for (size_t k = 0; k < w->n_states; k++) tag[g->storage_of[w->states[k]]] = w->state_of[k];
    w->tag = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *w->tag);
    int rc = 0;
    for (size_t op = 0; op < g->n_ops; op++) w->tag[op] = -1;
    for (size_t op = w->last_grad + 1; rc == 0 && op < g->n_ops; op++) {
        const fe_node *nd = &w->m->nodes[op];
        int t = -1;
        for (size_t k = 0; k < nd->n_inputs && t != -2; k++) {
            if (nd->inputs[k] < 0) continue;
            int s = tag[g->storage_of[nd->inputs[k]]];
            t = s >= 0 && t >= 0 && s != t ? -2 : s >= 0 ? s : t;
        }
        for (size_t k = 0; k < nd->n_outputs && t >= 0; k++)
            if (nd->outputs[k] >= 0 && tag[g->storage_of[nd->outputs[k]]] < 0)
                tag[g->storage_of[nd->outputs[k]]] = t;
        if (t < 0) {
            char label[160];
            rc = roamc_errorf(w->err, w->errlen,
                              "%s: node %s (#%zu, %s) after the backward pass %s: "
                              "--pipeline-stages needs each parameter's update on its own",
                              w->r->step_name, graph_op_label(g, (int)op, label, sizeof label), op,
                              nd->op_type,
                              t == -2 ? "reads the gradients or state of several parameters"
                                      : "updates no parameter");
        }
        w->tag[op] = t;
    }
    free(tag);
    return rc;
}

/* ------------------------------------------------------------ the cut */

static int pp_stage_of_fwd(const pp_work *w, size_t op) {
    int s = 0;
    while (s + 1 < w->P && w->cut[s + 1] <= op) s++;
    return s;
}

/* Whether parameter name pn is in module mod ("fc3" holds "fc3.weight"). */
static bool pp_in_module(const char *pn, const char *mod, size_t len) {
    return strncmp(pn, mod, len) == 0 && (pn[len] == '.' || pn[len] == 0);
}

/* --stage-cuts: each stage from the first forward node reading a parameter
 * of the named module. */
static int pp_cuts_named(pp_work *w) {
    const char *s = w->r->po.cuts;
    long k = 1;
    for (const char *c = s;; k++) {
        size_t len = strcspn(c, ",");
        if (k >= w->P)
            return roamc_errorf(w->err, w->errlen,
                                "--stage-cuts '%s' names more than %ld modules: one per cut "
                                "(--pipeline-stages %ld)",
                                s, w->P - 1, w->P);
        size_t at = SIZE_MAX;
        for (size_t op = 0; op <= w->fwd_end && at == SIZE_MAX; op++) {
            const fe_node *nd = &w->m->nodes[op];
            for (size_t i = 0; i < nd->n_inputs; i++)
                if (nd->inputs[i] >= 0 && w->param_of[nd->inputs[i]] >= 0 &&
                    pp_in_module(w->m->values[nd->inputs[i]].name, c, len)) {
                    at = op;
                    break;
                }
        }
        if (at == SIZE_MAX || len == 0)
            return roamc_errorf(w->err, w->errlen,
                                "--stage-cuts: '%.*s' is no module whose parameters the forward "
                                "pass reads (a name such as 'fc3', 'h.2', 'net.layer3')",
                                (int)len, c);
        if (at <= w->cut[k - 1])
            return roamc_errorf(w->err, w->errlen,
                                "--stage-cuts: '%.*s' (forward node #%zu) does not come after the "
                                "previous cut (#%zu): name the modules in forward order",
                                (int)len, c, at, w->cut[k - 1]);
        w->cut[k] = at;
        if (!c[len]) break;
        c += len + 1;
    }
    if (k != w->P - 1)
        return roamc_errorf(w->err, w->errlen,
                            "--stage-cuts names %ld modules, --pipeline-stages %ld needs %ld", k,
                            w->P, w->P - 1);
    return 0;
}

/* Whether forward op reads no activation and no data (only parameters,
 * buffers, constants, or nothing). */
static bool pp_param_only(const pp_work *w, size_t op) {
    const fe_node *nd = &w->m->nodes[op];
    for (size_t k = 0; k < nd->n_inputs; k++) {
        int v = nd->inputs[k];
        if (v >= 0 && (w->is_data[v] || w->m->values[v].producer >= 0)) return false;
    }
    return true;
}

/* Balanced cuts: forward seconds times 3 (the backward of a node takes
 * about twice its forward), each cut where the running sum passes k/P. */
static void pp_cuts_balanced(pp_work *w) {
    double total = 0, run = 0;
    for (size_t op = 0; op <= w->fwd_end; op++) total += w->op_sec[op];
    long k = 1;
    size_t nf = w->fwd_end + 1;
    for (size_t op = 0; op <= w->fwd_end && k < w->P; op++) {
        double next = run + w->op_sec[op];
        double target = total * (double)k / (double)w->P;
        /* at least one node per stage, before and after */
        size_t min_at = w->cut[k - 1] + 1, max_at = nf - (size_t)(w->P - k);
        if (op + 1 >= min_at && (next >= target || op + 1 >= max_at) && op + 1 <= max_at) {
            bool before = target - run < next - target && op >= min_at;
            w->cut[k++] = before ? op : op + 1;
        }
        run = next;
    }
    for (; k < w->P; k++) w->cut[k] = w->cut[k - 1] + 1;
    /* a node that reads only parameters (a weight's transpose) goes with the
     * node that reads it: never last before a cut */
    size_t nf1 = w->fwd_end + 1;
    for (k = 1; k < w->P; k++) {
        size_t lo = w->cut[k - 1] + 1, hi = nf1 - (size_t)(w->P - k);
        size_t c = w->cut[k] < lo ? lo : w->cut[k];
        while (c > lo && pp_param_only(w, c - 1)) c--;
        while (c < hi && pp_param_only(w, c - 1)) c++;
        w->cut[k] = c;
    }
}

/* The stage of every backward op (pipeline.h): the latest stage of the
 * forward values and parameters it reads; a forward value that a later
 * stage receives counts for the stage that made it only when the op also
 * reads a gradient of its shape (a ReLU's backward beside the matmul's that
 * reads its output); an op reading gradients alone goes with the earliest
 * of them (gradients only flow down the stages). */
static int pp_assign(pp_work *w) {
    const fe_model *m = w->m;
    size_t nv = m->n_values;
    w->fwd_stage = xmallocarray(nv ? nv : 1, sizeof *w->fwd_stage);
    w->last_fwd_stage = xmallocarray(nv ? nv : 1, sizeof *w->last_fwd_stage);
    w->pfirst = xmallocarray(w->n ? w->n : 1, sizeof *w->pfirst);
    w->plast = xmallocarray(w->n ? w->n : 1, sizeof *w->plast);
    for (size_t v = 0; v < nv; v++) w->fwd_stage[v] = w->last_fwd_stage[v] = -1;
    for (size_t i = 0; i < w->n; i++) w->pfirst[i] = w->plast[i] = -1;
    w->stage = xmallocarray(m->n_nodes ? m->n_nodes : 1, sizeof *w->stage);
    w->pure_bwd = xcalloc(m->n_nodes ? m->n_nodes : 1, sizeof *w->pure_bwd);
    for (size_t op = 0; op < m->n_nodes; op++) w->stage[op] = -1;
    for (size_t op = 0; op <= w->fwd_end; op++) {
        const fe_node *nd = &m->nodes[op];
        int s = pp_stage_of_fwd(w, op);
        w->stage[op] = s;
        for (size_t k = 0; k < nd->n_outputs; k++)
            if (nd->outputs[k] >= 0) w->fwd_stage[nd->outputs[k]] = s;
        for (size_t k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v < 0) continue;
            if (s > w->last_fwd_stage[v]) w->last_fwd_stage[v] = s;
            /* a data input counts as made by the first stage reading it */
            if (w->is_data[v] && w->fwd_stage[v] < 0) w->fwd_stage[v] = s;
            int p = w->param_of[v];
            if (p >= 0) {
                if (w->pfirst[p] < 0) w->pfirst[p] = s;
                w->plast[p] = s;
            }
        }
    }
    for (size_t op = w->fwd_end + 1; op <= w->last_grad; op++) {
        const fe_node *nd = &m->nodes[op];
        int definite = -1, boundary_own = -1, bwd = -1;
        for (size_t k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v < 0) continue;
            int p = w->param_of[v], prod = m->values[v].producer;
            if (p >= 0) {
                if (w->pfirst[p] == w->plast[p] && w->pfirst[p] > definite) definite = w->pfirst[p];
            } else if (prod >= 0 && w->pass[prod] == PP_BWD) {
                /* gradients flow down: one read from a later stage arrived here */
                if (w->stage[prod] >= 0 && (bwd < 0 || w->stage[prod] < bwd)) bwd = w->stage[prod];
            } else if ((prod >= 0 && w->pass[prod] == PP_FWD) || w->fwd_stage[v] >= 0) {
                int fs = w->fwd_stage[v];
                if (w->last_fwd_stage[v] <= fs) {
                    if (fs > definite) definite = fs;
                    continue;
                }
                /* sent on: the op is its producer's backward when it also
                 * reads a gradient shaped like it */
                for (size_t j = 0; j < nd->n_inputs; j++) {
                    int u = nd->inputs[j];
                    if (u < 0 || m->values[u].producer < 0 ||
                        w->pass[m->values[u].producer] != PP_BWD)
                        continue;
                    const fe_value *a = &m->values[u], *b = &m->values[v];
                    bool same = a->rank == b->rank && a->elem_type == b->elem_type;
                    for (int d = 0; same && d < a->rank; d++)
                        same = a->dims[d].value == b->dims[d].value;
                    if (same && (boundary_own < 0 || fs < boundary_own)) boundary_own = fs;
                }
            }
        }
        w->stage[op] = definite >= 0 ? definite : boundary_own >= 0 ? boundary_own : bwd;
        w->pure_bwd[op] = definite < 0 && boundary_own < 0;
    }
    /* ops reading nothing that places them: the stage of their first reader */
    for (size_t op = w->last_grad + 1; op-- > w->fwd_end + 1;) {
        if (w->stage[op] >= 0) continue;
        const fe_node *nd = &m->nodes[op];
        for (size_t q = op + 1; q <= w->last_grad && w->stage[op] < 0; q++)
            for (size_t k = 0; k < m->nodes[q].n_inputs; k++)
                for (size_t j = 0; j < nd->n_outputs; j++)
                    if (nd->outputs[j] >= 0 && m->nodes[q].inputs[k] == nd->outputs[j])
                        w->stage[op] = w->stage[q];
        if (w->stage[op] < 0) w->stage[op] = (int)w->P - 1;
    }
    return 0;
}

/* The ops that make a gradient from a later stage's gradient alone (a
 * bias's sum, a weight's transposes), each read by nothing else: moved to
 * the parameter's stage s, so the later stage sends the gradient they read
 * (the backward of the op that read the parameter runs where it ran). */
static void pp_pull_grad(pp_work *w, int op, int s) {
    const fe_model *m = w->m;
    while (op >= 0 && w->pass[op] == PP_BWD && w->stage[op] > s && w->pure_bwd[op]) {
        w->stage[op] = s;
        int next = -1;
        for (size_t k = 0; k < m->nodes[op].n_inputs; k++) {
            int v = m->nodes[op].inputs[k];
            int prod = v >= 0 ? m->values[v].producer : -1;
            if (prod < 0 || w->pass[prod] != PP_BWD) continue;
            size_t readers = 0;
            for (size_t q = (size_t)prod + 1; q <= w->last_grad; q++)
                for (size_t j = 0; j < m->nodes[q].n_inputs; j++)
                    readers += m->nodes[q].inputs[j] == v;
            next = readers == 1 ? prod : -1;
        }
        op = next;
    }
}

/* Each parameter's gradient per stage: its own, or for a parameter two
 * stages read (tied), the add of the two stages' parts split. */
static int pp_grads(pp_work *w) {
    const fe_model *m = w->m;
    size_t P = (size_t)w->P;
    w->grad_in = xmallocarray(w->n * P > 0 ? w->n * P : 1, sizeof *w->grad_in);
    w->tied_add = xmallocarray(w->n ? w->n : 1, sizeof *w->tied_add);
    for (size_t k = 0; k < w->n * P; k++) w->grad_in[k] = -1;
    for (size_t i = 0; i < w->n; i++) {
        int prod = m->values[w->gv[i]].producer;
        w->tied_add[i] = -1;
        if (w->pfirst[i] < 0 || w->pfirst[i] == w->plast[i]) {
            int s = w->pfirst[i] >= 0 ? w->pfirst[i] : w->stage[prod];
            pp_pull_grad(w, prod, s);
            w->grad_in[i * P + (size_t)s] = w->gv[i];
            if (w->stage[prod] != s) {
                char label[160];
                return roamc_errorf(w->err, w->errlen,
                                    "%s: the gradient of '%s' (stage %d) is made by node %s in "
                                    "stage %d: --pipeline-stages cannot cut there",
                                    w->r->step_name, m->values[w->pv[i]].name, s,
                                    graph_op_label(w->g, prod, label, sizeof label),
                                    w->stage[prod]);
            }
            continue;
        }
        const fe_node *nd = &m->nodes[prod];
        int a = nd->n_inputs == 2 ? nd->inputs[0] : -1, b = nd->n_inputs == 2 ? nd->inputs[1] : -1;
        int sa = a >= 0 && m->values[a].producer >= 0 ? w->stage[m->values[a].producer] : -1;
        int sb = b >= 0 && m->values[b].producer >= 0 ? w->stage[m->values[b].producer] : -1;
        bool two = (strcmp(nd->op_type, "add") == 0 || strcmp(nd->op_type, "Add") == 0) &&
                   sa >= 0 && sb >= 0 && sa != sb &&
                   ((sa == w->pfirst[i] && sb == w->plast[i]) ||
                    (sb == w->pfirst[i] && sa == w->plast[i]));
        for (size_t op = 0; two && op <= w->fwd_end; op++)
            for (size_t k = 0; k < m->nodes[op].n_inputs; k++)
                if (m->nodes[op].inputs[k] == w->pv[i] && w->stage[op] != sa && w->stage[op] != sb)
                    two = false;
        if (!two)
            return roamc_errorf(w->err, w->errlen,
                                "%s: parameter '%s' is read by the forward passes of stages %d and "
                                "%d, and its gradient is not one add of their two parts: "
                                "--pipeline-stages keeps a copy per stage only then",
                                w->r->step_name, m->values[w->pv[i]].name, w->pfirst[i],
                                w->plast[i]);
        w->tied_add[i] = prod;
        w->stage[prod] = -1;
        w->pass[prod] = PP_NONE;
        w->grad_in[i * P + (size_t)sa] = a;
        w->grad_in[i * P + (size_t)sb] = b;
    }
    /* optimizer ops: their parameter's first stage (emission keeps them in
     * every stage that holds the parameter) */
    for (size_t op = w->last_grad + 1; op < m->n_nodes; op++)
        w->stage[op] = w->pfirst[w->tag[op]] >= 0 ? w->pfirst[w->tag[op]]
                                                  : w->stage[m->values[w->gv[w->tag[op]]].producer];
    return 0;
}

/* Whether stage s holds parameter i. */
static bool pp_holds(const pp_work *w, size_t i, int s) {
    return w->grad_in[i * (size_t)w->P + (size_t)s] >= 0;
}

/* A value read across stages must go down the forward pass or up the
 * backward pass: a backward op reading a gradient of an earlier stage cannot. */
static int pp_check_flow(pp_work *w) {
    const fe_model *m = w->m;
    for (size_t op = 0; op <= w->last_grad; op++) {
        if (w->pass[op] == PP_NONE) continue;
        const fe_node *nd = &m->nodes[op];
        for (size_t k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            int prod = v >= 0 ? m->values[v].producer : -1;
            if (prod < 0 || w->pass[prod] == PP_NONE) continue;
            int sp = w->stage[prod], so = w->stage[op];
            bool bad = (w->pass[prod] == PP_FWD && w->pass[op] == PP_FWD && sp > so) ||
                       (w->pass[prod] == PP_BWD && sp < so);
            if (bad) {
                char a[160], b[160];
                return roamc_errorf(w->err, w->errlen,
                                    "%s: node %s (stage %d) reads '%s' that node %s makes in "
                                    "stage %d: a value that flows against the pipeline; cut "
                                    "elsewhere (--stage-cuts)",
                                    w->r->step_name, graph_op_label(w->g, (int)op, a, sizeof a), so,
                                    m->values[v].name, graph_op_label(w->g, prod, b, sizeof b), sp);
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------ one stage's step */

typedef struct pp_task {
    int pass; /* PP_FWD or PP_BWD */
    int mb;
} pp_task;

/* The stage's tasks in schedule order (2M of them) into t. */
static size_t pp_schedule(const pp_work *w, int s, pp_task *t) {
    long M = w->M, n = 0;
    if (w->r->po.schedule == PIPE_GPIPE) {
        for (long i = 0; i < M; i++) t[n++] = (pp_task){PP_FWD, (int)i};
        for (long i = 0; i < M; i++) t[n++] = (pp_task){PP_BWD, (int)i};
        return (size_t)n;
    }
    long warm = w->P - s - 1 < M ? w->P - s - 1 : M;
    for (long i = 0; i < warm; i++) t[n++] = (pp_task){PP_FWD, (int)i};
    for (long i = 0; i < M - warm; i++) {
        t[n++] = (pp_task){PP_FWD, (int)(warm + i)};
        t[n++] = (pp_task){PP_BWD, (int)i};
    }
    for (long i = M - warm; i < M; i++) t[n++] = (pp_task){PP_BWD, (int)i};
    return (size_t)n;
}

/* A growing list of names. */
typedef struct pp_names {
    char **s;
    int *v; /* the step's value each renames */
    size_t n, cap;
} pp_names;

static void pp_names_add(pp_names *l, const char *name, int v) {
    for (size_t k = 0; k < l->n; k++)
        if (strcmp(l->s[k], name) == 0) return;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->s = xreallocarray(l->s, l->cap, sizeof *l->s);
        l->v = xreallocarray(l->v, l->cap, sizeof *l->v);
    }
    l->v[l->n] = v;
    l->s[l->n++] = xstrdup(name);
}

static void pp_names_free(pp_names *l) {
    for (size_t k = 0; k < l->n; k++) free(l->s[k]);
    free(l->s);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void pp_names_clear(pp_names *l) {
    for (size_t k = 0; k < l->n; k++) free(l->s[k]);
    l->n = 0;
}

/* The emission of stage s. */
typedef struct pp_emit {
    pp_work *w;
    int s;
    fe_edit *e;
    size_t at;    /* where the next node goes (all before the step's own nodes) */
    int cur_pass; /* the task being written */
    int cur_mb;
    int gate;        /* its index (names "g<gate>."); -1: no gate (the first task) */
    int *acc_mb;     /* per parameter: the last microbatch accumulated, -1 */
    pp_names ext;    /* the task's outside values (renamed), in first-read order */
    pp_names sinks;  /* what the previous task left for later */
    pp_names next;   /* what this task leaves for later */
    pp_names comm;   /* received buffers */
    bool *read_here; /* per value: the stage reads it (graph inputs kept) */
    bool *data_mb;   /* per value x microbatch: the stage reads mb<i>.x */
    char **latest;   /* per value: the name of its last in-place version (a BatchNorm's
                        running stats, written once per microbatch), NULL: its own */
    pipe_stage *out;
} pp_emit;

/* Whether value v is made once per microbatch (by a forward or backward node,
 * or a data input). */
static bool pp_per_mb(const pp_work *w, int v) {
    int prod = w->m->values[v].producer;
    return w->is_data[v] || (prod >= 0 && (w->pass[prod] == PP_FWD || w->pass[prod] == PP_BWD));
}

/* The name of v in microbatch mb (before any gate). */
static void pp_mb_name(const pp_work *w, int v, int mb, char *buf, size_t len) {
    if (pp_per_mb(w, v))
        snprintf(buf, len, "mb%d.%s", mb, w->m->values[v].name);
    else
        snprintf(buf, len, "%s", w->m->values[v].name);
}

/* Whether v, read in the current task, is made inside it (by a node of the
 * task or a Recv at its start). */
static bool pp_inside(const pp_emit *E, int v) {
    const pp_work *w = E->w;
    int prod = w->m->values[v].producer;
    if (w->is_data[v] || prod < 0) return false;
    return w->pass[prod] == E->cur_pass;
}

/* The name a node of the current task reads for v: gated when from outside. */
static void pp_read_name(pp_emit *E, int v, char *buf, size_t len) {
    char plain[PP_NAME];
    pp_mb_name(E->w, v, E->cur_mb, plain, sizeof plain);
    if (E->latest[v]) snprintf(plain, sizeof plain, "%s", E->latest[v]);
    /* the backward reads the loss divided by M and the seed divided back */
    if (E->cur_pass == PP_BWD && (v == E->w->loss_v || v == E->w->seed_v))
        snprintf(plain + strlen(plain), sizeof plain - strlen(plain), "%s", PP_DIV_SUFFIX);
    if (E->gate < 0 || pp_inside(E, v)) {
        snprintf(buf, len, "%s", plain);
        return;
    }
    pp_names_add(&E->ext, plain, v);
    snprintf(buf, len, "g%d.%s", E->gate, plain);
}

static int pp_value_info(pp_emit *E, const char *name, const fe_value *like) {
    int64_t d[64];
    size_t rank = like->rank > 0 ? (size_t)like->rank : 0;
    ROAMC_ASSERT(rank <= 64);
    for (size_t k = 0; k < rank; k++) d[k] = like->dims[k].value;
    fe_value_spec spec = {name, like->elem_type, rank, d};
    return fe_edit_add_value_info(E->e, &spec, E->w->err, E->w->errlen);
}

static const int64_t pp_alias_none[1] = {-1}, pp_alias0[1] = {0};

/* Inserts one node at E->at. */
static int pp_put(pp_emit *E, const fe_node_spec *spec) {
    if (fe_edit_insert_node(E->e, E->at, spec, E->w->err, E->w->errlen)) return -1;
    E->at++;
    return 0;
}

/* The Recv of v (made by stage `from`) at the task's start. */
static int pp_recv(pp_emit *E, int v, int from) {
    char name[PP_NAME];
    pp_mb_name(E->w, v, E->cur_mb, name, sizeof name);
    const char *out = name;
    fe_attr_spec at[] = {
        {.name = "alias", .type = FE_ATTR_INTS, .ints = pp_alias_none, .n_ints = 1},
        {.name = "inplace", .type = FE_ATTR_INT, .i = 0},
        {.name = "peer", .type = FE_ATTR_INT, .i = from}};
    fe_node_spec spec = {GRAPH_ROAMC_DOMAIN,
                         "Recv",
                         name,
                         (const char *const *)E->sinks.s,
                         E->sinks.n,
                         &out,
                         1,
                         at,
                         3};
    if (pp_put(E, &spec) || pp_value_info(E, name, &E->w->m->values[v])) return -1;
    pp_names_add(&E->comm, name, v);
    E->out->n_recv++;
    /* each microbatch receives the same values: count one microbatch's */
    if (E->cur_mb == 0) E->out->recv_bytes += E->w->m->values[v].bytes;
    return 0;
}

/* The Send of v (just made) to stage `to`. */
static int pp_send(pp_emit *E, int v, int to) {
    char name[PP_NAME], out[PP_NAME + 16];
    pp_mb_name(E->w, v, E->cur_mb, name, sizeof name);
    snprintf(out, sizeof out, "%s.to%d", name, to);
    const char *in = name, *o = out;
    fe_attr_spec at[] = {{.name = "alias", .type = FE_ATTR_INTS, .ints = pp_alias0, .n_ints = 1},
                         {.name = "inplace", .type = FE_ATTR_INT, .i = 0},
                         {.name = "peer", .type = FE_ATTR_INT, .i = to}};
    fe_node_spec spec = {GRAPH_ROAMC_DOMAIN, "Send", out, &in, 1, &o, 1, at, 3};
    if (pp_put(E, &spec) || pp_value_info(E, out, &E->w->m->values[v])) return -1;
    pp_names_add(&E->next, out, v);
    E->out->n_send++;
    if (E->cur_mb == 0) E->out->send_bytes += E->w->m->values[v].bytes;
    return 0;
}

/* The stages (other than its maker's) that read v: to[], the count. */
static size_t pp_readers(const pp_work *w, int v, const int **to) {
    *to = &w->dest[(size_t)v * PP_MAX_DEST];
    return w->n_dest[v];
}

/* The parameter whose stage-s gradient v is, or -1. */
static int pp_grad_param(const pp_work *w, int v, int s) {
    for (size_t i = 0; i < w->n; i++)
        if (w->grad_in[i * (size_t)w->P + (size_t)s] == v) return (int)i;
    return -1;
}

static void pp_acc_name(int mb, const char *grad, char *buf, size_t len) {
    if (mb == 0)
        snprintf(buf, len, "mb0.%s", grad);
    else
        snprintf(buf, len, "acc%d.%s", mb, grad);
}

/* Gradient v of parameter i in microbatch mb > 0: added in place into the
 * accumulator. */
static int pp_accumulate(pp_emit *E, int v, int i) {
    const pp_work *w = E->w;
    const char *gname = w->m->values[v].name;
    char prev[PP_NAME], in[PP_NAME + 16], mine[PP_NAME + 16], out[PP_NAME + 16];
    pp_acc_name(E->acc_mb[i], gname, prev, sizeof prev);
    if (E->gate >= 0 && E->acc_mb[i] >= 0) {
        pp_names_add(&E->ext, prev, v);
        snprintf(in, sizeof in, "g%d.%s", E->gate, prev);
    } else {
        snprintf(in, sizeof in, "%s", prev);
    }
    snprintf(mine, sizeof mine, "mb%d.%s", E->cur_mb, gname);
    pp_acc_name(E->cur_mb, gname, out, sizeof out);
    const char *ins[2] = {in, mine}, *o = out;
    /* overload: the ATen call a runner replays (models/run_plan.py) */
    fe_attr_spec at[] = {{.name = "alias", .type = FE_ATTR_INTS, .ints = pp_alias0, .n_ints = 1},
                         {.name = "inplace", .type = FE_ATTR_INT, .i = 1},
                         {.name = "overload", .type = FE_ATTR_STRING, .s = "Tensor"}};
    fe_node_spec spec = {PP_ATEN, "add_", out, ins, 2, &o, 1, at, 3};
    if (pp_put(E, &spec) || pp_value_info(E, out, &w->m->values[v])) return -1;
    E->acc_mb[i] = E->cur_mb;
    pp_names_add(&E->next, out, v);
    return 0;
}

/* x / M (aten div, as models/export.py records `loss / K` and its backward)
 * of v in the current microbatch: "mb<i>.NAME" into "mb<i>.NAME.div",
 * which the task's backward nodes read instead (pp_read_name).  Values the
 * backward reads later: the next gate waits for it. */
static int pp_emit_div(pp_emit *E, int v) {
    const pp_work *w = E->w;
    char in[PP_NAME], out[PP_NAME + 8], nm[PP_NAME + 8];
    pp_mb_name(w, v, E->cur_mb, in, sizeof in);
    snprintf(out, sizeof out, "%s%s", in, PP_DIV_SUFFIX);
    snprintf(nm, sizeof nm, "%s%s", in, PP_DIV_SUFFIX);
    const char *ip = in, *op = out;
    fe_attr_spec at[] = {
        {.name = "alias", .type = FE_ATTR_INTS, .ints = pp_alias_none, .n_ints = 1},
        {.name = "inplace", .type = FE_ATTR_INT, .i = 0},
        {.name = "other", .type = FE_ATTR_INT, .i = w->M},
        {.name = "overload", .type = FE_ATTR_STRING, .s = "Tensor"}};
    fe_node_spec spec = {PP_ATEN, "div", nm, &ip, 1, &op, 1, at, 4};
    if (pp_put(E, &spec) || pp_value_info(E, out, &w->m->values[v])) return -1;
    if (v == w->loss_v) pp_names_add(&E->next, out, v);
    return 0;
}

/* The nodes of the current task (stage E->s), cloned with renamed values,
 * with Sends after the values other stages read and accumulation. */
static int pp_emit_nodes(pp_emit *E) {
    pp_work *w = E->w;
    const fe_model *m = w->m;
    for (size_t op = 0; op <= w->last_grad; op++) {
        if (w->pass[op] != E->cur_pass || w->stage[op] != E->s) continue;
        const fe_node *nd = &m->nodes[op];
        char outs[16][PP_NAME];
        const char *optr[16];
        if (nd->n_outputs > 16)
            return roamc_errorf(w->err, w->errlen, "%s: node #%zu has %zu outputs (at most 16)",
                                w->r->step_name, op, nd->n_outputs);
        for (size_t k = 0; k < nd->n_outputs; k++) {
            if (nd->outputs[k] < 0)
                outs[k][0] = 0;
            else
                pp_mb_name(w, nd->outputs[k], E->cur_mb, outs[k], PP_NAME);
            optr[k] = outs[k];
        }
        char nm[PP_NAME];
        snprintf(nm, sizeof nm, "mb%d.%s", E->cur_mb, nd->name);
        /* the step's own nodes sit after every node inserted so far (E->at) */
        fe_clone_spec cs = {.node = E->at + op,
                            .position = E->at,
                            .name = nm,
                            .outputs = optr,
                            .n_outputs = nd->n_outputs};
        if (fe_edit_clone_node(E->e, &cs, w->err, w->errlen)) return -1;
        size_t here = E->at++;
        for (size_t k = 0; k < nd->n_explicit_inputs; k++) {
            int v = nd->inputs[k];
            if (v < 0) continue;
            char rn[PP_NAME + 16];
            pp_read_name(E, v, rn, sizeof rn);
            if (pp_per_mb(w, v) || E->gate >= 0)
                if (fe_edit_replace_input(E->e, here, k, rn, w->err, w->errlen)) return -1;
            if (!pp_per_mb(w, v)) E->read_here[v] = true;
            if (w->is_data[v]) E->data_mb[(size_t)v * (size_t)w->M + (size_t)E->cur_mb] = true;
        }
        for (size_t k = 0; k < nd->n_outputs; k++) {
            int v = nd->outputs[k];
            if (v < 0) continue;
            int a = nd->alias ? nd->alias[k] : -1;
            int x = a >= 0 && (size_t)a < nd->n_inputs ? nd->inputs[a] : -1;
            if (nd->inplace && x >= 0 && !pp_per_mb(w, x)) { /* later reads read this version */
                free(E->latest[x]);
                E->latest[x] = xstrdup(outs[k]);
            }
            if (pp_value_info(E, outs[k], &m->values[v])) return -1;
            const int *to;
            size_t nt = pp_readers(w, v, &to);
            for (size_t j = 0; j < nt; j++)
                if (pp_send(E, v, to[j])) return -1;
            /* values later tasks read: the next gate waits for them */
            if (w->read_later[v]) pp_names_add(&E->next, outs[k], v);
            if ((v == w->loss_v && E->cur_pass == PP_FWD) || v == w->seed_v)
                if (pp_emit_div(E, v)) return -1;
            int gi = E->cur_pass == PP_BWD ? pp_grad_param(w, v, E->s) : -1;
            if (gi >= 0) {
                if (E->acc_mb[gi] < 0) {
                    E->acc_mb[gi] = E->cur_mb;
                    pp_names_add(&E->next, outs[k], v);
                } else if (pp_accumulate(E, v, gi)) {
                    return -1;
                }
            }
        }
    }
    return 0;
}

/* The values of other stages the current task reads: received at its start. */
/* A value to receive, by where its maker sends it. */
typedef struct pp_recv_item {
    int v;
    int producer;
    size_t slot; /* its place among the producer's outputs */
} pp_recv_item;

static int pp_recv_item_cmp(const void *a, const void *b) {
    const pp_recv_item *x = a, *y = b;
    if (x->producer != y->producer) return x->producer < y->producer ? -1 : 1;
    return (x->slot > y->slot) - (x->slot < y->slot);
}

/* The task's Recvs, in the order the peer sends them: a Send follows its
 * value's maker, so in the makers' file order (then output order).  Send
 * and Recv are matched in the order both sides issue them (NCCL), so
 * receiving in the order of first read would swap two values of one size. */
static int pp_emit_recvs(pp_emit *E) {
    pp_work *w = E->w;
    const fe_model *m = w->m;
    bool *seen = xcalloc(m->n_values ? m->n_values : 1, sizeof *seen);
    pp_recv_item *items = NULL;
    size_t n = 0;
    for (size_t op = 0; op <= w->last_grad; op++) {
        if (w->pass[op] == PP_NONE || w->stage[op] != E->s) continue;
        const fe_node *nd = &m->nodes[op];
        for (size_t k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            int prod = v >= 0 ? m->values[v].producer : -1;
            if (prod < 0 || w->pass[prod] != E->cur_pass || w->stage[prod] == E->s || seen[v])
                continue;
            seen[v] = true;
            const fe_node *pn = &m->nodes[prod];
            size_t slot = 0;
            while (slot < pn->n_outputs && pn->outputs[slot] != v) slot++;
            items = xreallocarray(items, n + 1, sizeof *items);
            items[n++] = (pp_recv_item){v, prod, slot};
        }
    }
    if (n) qsort(items, n, sizeof *items, pp_recv_item_cmp);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = pp_recv(E, items[i].v, w->stage[items[i].producer]);
    free(items);
    free(seen);
    return rc;
}

/* The gate opening task k (k >= 1): inserted at `pos` once the task's
 * outside values are known. */
static int pp_emit_gate(pp_emit *E, size_t pos, const char *token) {
    pp_work *w = E->w;
    size_t ni = E->ext.n + E->sinks.n, no = E->ext.n ? E->ext.n : 1;
    const char **in = xmallocarray(ni ? ni : 1, sizeof *in);
    const char **out = xmallocarray(no, sizeof *out);
    int64_t *alias = xmallocarray(no, sizeof *alias);
    char **names = xcalloc(no, sizeof *names);
    out[0] = token; /* a task reading nothing from outside: the gate makes a token */
    alias[0] = -1;
    for (size_t k = 0; k < E->ext.n; k++) {
        in[k] = E->ext.s[k];
        names[k] = xmalloc(PP_NAME + 16);
        snprintf(names[k], PP_NAME + 16, "g%d.%s", E->gate, E->ext.s[k]);
        out[k] = names[k];
        alias[k] = (int64_t)k;
    }
    for (size_t k = 0; k < E->sinks.n; k++) in[E->ext.n + k] = E->sinks.s[k];
    char nm[64];
    snprintf(nm, sizeof nm, "gate%d", E->gate);
    fe_attr_spec at[] = {{.name = "alias", .type = FE_ATTR_INTS, .ints = alias, .n_ints = no},
                         {.name = "inplace", .type = FE_ATTR_INT, .i = 0}};
    fe_node_spec spec = {GRAPH_ROAMC_DOMAIN, "Depend", nm, in, ni, out, no, at, 2};
    int rc = fe_edit_insert_node(E->e, pos, &spec, w->err, w->errlen);
    if (rc == 0) E->at++;
    int64_t one = 1;
    fe_value_spec tv = {token, 1, 1, &one};
    if (rc == 0 && !E->ext.n) rc = fe_edit_add_value_info(E->e, &tv, w->err, w->errlen);
    /* each view declared as the value it views */
    for (size_t k = 0; k < E->ext.n && rc == 0; k++)
        rc = pp_value_info(E, names[k], &w->m->values[E->ext.v[k]]);
    for (size_t k = 0; k < no; k++) free(names[k]);
    free(names);
    free(alias);
    free(out);
    free(in);
    return rc;
}

/* One task: gate, Recvs, nodes. */
static int pp_emit_task(pp_emit *E, pp_task t, int k) {
    E->cur_pass = t.pass;
    E->cur_mb = t.mb;
    E->gate = k > 0 ? k : -1;
    pp_names_clear(&E->ext);
    char token[64];
    snprintf(token, sizeof token, "gate%d.token", k);
    if (pp_emit_recvs(E)) return -1;
    size_t gate_at = E->at;
    if (pp_emit_nodes(E)) return -1;
    if (k > 0 && pp_emit_gate(E, gate_at, token)) return -1;
    /* what this task left becomes the sinks the next gate waits for */
    pp_names_clear(&E->sinks);
    pp_names tmp = E->sinks;
    E->sinks = E->next;
    E->next = tmp;
    return 0;
}

/* Per value: the other stages that read it, and whether its own stage
 * reads it in the other pass (a saved activation, a gradient the forward
 * never sees is not one). */
static int pp_flows(pp_work *w) {
    const fe_model *m = w->m;
    size_t nv = m->n_values ? m->n_values : 1;
    w->dest = xmallocarray(nv * PP_MAX_DEST, sizeof *w->dest);
    w->n_dest = xcalloc(nv, sizeof *w->n_dest);
    w->read_later = xcalloc(nv, sizeof *w->read_later);
    for (size_t op = 0; op <= w->last_grad; op++) {
        if (w->pass[op] == PP_NONE) continue;
        const fe_node *nd = &m->nodes[op];
        for (size_t k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            int prod = v >= 0 ? m->values[v].producer : -1;
            if (prod < 0 || w->pass[prod] == PP_NONE || w->pass[prod] == PP_OPT) continue;
            if (w->stage[prod] == w->stage[op]) {
                if (w->pass[prod] != w->pass[op]) w->read_later[v] = true;
                continue;
            }
            int *d = &w->dest[(size_t)v * PP_MAX_DEST];
            bool seen = false;
            for (size_t j = 0; j < w->n_dest[v]; j++) seen |= d[j] == w->stage[op];
            if (seen) continue;
            if (w->n_dest[v] == PP_MAX_DEST)
                return roamc_errorf(w->err, w->errlen,
                                    "%s: value '%s' is read by more than %d other stages",
                                    w->r->step_name, m->values[v].name, PP_MAX_DEST);
            d[w->n_dest[v]++] = w->stage[op];
        }
    }
    return 0;
}

/* M > 1: the loss (divided by M in the forward, as models/export.py's
 * --grad-accum, Megatron and models/dist_harness.py divide each
 * microbatch's loss) and the backward's seed, the ones_like of the loss
 * (or of a backward value made from it, amp's scaled loss), divided by M
 * again (DivBackward0) before the backward reads it. */
static int pp_find_seed(pp_work *w) {
    const fe_model *m = w->m;
    w->loss_v = w->seed_v = -1;
    if (w->M <= 1) return 0;
    const char *loss = fe_meta(m, "roamc.loss");
    int lv = fe_find_value(m, loss);
    for (size_t op = w->fwd_end + 1; op <= w->last_grad && w->seed_v < 0; op++) {
        const fe_node *nd = &m->nodes[op];
        if (strcmp(nd->op_type, "ones_like") != 0 || nd->n_inputs < 1 || nd->n_outputs != 1 ||
            nd->inputs[0] < 0)
            continue;
        int x = nd->inputs[0], prod = m->values[x].producer;
        bool from_loss = x == lv;
        for (size_t k = 0;
             !from_loss && prod >= 0 && w->pass[prod] == PP_BWD && k < m->nodes[prod].n_inputs; k++)
            from_loss = m->nodes[prod].inputs[k] == lv;
        if (from_loss) w->seed_v = nd->outputs[0];
    }
    if (w->seed_v < 0 || w->n_dest[w->seed_v] ||
        w->stage[m->values[w->seed_v].producer] != w->stage[w->fwd_end])
        return roamc_errorf(w->err, w->errlen,
                            "%s: --microbatches %ld divides each microbatch's loss by %ld, but "
                            "the backward pass starts from no ones_like of the loss '%s' in the "
                            "loss's stage (the seed loss.backward() makes)",
                            w->r->step_name, w->M, w->M, loss);
    w->loss_v = lv;
    return 0;
}

static void pp_work_free(pp_work *w) {
    free(w->pass), free(w->stage), free(w->tag), free(w->pv), free(w->gv);
    free(w->pfirst), free(w->plast), free(w->param_of), free(w->grad_in), free(w->tied_add);
    free(w->states), free(w->state_of), free(w->is_data), free(w->is_buffer);
    free(w->fwd_stage), free(w->last_fwd_stage), free(w->cut), free(w->op_sec);
    free(w->dest), free(w->n_dest), free(w->read_later), free(w->pure_bwd);
}

/* Everything the stages share: the step read, cut, every op placed. */
static int pp_prepare(pp_work *w) {
    const graph *g = w->g;
    if (pp_read_step(w) || pp_tag_updates(w)) return -1;
    size_t nf = w->fwd_end + 1;
    if ((size_t)w->P > nf)
        return roamc_errorf(w->err, w->errlen,
                            "%s: --pipeline-stages %ld: the forward pass has %zu nodes, fewer "
                            "than the stages",
                            w->r->step_name, w->P, nf);
    w->op_sec = xcalloc(g->n_ops ? g->n_ops : 1, sizeof *w->op_sec);
    const fit_device *d = fit_device_find("h100");
    ROAMC_ASSERT(d != NULL);
    for (size_t op = 0; op < g->n_ops; op++) {
        graph_op_cost c = graph_op_cost_of(w->m, (int)op);
        w->op_sec[op] = fit_op_seconds(d, &c);
    }
    w->cut = xcalloc((size_t)w->P, sizeof *w->cut);
    if (w->r->po.cuts) {
        if (w->P < 2)
            return roamc_errorf(w->err, w->errlen, "%s",
                                "--stage-cuts needs --pipeline-stages 2 or more");
        if (pp_cuts_named(w)) return -1;
    } else {
        pp_cuts_balanced(w);
    }
    if (pp_assign(w) || pp_grads(w) || pp_check_flow(w) || pp_flows(w) || pp_find_seed(w))
        return -1;
    return 0;
}

/* The stage's parameters, states, buffers, data inputs as metadata lists. */
static void pp_set_meta(pp_emit *E, const char *const *final_grads) {
    pp_work *w = E->w;
    const fe_model *m = w->m;
    size_t cap = 64;
    for (size_t v = 0; v < m->n_values; v++) cap += strlen(m->values[v].name) + 24;
    cap *= (size_t)w->M > 1 ? (size_t)w->M : 1;
    char *a = xmalloc(cap), *b = xmalloc(cap), *c = xmalloc(cap);
    size_t na = 0, nb = 0, nc = 0;
    a[0] = b[0] = c[0] = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (!pp_holds(w, i, E->s)) continue;
        E->out->n_params++;
        E->out->param_bytes += m->values[w->pv[i]].bytes;
        na += (size_t)snprintf(a + na, cap - na, "%s%s", na ? "," : "", m->values[w->pv[i]].name);
        nb += (size_t)snprintf(b + nb, cap - nb, "%s%s", nb ? "," : "", final_grads[i]);
    }
    fe_edit_set_meta(E->e, "roamc.parameters", a);
    fe_edit_set_meta(E->e, "roamc.gradients", b);
    na = 0, a[0] = 0;
    for (size_t k = 0; k < w->n_states; k++)
        if (pp_holds(w, (size_t)w->state_of[k], E->s))
            na += (size_t)snprintf(a + na, cap - na, "%s%s", na ? "," : "",
                                   m->values[w->states[k]].name);
    fe_edit_set_meta(E->e, "roamc.optimizer_state", a);
    na = 0, nb = 0, a[0] = b[0] = 0;
    for (size_t v = 0; v < m->n_values; v++) {
        if (w->is_buffer[v] && E->read_here[v])
            na += (size_t)snprintf(a + na, cap - na, "%s%s", na ? "," : "", m->values[v].name);
        for (long i = 0; w->is_data[v] && i < w->M; i++)
            if (E->data_mb[v * (size_t)w->M + (size_t)i])
                nb += (size_t)snprintf(b + nb, cap - nb, "%smb%ld.%s", nb ? "," : "", i,
                                       m->values[v].name);
    }
    fe_edit_set_meta(E->e, "roamc.buffers", a);
    fe_edit_set_meta(E->e, "roamc.data_inputs", b);
    for (size_t k = 0; k < E->comm.n; k++)
        nc += (size_t)snprintf(c + nc, cap - nc, "%s%s", nc ? "," : "", E->comm.s[k]);
    fe_edit_set_meta(E->e, "roamc.communication", c);
    const char *loss = fe_meta(m, "roamc.loss");
    if (w->stage[w->fwd_end] == E->s)
        snprintf(a, cap, "mb0.%s", loss);
    else
        a[0] = 0;
    fe_edit_set_meta(E->e, "roamc.loss", a);
    snprintf(a, cap, "stage=%d stages=%ld microbatches=%ld schedule=%s in_flight=%d", E->s, w->P,
             w->M, pipe_schedule_name(w->r->po.schedule), E->out->in_flight);
    fe_edit_set_meta(E->e, "roamc.pipeline", a);
    free(a), free(b), free(c);
}

/* The step's own nodes this stage keeps (its parameters' updates) read the
 * accumulated gradients; the others go, with what they alone declared. */
static int pp_finish_nodes(pp_emit *E, char **final_grads) {
    pp_work *w = E->w;
    const fe_model *m = w->m;
    size_t base = E->at;
    for (size_t op = m->n_nodes; op-- > 0;) {
        const fe_node *nd = &m->nodes[op];
        bool keep = w->pass[op] == PP_OPT && pp_holds(w, (size_t)w->tag[op], E->s);
        if (keep) {
            for (size_t k = 0; k < nd->n_explicit_inputs; k++) {
                int v = nd->inputs[k];
                if (v < 0) continue;
                int i = w->param_of[v] < 0 ? -1 : w->param_of[v];
                (void)i;
                E->read_here[v] = true;
                if (v == w->gv[w->tag[op]] &&
                    fe_edit_replace_input(E->e, base + op, k, final_grads[w->tag[op]], w->err,
                                          w->errlen))
                    return -1;
            }
            continue;
        }
        if (fe_edit_remove_node(E->e, base + op, w->err, w->errlen)) return -1;
        for (size_t k = 0; k < nd->n_outputs; k++)
            if (nd->outputs[k] >= 0) fe_edit_remove_value(E->e, m->values[nd->outputs[k]].name);
    }
    /* graph inputs: the stage's; data inputs once per microbatch */
    for (size_t k = 0; k < m->n_inputs; k++) {
        int v = m->inputs[k];
        if (w->is_data[v]) {
            for (long i = 0; i < w->M; i++) {
                if (!E->data_mb[(size_t)v * (size_t)w->M + (size_t)i]) continue;
                char nm[PP_NAME];
                snprintf(nm, sizeof nm, "mb%ld.%s", i, m->values[v].name);
                const fe_value *x = &m->values[v];
                int64_t d[64];
                size_t rank = x->rank > 0 ? (size_t)x->rank : 0;
                ROAMC_ASSERT(rank <= 64);
                for (size_t j = 0; j < rank; j++) d[j] = x->dims[j].value;
                fe_value_spec spec = {nm, x->elem_type, rank, d};
                if (fe_edit_set_input(E->e, &spec, w->err, w->errlen)) return -1;
            }
            fe_edit_remove_value(E->e, m->values[v].name);
        } else if (!E->read_here[v]) {
            fe_edit_remove_value(E->e, m->values[v].name);
        }
    }
    return 0;
}

/* Each parameter's accumulated gradient on this stage (NULL: not held). */
static void pp_final_grads(pp_emit *E, char **final_grads) {
    const pp_work *w = E->w;
    for (size_t i = 0; i < w->n; i++) {
        int gv = w->grad_in[i * (size_t)w->P + (size_t)E->s];
        final_grads[i] = NULL;
        if (gv < 0) continue;
        final_grads[i] = xmalloc(PP_NAME + 32);
        pp_acc_name(E->acc_mb[i] < 0 ? 0 : E->acc_mb[i], w->m->values[gv].name, final_grads[i],
                    PP_NAME);
    }
}

/* A tied parameter's accumulated gradient summed over the two stages that
 * hold it before either updates it (Megatron's embedding-group all-reduce):
 * after the last task, a gate (task index `gate`) waits for what that task
 * left, Sends included (so no stage enters the collective with a Send still
 * to issue), and gives views of the stage's tied gradients; on each an
 * ai.roamc AllReduce in place, over the group of the two stages (INTS group,
 * in stage order; world 2; rank: this stage's place in it), one per tied
 * parameter in parameter order on both.  final_grads[i] becomes its
 * output, which the optimizer reads. */
static int pp_emit_tied(pp_emit *E, char **final_grads, int gate) {
    pp_work *w = E->w;
    E->gate = gate;
    pp_names_clear(&E->ext);
    for (size_t i = 0; i < w->n; i++)
        if (w->tied_add[i] >= 0 && final_grads[i])
            pp_names_add(&E->ext, final_grads[i], w->grad_in[i * (size_t)w->P + (size_t)E->s]);
    if (!E->ext.n) return 0;
    char token[64];
    snprintf(token, sizeof token, "gate%d.token", gate);
    if (pp_emit_gate(E, E->at, token)) return -1;
    for (size_t i = 0; i < w->n; i++) {
        if (w->tied_add[i] < 0 || !final_grads[i]) continue;
        char in[PP_NAME + 48], out[PP_NAME + 32];
        snprintf(in, sizeof in, "g%d.%s", gate, final_grads[i]);
        /* named by the parameter: the same collective on both stages */
        snprintf(out, sizeof out, "%s.grad.all_reduce", w->m->values[w->pv[i]].name);
        int64_t group[2] = {w->pfirst[i], w->plast[i]};
        const char *ip = in, *op = out;
        fe_attr_spec at[] = {
            {.name = "alias", .type = FE_ATTR_INTS, .ints = pp_alias0, .n_ints = 1},
            {.name = "inplace", .type = FE_ATTR_INT, .i = 1},
            {.name = "world", .type = FE_ATTR_INT, .i = 2},
            {.name = "rank", .type = FE_ATTR_INT, .i = E->s == w->pfirst[i] ? 0 : 1},
            {.name = "group", .type = FE_ATTR_INTS, .ints = group, .n_ints = 2}};
        fe_node_spec spec = {GRAPH_ROAMC_DOMAIN, "AllReduce", out, &ip, 1, &op, 1, at, 5};
        int gv = w->grad_in[i * (size_t)w->P + (size_t)E->s];
        if (pp_put(E, &spec) || pp_value_info(E, out, &w->m->values[gv])) return -1;
        snprintf(final_grads[i], PP_NAME + 32, "%s", out);
    }
    return 0;
}

/* Writes stage s's step into out->bytes. */
static int pp_emit_stage(pp_work *w, int s, pipe_stage *out) {
    const pipe_request *r = w->r;
    const fe_model *m = w->m;
    pp_emit E = {.w = w, .s = s};
    if (fe_edit_open_bytes(r->step_name, r->step_bytes, r->step_len, &E.e, w->err, w->errlen))
        return -1;
    E.out = out;
    out->in_flight = r->po.schedule == PIPE_GPIPE ? (int)w->M
                     : w->P - s < w->M            ? (int)(w->P - s)
                                                  : (int)w->M;
    E.acc_mb = xmallocarray(w->n ? w->n : 1, sizeof *E.acc_mb);
    for (size_t i = 0; i < w->n; i++) E.acc_mb[i] = -1;
    E.read_here = xcalloc(m->n_values ? m->n_values : 1, sizeof *E.read_here);
    E.data_mb = xcalloc((m->n_values ? m->n_values : 1) * (size_t)w->M, sizeof *E.data_mb);
    E.latest = xcalloc(m->n_values ? m->n_values : 1, sizeof *E.latest);
    pp_task *tasks = xmallocarray(2 * (size_t)w->M, sizeof *tasks);
    size_t nt = pp_schedule(w, s, tasks);
    char **final_grads = xcalloc(w->n ? w->n : 1, sizeof *final_grads);
    int rc = 0;
    for (size_t k = 0; k < nt && rc == 0; k++) rc = pp_emit_task(&E, tasks[k], (int)k);
    if (rc == 0) pp_final_grads(&E, final_grads);
    if (rc == 0) rc = pp_emit_tied(&E, final_grads, (int)nt);
    if (rc == 0) rc = pp_finish_nodes(&E, final_grads);
    if (rc == 0) {
        pp_set_meta(&E, (const char *const *)final_grads);
        fe_edit_bytes(E.e, &out->bytes, &out->len);
    }
    for (size_t i = 0; i < w->n; i++) free(final_grads[i]);
    free(final_grads);
    free(tasks);
    for (size_t v = 0; v < m->n_values; v++) free(E.latest[v]);
    free(E.acc_mb), free(E.read_here), free(E.data_mb), free(E.latest);
    pp_names_free(&E.ext), pp_names_free(&E.sinks), pp_names_free(&E.next);
    pp_names_free(&E.comm);
    fe_edit_free(E.e);
    return rc;
}

/* ------------------------------------------------------------ driver */

int pipe_build(const pipe_request *r, pipe_outcome *o, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    if (pipe_check(&r->po, err, errlen)) return -1;
    pp_work w = {.r = r,
                 .g = r->g,
                 .m = r->g->model,
                 .P = r->po.stages,
                 .err = err,
                 .errlen = errlen,
                 .loss_v = -1,
                 .seed_v = -1};
    w.M = r->po.microbatches > 0 ? r->po.microbatches : w.P;
    o->microbatches = w.M;
    int rc = pp_prepare(&w);
    if (rc == 0) {
        o->n = (size_t)w.P;
        o->st = xcalloc(o->n, sizeof *o->st);
    }
    char label[160];
    for (size_t s = 0; rc == 0 && s < o->n; s++) {
        pipe_stage *st = &o->st[s];
        st->first_op = w.cut[s];
        st->end_op = s + 1 < o->n ? w.cut[s + 1] : w.fwd_end + 1;
        snprintf(st->first_name, sizeof st->first_name, "%s",
                 graph_op_label(w.g, (int)st->first_op, label, sizeof label));
        for (size_t op = 0; op <= w.last_grad; op++)
            if (w.stage[op] == (int)s && w.pass[op] != PP_NONE) st->seconds += w.op_sec[op];
        char name[PP_NAME];
        snprintf(name, sizeof name, "%s (stage %zu)", r->emit_name, s);
        rc = pp_emit_stage(&w, (int)s, st);
        if (rc == 0)
            rc = fe_load_bytes(name, (fe_bytes){st->bytes, st->len}, r->bindings, &st->model, err,
                               errlen);
        if (rc == 0) st->have_model = true;
        if (rc == 0) rc = graph_build(&st->model, r->opt->align, &st->graph, err, errlen);
        if (rc == 0) st->have_graph = true;
    }
    pp_work_free(&w);
    return rc ? -1 : 0;
}

static const char *const pp_part_names[PIPE_N_PARTS] = {
    "parameters", "gradients", "optimizer_state", "communication", "activations"};

/* The stage's peak step and the bytes live there, by part. */
static void pp_split(pipe_stage *st) {
    const plan *p = &st->plan;
    const graph *g = p->g;
    static const sh_part_rule rules[] = {{"roamc.communication", PIPE_COMM},
                                         {"roamc.parameters", PIPE_PARAMETERS},
                                         {"roamc.buffers", PIPE_PARAMETERS},
                                         {"roamc.optimizer_state", PIPE_OPTIMIZER}};
    int peak = sh_split_at_peak(p, rules, sizeof rules / sizeof *rules, PIPE_GRADIENTS,
                                PIPE_ACTIVATIONS, st->split);
    st->peak_step = peak;
    char label[128];
    int op = p->order[peak];
    snprintf(st->peak_op, sizeof st->peak_op, "%s, %s", graph_op_label(g, op, label, sizeof label),
             g->model->nodes[op].op_type);
}

int pipe_run(const pipe_request *r, pipe_outcome *o, char *err, size_t errlen) {
    if (pipe_build(r, o, err, errlen)) return -1;
    return pipe_plan(r, o, err, errlen);
}

int pipe_plan(const pipe_request *r, pipe_outcome *o, char *err, size_t errlen) {
    for (size_t s = 0; s < o->n; s++) {
        pipe_stage *st = &o->st[s];
        if (plan_build(&st->graph, r->opt, &st->plan, err, errlen)) return -1;
        st->have_plan = true;
        pp_split(st);
        if (st->plan.theoretical > o->st[o->largest].plan.theoretical) o->largest = s;
    }
    o->chosen = r->po.stage >= 0 ? (size_t)r->po.stage : o->largest;
    return 0;
}

void pipe_outcome_free(pipe_outcome *o) {
    for (size_t s = 0; s < o->n; s++) {
        pipe_stage *st = &o->st[s];
        if (st->have_plan) plan_free(&st->plan);
        if (st->have_graph) graph_free(&st->graph);
        if (st->have_model) fe_free(&st->model);
        free(st->bytes);
    }
    free(o->st);
    memset(o, 0, sizeof *o);
}

void pipe_report_text(FILE *f, const pipe_request *r, const pipe_outcome *o, bool written) {
    char a[32], b[32], c[32];
    const pipe_stage *big = &o->st[o->largest];
    fprintf(f,
            "  set-up        pipeline of %zu stages, %ld microbatch%s, %s schedule, cut %s; "
            "largest stage %zu: %s per device\n",
            o->n, o->microbatches, o->microbatches == 1 ? "" : "es",
            pipe_schedule_name(r->po.schedule),
            r->po.cuts ? "at --stage-cuts" : "balanced by time (h100)", o->largest,
            roamc_bytes_human(big->plan.theoretical, a, sizeof a));
    for (size_t s = 0; s < o->n; s++) {
        const pipe_stage *st = &o->st[s];
        fprintf(f,
                "  stage %-7zu from %s: %zu parameters (%s), %d microbatch%s in flight, "
                "%.3g ms per microbatch; receives %s, sends %s per microbatch\n",
                s, st->first_name, st->n_params, roamc_bytes_human(st->param_bytes, a, sizeof a),
                st->in_flight, st->in_flight == 1 ? "" : "es", st->seconds * 1e3,
                roamc_bytes_human(st->recv_bytes, b, sizeof b),
                roamc_bytes_human(st->send_bytes, c, sizeof c));
        fprintf(f, "  stage %zu peak  %s (%llu B), arena %s at step %d (%s):", s,
                roamc_bytes_human(st->plan.theoretical, a, sizeof a),
                (unsigned long long)st->plan.theoretical,
                roamc_bytes_human(st->plan.actual, b, sizeof b), st->peak_step, st->peak_op);
        for (int k = 0; k < PIPE_N_PARTS; k++)
            fprintf(f, "%s %s %s", k ? "," : "", pp_part_names[k],
                    roamc_bytes_human(st->split[k], a, sizeof a));
        /* the stage planned above: -o and --emit-train write it when given */
        fprintf(f, "%s\n", s != o->chosen ? "" : written ? " (written)" : " (the plan above)");
    }
}

void pipe_report_json(struct json_t *obj, const pipe_request *r, const pipe_outcome *o) {
    json_t *j = json_object();
    json_object_set_new(j, "stages", json_integer((json_int_t)o->n));
    json_object_set_new(j, "microbatches", json_integer(o->microbatches));
    json_object_set_new(j, "schedule", json_string(pipe_schedule_name(r->po.schedule)));
    json_object_set_new(j, "cuts", json_string(r->po.cuts ? r->po.cuts : "balanced"));
    json_object_set_new(j, "largest", json_integer((json_int_t)o->largest));
    json_object_set_new(j, "written", json_integer((json_int_t)o->chosen));
    json_object_set_new(j, "peak", json_integer((json_int_t)o->st[o->largest].plan.theoretical));
    json_t *arr = json_array();
    for (size_t s = 0; s < o->n; s++) {
        const pipe_stage *st = &o->st[s];
        json_t *x = json_object();
        json_object_set_new(x, "stage", json_integer((json_int_t)s));
        json_object_set_new(x, "first_op", json_integer((json_int_t)st->first_op));
        json_object_set_new(x, "end_op", json_integer((json_int_t)st->end_op));
        json_object_set_new(x, "first_name", json_string(st->first_name));
        json_object_set_new(x, "parameters", json_integer((json_int_t)st->n_params));
        json_object_set_new(x, "parameter_bytes", json_integer((json_int_t)st->param_bytes));
        json_object_set_new(x, "in_flight", json_integer(st->in_flight));
        json_object_set_new(x, "seconds", json_real(st->seconds));
        json_object_set_new(x, "recv_bytes", json_integer((json_int_t)st->recv_bytes));
        json_object_set_new(x, "send_bytes", json_integer((json_int_t)st->send_bytes));
        json_object_set_new(x, "operators", json_integer((json_int_t)st->graph.n_ops));
        json_object_set_new(x, "theoretical_peak", json_integer((json_int_t)st->plan.theoretical));
        json_object_set_new(x, "actual_peak", json_integer((json_int_t)st->plan.actual));
        json_object_set_new(x, "peak_step", json_integer(st->peak_step));
        json_object_set_new(x, "peak_op", json_string(st->peak_op));
        json_t *split = json_object();
        for (int k = 0; k < PIPE_N_PARTS; k++)
            json_object_set_new(split, pp_part_names[k], json_integer((json_int_t)st->split[k]));
        json_object_set_new(x, "split", split);
        json_array_append_new(arr, x);
    }
    json_object_set_new(j, "per_stage", arr);
    json_object_set_new(obj, "pipeline", j);
}
