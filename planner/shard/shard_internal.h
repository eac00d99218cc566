/* planner/shard/shard_internal.h — what shard_emit.c (ddp, zero1, zero2)
 * and shard_gather.c (zero3, fsdp) share: the work of writing one rank's
 * step, and the helpers both use.  Private to planner/shard/. */
#ifndef ROAMC_SHARD_INTERNAL_H
#define ROAMC_SHARD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edit.h"
#include "shard.h"

#define SH_NAME 1024

typedef struct sh_param {
    int value, grad; /* the parameter and its gradient (value indices) */
    int producer;    /* the op that makes the gradient */
    uint64_t numel;  /* elements of the gradient */
    uint64_t bytes;  /* its bytes (unaligned) */
    int bucket;      /* index into buckets */
    uint64_t offset; /* first element in its bucket's buffer */
    int owner;       /* zero*: the rank that updates it */
    int last_update; /* zero*: the last update op writing its storage, -1 */
    size_t copy_out; /* the position its gradient is copied back at; SIZE_MAX: never */
} sh_param;

typedef struct sh_bucket {
    int32_t elem;
    uint64_t numel, bytes; /* its parameters' elements and bytes */
    int buffer;            /* the buffer it fills (ddp: its own) */
    int last;              /* its last parameter in ready order */
} sh_bucket;

enum sh_insert_kind { SH_COPY_IN = 1, SH_REDUCE, SH_COPY_OUT };

typedef struct sh_insert {
    size_t position, seq;
    int kind;  /* enum sh_insert_kind */
    int index; /* the parameter (copies) or the bucket (reduce) */
    int mb;    /* zero2, each microbatch's gradients reduced (sh_work.each): its microbatch */
} sh_insert;

typedef struct sh_work {
    const shard_request *r;
    const graph *g;
    const fe_model *m;
    bool zero;
    sh_param *p;
    size_t n;
    int *ready; /* parameter indices in the order their gradients are ready */
    sh_bucket *b;
    size_t nb;
    size_t n_buffers;
    uint64_t *buffer_numel; /* per buffer */
    int32_t *buffer_elem;
    int *state_of; /* per optimizer-state value listed: its parameter */
    int *states;   /* the optimizer-state values listed */
    size_t n_states;
    int *op_tag;      /* per op: the parameter it updates (zero*), -1 */
    bool *removed;    /* per op */
    size_t last_grad; /* the last gradient producer */
    size_t opt_start; /* the first op after it touching a parameter, gradient or state */
    sh_insert *ins;
    size_t n_ins, cap_ins;
    /* zero2 with gradient accumulation (roamc.grad_accum K > 1), unless
     * --no-sync: each microbatch's gradients bucketed and reduce-scattered,
     * the owned ones' added into the accumulated gradient (each) */
    size_t K;
    bool each;
    int *mb_grad; /* each: per parameter i and microbatch k, [i * K + k]: k's own gradient */
    bool *acc_op; /* each: per op, an add_ accumulating whole gradients over microbatches */
    char *err;
    size_t errlen;
} sh_work;

/* One node: domain, op, one input and one output (or two inputs), attrs. */
typedef struct sh_node {
    const char *domain, *op;
    const char *in[2];
    size_t n_in;
    const char *out;
    const fe_attr_spec *attrs;
    size_t n_attrs;
} sh_node;

extern const int64_t sh_alias0[1]; /* {0} */
#define SH_VIEW_ATTRS(inplace)                                                                     \
    {.name = "alias", .type = FE_ATTR_INTS, .ints = sh_alias0, .n_ints = 1}, {                     \
        .name = "inplace", .type = FE_ATTR_INT, .i = (inplace)                                     \
    }

/* Where metadata is read from, and what a message names: the step (its
 * file name) and the option that needs the metadata ("--shard"). */
typedef struct sh_meta_source {
    const fe_model *m;
    const char *step_name, *option;
    char *err;
    size_t errlen;
} sh_meta_source;

/* The comma-separated names of metadata key, resolved to values into *out
 * (malloc'd, the caller frees; NULL and 0 when the key is absent and not
 * required).  0, or -1 with a message on a name that is no value, or on a
 * required key that is absent. */
int sh_meta_list(const sh_meta_source *src, const char *key, bool required, int **out, size_t *n);
/* sh_meta_list for the rank's step of w ("--shard"). */
int sh_meta_values(sh_work *w, const char *key, bool required, int **out, size_t *n);

/* Storages the values of metadata `key` name count to `part`. */
typedef struct sh_part_rule {
    const char *key;
    int part;
} sh_part_rule;

/* The peak step of plan p, and the bytes live there by part into split[]
 * (added to): a storage counts to the first rule whose metadata names one
 * of its values, else to grad_part (a gradient) or act_part.  Returns the
 * peak step. */
int sh_split_at_peak(const plan *p, const sh_part_rule *rules, size_t n_rules, int grad_part,
                     int act_part, uint64_t *split);
/* Elements of v (its static dims). */
uint64_t sh_numel(const fe_value *v);
/* The sizes and strides of a contiguous tensor of v's static shape into
 * size[] and stride[] (64 entries); returns its rank. */
size_t sh_contiguous(const fe_value *v, int64_t *size, int64_t *stride);
/* The step's microbatches (metadata roamc.grad_accum, 1 when absent) into
 * *K.  0, or -1 with a message when the metadata is no count. */
int sh_grad_accum(sh_work *w, size_t *K);
/* Per value of the step: the parameter (index in w->p) whose gradient it
 * is, -1 for the rest.  malloc'd: the caller frees. */
int *sh_param_of_grad(const sh_work *w);
/* w->p from roamc.parameters and roamc.gradients, one gradient per
 * parameter.  0, or -1 with a message. */
int sh_params(sh_work *w);
/* w->states and w->state_of (each state's parameter, by name).  0, or -1
 * with a message (w->zero: a state named after no parameter). */
int sh_states(sh_work *w);
/* w->last_grad and w->opt_start. */
void sh_passes(sh_work *w);
/* w->op_tag: each op after the last gradient producer tagged with the one
 * parameter it updates (-1: none); p[].last_update.  0, or -1 with a
 * message on an op touching several parameters' gradients or state. */
int sh_tag_updates(sh_work *w);
/* A shape to declare: dims[rank], or (dims NULL) the dims of value like. */
typedef struct sh_dims {
    const fe_value *like; /* whose dims, when dims is NULL */
    const int64_t *dims;
    size_t rank;
} sh_dims;
/* Declares name with type elem and shape.  0 or -1 with a message. */
int sh_value_info(fe_edit *e, const char *name, int32_t elem, const sh_dims *shape, char *err,
                  size_t errlen);
/* Inserts node n at `at`.  0 or -1. */
int sh_put(fe_edit *e, size_t at, const sh_node *n, char *err, size_t errlen);
/* view = as_strided(buffer) at p[i].offset, then copy_ in place: from the
 * gradient into the view (in) or back (!in).  Inserts 2 nodes at `at`. */
int sh_emit_copy(sh_work *w, fe_edit *e, size_t at, int i, bool in, const char *buffer);
/* One copy between a gradient value and its parameter's place in a flat
 * buffer (sh_emit_copy's general form, for one microbatch's gradient). */
typedef struct sh_copy {
    int param;          /* whose place: p[param].offset */
    int value;          /* the gradient copied in, or written back (names, shape); -1: p[].grad */
    bool in;            /* into the buffer; else back out of it */
    const char *buffer; /* the buffer's name now */
    const char *dst;    /* back out: the name the write consumes (NULL: value's) */
    bool add;           /* back out: add_ into dst (accumulation) instead of copy_ */
} sh_copy;
/* view "V.bucket" (in) or "V.reduced_view" of c->buffer, then copy_ (or
 * add_) in place, its output "V.bucketed" or "V.reduced" (V: the value's
 * name).  Inserts 2 nodes at `at`.  0 or -1 with a message. */
int sh_emit_copy_of(sh_work *w, fe_edit *e, size_t at, const sh_copy *c);
/* The names of values v[0..n) (those with keep[k], keep NULL: all), comma
 * separated, in a malloc'd string the caller frees. */
char *sh_join(const fe_model *m, const int *v, size_t n, const bool *keep);
/* Frees what w holds (not w). */
void sh_work_free(sh_work *w);

/* zero3 and fsdp (shard_gather.c): from w with parameters, states, passes
 * and update tags found, the rank's step into *bytes (malloc'd, *len) and
 * o's counts.  0, or -1 with a message in w->err. */
int shard_emit_gathered(sh_work *w, uint8_t **bytes, size_t *len, shard_outcome *o);

#endif
