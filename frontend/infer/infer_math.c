/* Shape inference rules: elementwise math, activations, reductions and
 * normalizations (see infer.h).  One rule per op family handles every
 * opset form from 7 on (older forms where they cost nothing), branching on
 * n->opset where attributes became inputs.
 *
 * Reading order: node checks -> constant evaluation (element types, one
 * broadcast iterator, scalar kernels, the evaluators built on them) ->
 * elementwise rules -> Clip and Cast -> reductions -> softmax family and
 * CumSum -> normalizations and Dropout -> the table.
 *
 * Values are evaluated as the shape computations of exporters need them
 * (Shape -> Cast -> Div -> Floor -> Concat -> Reshape): ints for integer and
 * bool element types, doubles for float types.  A result the element type
 * cannot hold (an int32 overflow, a float16 rounding we do not model) is
 * left unknown rather than approximated.
 */
#include "infer.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FI_MATH_BOOL ONNX__TENSOR_PROTO__DATA_TYPE__BOOL
#define FI_MATH_INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define FI_MATH_FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define FI_MATH_DOUBLE ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE
#define FI_MATH_UINT4 21
#define FI_MATH_INT4 22
/* The highest TensorProto.DataType a Cast may name (INT2 in onnx 1.19). */
#define FI_MATH_MAX_ELEM 26
/* Inputs of one broadcast evaluation: Where has three. */
#define FI_MATH_MAX_ARGS 3

/* ------------------------------------------------------------ node checks */

/* Fails unless the node has lo..hi inputs, the first `lo` of them present,
 * and at most out_hi outputs. */
static int fi_math_arity(fi_node *n, size_t lo, size_t hi, size_t out_hi) {
    if (n->n_in < lo || n->n_in > hi) {
        if (lo == hi)
            return fi_fail(n, "takes %zu input%s, has %zu", lo, lo == 1 ? "" : "s", n->n_in);
        if (hi == SIZE_MAX)
            return fi_fail(n, "takes at least %zu input%s, has %zu", lo, lo == 1 ? "" : "s",
                           n->n_in);
        return fi_fail(n, "takes %zu to %zu inputs, has %zu", lo, hi, n->n_in);
    }
    if (n->n_out > out_hi)
        return fi_fail(n, "has %zu outputs; at most %zu allowed", n->n_out, out_hi);
    for (size_t k = 0; k < lo; k++)
        if (!fi_in(n, k)) return fi_fail(n, "input %zu is missing", k);
    return 0;
}

/* An output whose value stays unknown blames what hid an input's value, so
 * that the Reshape it feeds names the flag that would resolve it. */
static void fi_math_blame(fi_node *n) {
    int32_t b = -1;
    for (size_t k = 0; k < n->n_in && b < 0; k++)
        if (n->in[k] && n->in[k]->n_const < 0) b = n->in[k]->blame;
    for (size_t k = 0; k < n->n_out; k++)
        if (n->out[k] && n->out[k]->n_const < 0 && n->out[k]->blame < 0) n->out[k]->blame = b;
}

/* The dim of an output that is one of the input's dim or 1, not knowing
 * which: 1 stays 1, anything else is unknown and depends on `sym`. */
static fi_dim fi_math_dim_or_one(fi_dim d, int32_t sym) {
    if (d.v == 1) return d;
    return fi_unknown_derived(sym >= 0 ? sym : (d.v < 0 ? d.sym : -1));
}

/* ---------------------------------------------- element types of values */

/* v wrapped to what elem holds, as a C cast (and ONNX Runtime's Cast)
 * would; false when elem's values do not fit our int64 (uint64 above
 * INT64_MAX) or elem is not an integer type. */
static bool fi_math_wrap(int32_t elem, int64_t v, int64_t *out) {
    switch (elem) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *out = (int8_t)v; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *out = (uint8_t)v; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: *out = (int16_t)v; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: *out = (uint16_t)v; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = (int32_t)v; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: *out = (uint32_t)v; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = v; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: *out = v; return v >= 0;
    case FI_MATH_BOOL: *out = v != 0; return true;
    case FI_MATH_UINT4: *out = v & 15; return true;
    case FI_MATH_INT4: *out = (v & 15) >= 8 ? (v & 15) - 16 : (v & 15); return true;
    default: return false;
    }
}

/* True when elem holds v exactly: arithmetic results that overflow their
 * type are left unknown (ONNX Runtime wraps them, exporters never mean it). */
static bool fi_math_fits(int32_t elem, int64_t v) {
    int64_t w;
    return fi_math_wrap(elem, v, &w) && w == v;
}

/* v rounded to what elem holds; false for float types whose rounding we do
 * not model (float16, bfloat16, float8: values of shape computations are
 * never in them). */
static bool fi_math_round(int32_t elem, double v, double *out) {
    if (elem == FI_MATH_DOUBLE) {
        *out = v;
        return true;
    }
    if (elem != FI_MATH_FLOAT) return false;
    if (isfinite(v) && fabs(v) > FLT_MAX)
        *out = v > 0 ? INFINITY : -INFINITY; /* the cast would be undefined */
    else
        *out = (float)v;
    return true;
}

/* A double truncated toward zero into elem (Cast float -> int); false for
 * NaN and values outside elem, where C++'s cast is undefined. */
static bool fi_math_trunc(int32_t elem, double v, int64_t *out) {
    if (elem == FI_MATH_BOOL) {
        *out = v != 0; /* NaN is true, as in C++ */
        return true;
    }
    if (isnan(v) || v <= -9.2e18 || v >= 9.2e18) return false;
    *out = (int64_t)v;
    return fi_math_fits(elem, *out);
}

/* -------------------------------------------------- the broadcast iterator */

/* Walks the elements of an output shape in row-major order and keeps, for
 * each argument broadcast to it, the flat index of the element read there
 * (stride 0 along the dims the argument stretches).  Reductions use it
 * backwards: the input shape is walked, the kept-dims output shape is the
 * argument, and its index is where each element accumulates. */
typedef struct fi_math_iter {
    int rank;
    size_t n_args;
    int64_t dims[FI_MAX_RANK];
    int64_t pos[FI_MAX_RANK];
    int64_t stride[FI_MATH_MAX_ARGS][FI_MAX_RANK];
    int64_t off[FI_MATH_MAX_ARGS];
} fi_math_iter;

/* Callers guarantee: every dim known, count of the shape > 0 and at most
 * FI_MAX_CONST_ELEMS, each argument's rank <= rank and broadcastable. */
static void fi_math_iter_init(fi_math_iter *it, int rank, const fi_dim *dims) {
    memset(it, 0, sizeof *it);
    it->rank = rank;
    for (int d = 0; d < rank; d++) it->dims[d] = dims[d].v;
}

static void fi_math_iter_arg(fi_math_iter *it, int rank, const fi_dim *dims) {
    size_t a = it->n_args++;
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        int o = it->rank - rank + d;
        it->stride[a][o] = dims[d].v == 1 ? 0 : s;
        s *= dims[d].v;
    }
}

static void fi_math_iter_next(fi_math_iter *it) {
    for (int d = it->rank - 1; d >= 0; d--) {
        for (size_t a = 0; a < it->n_args; a++) it->off[a] += it->stride[a][d];
        if (++it->pos[d] < it->dims[d]) return;
        for (size_t a = 0; a < it->n_args; a++) it->off[a] -= it->stride[a][d] * it->dims[d];
        it->pos[d] = 0;
    }
}

/* --------------------------------------------------------- scalar kernels */

typedef enum fi_math_op {
    FI_MATH_NONE, /* no constant evaluation */
    FI_MATH_ADD,
    FI_MATH_SUB,
    FI_MATH_MUL,
    FI_MATH_DIV,
    FI_MATH_MOD,
    FI_MATH_FMOD,
    FI_MATH_POW,
    FI_MATH_MIN,
    FI_MATH_MAX,
    FI_MATH_MEAN,
    FI_MATH_EQ,
    FI_MATH_LT,
    FI_MATH_GT,
    FI_MATH_LE,
    FI_MATH_GE,
    FI_MATH_AND,
    FI_MATH_OR,
    FI_MATH_XOR,
    FI_MATH_WHERE,
    FI_MATH_IDENT,
    FI_MATH_NEG,
    FI_MATH_ABS,
    FI_MATH_FLOOR,
    FI_MATH_CEIL,
    FI_MATH_SQRT,
    FI_MATH_SIGN,
    FI_MATH_NOT,
    FI_MATH_RELU,
    FI_MATH_RECIP,
    FI_MATH_ROUND,
    FI_MATH_EXP,
    FI_MATH_LOG,
    FI_MATH_SUM,
    FI_MATH_PROD, /* reductions (ADD/MUL elementwise) */
} fi_math_op;

static bool fi_math_int_pow(int64_t a, int64_t b, int64_t *r) {
    if (b < 0) {
        /* 1/a^|b| truncates to 0 unless a is 1 or -1; C++'s pow on ints
         * goes through double here, so leave it unknown */
        if (a != 1 && a != -1) return false;
        *r = (a == -1 && (b & 1)) ? -1 : 1;
        return true;
    }
    int64_t acc = 1, base = a;
    while (b > 0) {
        if ((b & 1) && __builtin_mul_overflow(acc, base, &acc)) return false;
        b >>= 1;
        if (b > 0 && __builtin_mul_overflow(base, base, &base)) return false;
    }
    *r = acc;
    return true;
}

/* Integer kernels; false leaves the value unknown (overflow, division by
 * zero). */
static bool fi_math_int_kernel(fi_math_op op, int64_t a, int64_t b, int64_t c, int64_t *r) {
    switch (op) {
    case FI_MATH_ADD:
    case FI_MATH_SUM: return !__builtin_add_overflow(a, b, r);
    case FI_MATH_SUB: return !__builtin_sub_overflow(a, b, r);
    case FI_MATH_MUL:
    case FI_MATH_PROD: return !__builtin_mul_overflow(a, b, r);
    case FI_MATH_DIV:
        /* Integer Div truncates toward zero: ONNX Runtime divides with C++'s
         * `/` and the ONNX reference casts a true quotient back to the
         * integer type; numpy's floor division would differ for negative
         * operands (-7 / 2 is -3 here, not -4). */
        if (b == 0 || (a == INT64_MIN && b == -1)) return false;
        *r = a / b;
        return true;
    case FI_MATH_MOD:
    case FI_MATH_FMOD:
        if (b == 0) return false;
        *r = (b == -1) ? 0 : a % b; /* fmod=1: sign of the dividend, as C */
        /* fmod=0: sign of the divisor, as Python and numpy.mod */
        if (op == FI_MATH_MOD && *r != 0 && ((*r < 0) != (b < 0))) *r += b;
        return true;
    case FI_MATH_POW: return fi_math_int_pow(a, b, r);
    case FI_MATH_MIN: *r = a < b ? a : b; return true;
    case FI_MATH_MAX: *r = a > b ? a : b; return true;
    case FI_MATH_EQ: *r = a == b; return true;
    case FI_MATH_LT: *r = a < b; return true;
    case FI_MATH_GT: *r = a > b; return true;
    case FI_MATH_LE: *r = a <= b; return true;
    case FI_MATH_GE: *r = a >= b; return true;
    case FI_MATH_AND: *r = (a != 0) && (b != 0); return true;
    case FI_MATH_OR: *r = (a != 0) || (b != 0); return true;
    case FI_MATH_XOR: *r = (a != 0) != (b != 0); return true;
    case FI_MATH_WHERE: *r = a ? b : c; return true;
    case FI_MATH_IDENT:
    case FI_MATH_FLOOR:
    case FI_MATH_CEIL: *r = a; return true;
    case FI_MATH_NEG: return !__builtin_sub_overflow((int64_t)0, a, r);
    case FI_MATH_ABS:
        if (a >= 0) {
            *r = a;
            return true;
        }
        return !__builtin_sub_overflow((int64_t)0, a, r);
    case FI_MATH_SIGN: *r = (a > 0) - (a < 0); return true;
    case FI_MATH_NOT: *r = a == 0; return true;
    case FI_MATH_RELU: *r = a > 0 ? a : 0; return true;
    default: return false;
    }
}

/* Float kernels (IEEE semantics: x / 0 is inf, as in ONNX Runtime). */
static bool fi_math_float_kernel(fi_math_op op, double a, double b, double c, double *r) {
    switch (op) {
    case FI_MATH_ADD:
    case FI_MATH_SUM: *r = a + b; return true;
    case FI_MATH_SUB: *r = a - b; return true;
    case FI_MATH_MUL:
    case FI_MATH_PROD: *r = a * b; return true;
    case FI_MATH_DIV: *r = a / b; return true;
    case FI_MATH_FMOD: *r = fmod(a, b); return true;
    case FI_MATH_POW: *r = pow(a, b); return true;
    case FI_MATH_MIN: *r = (isnan(a) || isnan(b)) ? NAN : a < b ? a : b; return true;
    case FI_MATH_MAX: *r = (isnan(a) || isnan(b)) ? NAN : a > b ? a : b; return true;
    case FI_MATH_EQ: *r = a == b; return true;
    case FI_MATH_LT: *r = a < b; return true;
    case FI_MATH_GT: *r = a > b; return true;
    case FI_MATH_LE: *r = a <= b; return true;
    case FI_MATH_GE: *r = a >= b; return true;
    case FI_MATH_WHERE: *r = a != 0 ? b : c; return true;
    case FI_MATH_IDENT: *r = a; return true;
    case FI_MATH_NEG: *r = -a; return true;
    case FI_MATH_ABS: *r = fabs(a); return true;
    case FI_MATH_FLOOR: *r = floor(a); return true;
    case FI_MATH_CEIL: *r = ceil(a); return true;
    case FI_MATH_SQRT: *r = sqrt(a); return true;
    case FI_MATH_RECIP: *r = 1.0 / a; return true;
    case FI_MATH_ROUND:
        *r = nearbyint(a);
        return true; /* half to even, the default rounding mode */
    case FI_MATH_EXP: *r = exp(a); return true;
    case FI_MATH_LOG: *r = log(a); return true;
    case FI_MATH_SIGN: *r = a > 0 ? 1.0 : a < 0 ? -1.0 : a; return true; /* 0 and NaN stay */
    case FI_MATH_RELU: *r = a > 0 ? a : (a < 0 ? 0.0 : a); return true;
    default: return false; /* Mod without fmod=1 on floats is invalid: the rule refuses it */
    }
}

/* ------------------------------------------------------------ evaluators */

/* A value computed here (an intermediate of a variadic op, or the result):
 * a tensor whose dims live inside it and whose data is malloc'ed (at most
 * FI_MAX_CONST_ELEMS elements, so never an untrusted size). */
typedef struct fi_math_val {
    fi_tensor t;
    fi_dim dims[FI_MAX_RANK];
} fi_math_val;

static void fi_math_val_free(fi_math_val *v) {
    free(v->t.ci);
    free(v->t.cf);
    v->t.ci = NULL;
    v->t.cf = NULL;
}

/* True when t's value is known and consistent with its shape. */
static bool fi_math_known(const fi_tensor *t) {
    return t && t->n_const >= 0 && t->elem && fi_all_known(t) && fi_numel(t) == t->n_const &&
           (fi_is_int_type(t->elem) ? t->ci != NULL : fi_is_float_type(t->elem) && t->cf != NULL);
}

/* Makes v an empty value of elem with the given shape, with room for its
 * elements; false when too large (FI_MAX_CONST_ELEMS) or elem is neither an
 * integer nor a float type. */
static bool fi_math_val_init(fi_math_val *v, int32_t elem, int rank, const fi_dim *dims) {
    memset(v, 0, sizeof *v);
    int64_t count = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d].v < 0) return false;
        v->dims[d] = dims[d];
        if (__builtin_mul_overflow(count, dims[d].v, &count) || count > FI_MAX_CONST_ELEMS)
            return false;
    }
    v->t = (fi_tensor){.elem = elem, .rank = rank, .dims = v->dims, .n_const = count, .blame = -1};
    if (fi_is_int_type(elem))
        v->t.ci = xmallocarray((size_t)count, sizeof *v->t.ci);
    else if (fi_is_float_type(elem))
        v->t.cf = xmallocarray((size_t)count, sizeof *v->t.cf);
    return v->t.ci || v->t.cf;
}

/* Stores element i of v from an int (integer ops, float comparisons) or a
 * double result; false when v's type cannot hold it. */
static bool fi_math_store_int(fi_math_val *v, int64_t i, int64_t r) {
    if (v->t.ci) {
        v->t.ci[i] = r;
        return fi_math_fits(v->t.elem, r);
    }
    return fi_math_round(v->t.elem, (double)r, &v->t.cf[i]);
}

static bool fi_math_store_float(fi_math_val *v, int64_t i, double r) {
    if (v->t.ci)
        return fi_math_trunc(v->t.elem, r, &v->t.ci[i]) &&
               (v->t.elem != FI_MATH_BOOL || r == 0 || r == 1);
    return fi_math_round(v->t.elem, r, &v->t.cf[i]);
}

/* op over args[0..count) broadcast together, into out (of elem).  The data
 * arguments (all but Where's condition) must share integer-ness: mixed
 * forms (Pow of an int by a float) are left unknown.  Returns true with out
 * filled (free it), false when the value stays unknown. */
static bool fi_math_eval(fi_node *n, fi_math_op op, fi_tensor *const *args, size_t count,
                         int32_t elem, fi_math_val *out) {
    size_t first = op == FI_MATH_WHERE ? 1 : 0;
    if (count == 0 || count > FI_MATH_MAX_ARGS || count <= first) return false;
    for (size_t a = 0; a < count; a++)
        if (!fi_math_known(args[a])) return false;
    bool ints = fi_is_int_type(args[first]->elem);
    for (size_t a = first; a < count; a++)
        if (fi_is_int_type(args[a]->elem) != ints) return false;
    if (op == FI_MATH_WHERE && !fi_is_int_type(args[0]->elem)) return false;
    int rank;
    fi_dim dims[FI_MAX_RANK];
    if (fi_broadcast(n, args, count, &rank, dims) != 0) return false;
    if (!fi_math_val_init(out, elem, rank, dims)) {
        fi_math_val_free(out);
        return false;
    }
    if (out->t.n_const == 0) return true;
    fi_math_iter it;
    fi_math_iter_init(&it, rank, dims);
    for (size_t a = 0; a < count; a++) fi_math_iter_arg(&it, args[a]->rank, args[a]->dims);
    for (int64_t i = 0; i < out->t.n_const; i++, fi_math_iter_next(&it)) {
        bool ok;
        if (ints) {
            int64_t v[FI_MATH_MAX_ARGS] = {0}, r;
            for (size_t a = 0; a < count; a++) v[a] = args[a]->ci[it.off[a]];
            ok = fi_math_int_kernel(op, v[0], v[1], v[2], &r) && fi_math_store_int(out, i, r);
        } else {
            double v[FI_MATH_MAX_ARGS] = {0}, r;
            for (size_t a = first; a < count; a++) v[a] = args[a]->cf[it.off[a]];
            if (first) v[0] = (double)args[0]->ci[it.off[0]];
            ok = fi_math_float_kernel(op, v[0], v[1], v[2], &r) && fi_math_store_float(out, i, r);
        }
        if (!ok) {
            fi_math_val_free(out);
            return false;
        }
    }
    return true;
}

/* Sets output k to v's value (v is freed). */
static int fi_math_emit(fi_node *n, size_t k, fi_math_val *v) {
    int rc = v->t.ci ? fi_set_value_ints(n, k, v->t.elem, v->t.rank, v->t.dims, v->t.ci)
                     : fi_set_value_floats(n, k, v->t.elem, v->t.rank, v->t.dims, v->t.cf);
    fi_math_val_free(v);
    return rc;
}

/* A variadic op (Sum, Max, Mean...) folded pairwise left to right; Mean
 * divides the sum at the end.  Sets output 0 when the value is known. */
static int fi_math_eval_variadic(fi_node *n, fi_math_op op, int32_t elem) {
    fi_math_op step = op == FI_MATH_MEAN ? FI_MATH_ADD : op;
    fi_math_val acc[2];
    fi_tensor *args[2] = {n->in[0], NULL};
    if (n->n_in == 1 && !fi_math_eval(n, FI_MATH_IDENT, args, 1, elem, &acc[0])) return 0;
    for (size_t k = 1; k < n->n_in; k++) {
        args[1] = n->in[k];
        bool ok = fi_math_eval(n, step, args, 2, elem, &acc[k & 1]);
        if (k > 1) fi_math_val_free(&acc[(k - 1) & 1]);
        if (!ok) return 0;
        args[0] = &acc[k & 1].t;
    }
    fi_math_val *res = &acc[(n->n_in - 1) & 1];
    if (op == FI_MATH_MEAN) {
        if (!res->t.cf) { /* Mean is defined on floats only */
            fi_math_val_free(res);
            return 0;
        }
        for (int64_t i = 0; i < res->t.n_const; i++)
            fi_math_round(elem, res->t.cf[i] / (double)n->n_in, &res->t.cf[i]);
    }
    return fi_math_emit(n, 0, res);
}

/* ----------------------------------------------------- elementwise rules */

/* Which output type an elementwise op has. */
typedef enum fi_math_out { FI_MATH_LIKE_IN, FI_MATH_LIKE_FIRST, FI_MATH_BOOL_OUT } fi_math_out;

typedef struct fi_math_spec {
    const char *op;
    fi_math_op code;
    fi_math_out out;
} fi_math_spec;

/* Constant-evaluated or bool-typed ops; every other op of the unary and
 * broadcast rules has the type of its (first data) input and no value. */
static const fi_math_spec fi_math_specs[] = {
    {"Add", FI_MATH_ADD, FI_MATH_LIKE_IN},
    {"Sub", FI_MATH_SUB, FI_MATH_LIKE_IN},
    {"Mul", FI_MATH_MUL, FI_MATH_LIKE_IN},
    {"Div", FI_MATH_DIV, FI_MATH_LIKE_IN},
    {"Mod", FI_MATH_MOD, FI_MATH_LIKE_IN},
    {"Pow", FI_MATH_POW, FI_MATH_LIKE_FIRST},
    {"Min", FI_MATH_MIN, FI_MATH_LIKE_IN},
    {"Max", FI_MATH_MAX, FI_MATH_LIKE_IN},
    {"Sum", FI_MATH_ADD, FI_MATH_LIKE_IN},
    {"Mean", FI_MATH_MEAN, FI_MATH_LIKE_IN},
    {"Equal", FI_MATH_EQ, FI_MATH_BOOL_OUT},
    {"Less", FI_MATH_LT, FI_MATH_BOOL_OUT},
    {"Greater", FI_MATH_GT, FI_MATH_BOOL_OUT},
    {"LessOrEqual", FI_MATH_LE, FI_MATH_BOOL_OUT},
    {"GreaterOrEqual", FI_MATH_GE, FI_MATH_BOOL_OUT},
    {"And", FI_MATH_AND, FI_MATH_BOOL_OUT},
    {"Or", FI_MATH_OR, FI_MATH_BOOL_OUT},
    {"Xor", FI_MATH_XOR, FI_MATH_BOOL_OUT},
    {"Where", FI_MATH_WHERE, FI_MATH_LIKE_IN},
    {"Neg", FI_MATH_NEG, FI_MATH_LIKE_IN},
    {"Abs", FI_MATH_ABS, FI_MATH_LIKE_IN},
    {"Floor", FI_MATH_FLOOR, FI_MATH_LIKE_IN},
    {"Ceil", FI_MATH_CEIL, FI_MATH_LIKE_IN},
    {"Sqrt", FI_MATH_SQRT, FI_MATH_LIKE_IN},
    {"Sign", FI_MATH_SIGN, FI_MATH_LIKE_IN},
    {"Not", FI_MATH_NOT, FI_MATH_BOOL_OUT},
    {"Relu", FI_MATH_RELU, FI_MATH_LIKE_IN},
    {"IsNaN", FI_MATH_NONE, FI_MATH_BOOL_OUT},
    /* torchvision's detection transform scales image sizes with these */
    {"Reciprocal", FI_MATH_RECIP, FI_MATH_LIKE_IN},
    {"Round", FI_MATH_ROUND, FI_MATH_LIKE_IN},
    {"Exp", FI_MATH_EXP, FI_MATH_LIKE_IN},
    {"Log", FI_MATH_LOG, FI_MATH_LIKE_IN},
    {"IsInf", FI_MATH_NONE, FI_MATH_BOOL_OUT},
};

static fi_math_spec fi_math_spec_of(const fi_node *n) {
    for (size_t i = 0; i < sizeof fi_math_specs / sizeof *fi_math_specs; i++)
        if (strcmp(fi_math_specs[i].op, n->np->op_type) == 0) return fi_math_specs[i];
    return (fi_math_spec){n->np->op_type, FI_MATH_NONE, FI_MATH_LIKE_IN};
}

/* The output type: bool, the first input's, or the first known type among
 * the data inputs (they share T; one may be unknown). */
static int32_t fi_math_out_elem(const fi_node *n, fi_math_out out, size_t first) {
    if (out == FI_MATH_BOOL_OUT) return FI_MATH_BOOL;
    if (out == FI_MATH_LIKE_FIRST) return n->in[first] ? n->in[first]->elem : 0;
    for (size_t k = first; k < n->n_in; k++)
        if (n->in[k] && n->in[k]->elem) return n->in[k]->elem;
    return 0;
}

/* Relu, Exp, Not, IsNaN, HardSwish...: the input's shape; the input's type
 * unless bool-valued. */
static int fi_math_rule_unary(fi_node *n) {
    if (fi_math_arity(n, 1, 1, 1)) return -1;
    fi_math_spec s = fi_math_spec_of(n);
    fi_tensor *x = n->in[0];
    int32_t elem = s.out == FI_MATH_BOOL_OUT ? FI_MATH_BOOL : x->elem;
    if (fi_set_shape(n, 0, elem, x->rank, x->dims)) return -1;
    fi_math_val v;
    if (s.code != FI_MATH_NONE && fi_math_eval(n, s.code, n->in, 1, elem, &v) &&
        fi_math_emit(n, 0, &v))
        return -1;
    fi_math_blame(n);
    return 0;
}

/* Before opset 7, Add/Sub/Mul/Div/Pow/And/Or/Xor/Equal/Less/Greater took a
 * `broadcast` attribute: B stretched onto A (aligned at `axis`), so the
 * output has A's shape. */
static bool fi_math_legacy_broadcast(const fi_node *n) {
    return n->opset > 0 && n->opset < 7 && n->n_in == 2 && fi_attr_int(n, "broadcast", 0) != 0;
}

/* Add, Equal, Where, Sum, BitShift...: multidirectional broadcasting of
 * all inputs (Where's three, Sum's any number). */
static int fi_math_rule_broadcast(fi_node *n) {
    fi_math_spec s = fi_math_spec_of(n);
    const char *op = n->np->op_type;
    bool variadic =
        !strcmp(op, "Sum") || !strcmp(op, "Mean") || !strcmp(op, "Min") || !strcmp(op, "Max");
    bool where = s.code == FI_MATH_WHERE;
    if (fi_math_arity(n, variadic ? 1 : where ? 3 : 2, variadic ? SIZE_MAX : where ? 3 : 2, 1))
        return -1;
    if (s.code == FI_MATH_MOD) {
        bool fmod_ = fi_attr_int(n, "fmod", 0) != 0;
        int32_t e = fi_math_out_elem(n, FI_MATH_LIKE_IN, 0);
        if (!fmod_ && fi_is_float_type(e))
            return fi_fail(n, "Mod of floating-point inputs needs fmod=1");
        if (fmod_) s.code = FI_MATH_FMOD;
    }
    int32_t elem = fi_math_out_elem(n, s.out, where ? 1 : 0);
    int rank = -1;
    fi_dim dims[FI_MAX_RANK];
    if (fi_math_legacy_broadcast(n)) {
        rank = n->in[0]->rank;
        if (rank > 0) memcpy(dims, n->in[0]->dims, (size_t)rank * sizeof *dims);
    } else {
        int rc = fi_broadcast(n, n->in, n->n_in, &rank, dims);
        if (rc < 0) return -1;
        if (rc > 0) rank = -1;
    }
    if (fi_set_shape(n, 0, elem, rank, dims)) return -1;
    if (rank >= 0 && s.code != FI_MATH_NONE && !fi_math_legacy_broadcast(n)) {
        fi_math_val v;
        if (variadic) {
            if (fi_math_eval_variadic(n, s.code, elem)) return -1;
        } else if (fi_math_eval(n, s.code, n->in, n->n_in, elem, &v) && fi_math_emit(n, 0, &v)) {
            return -1;
        }
    }
    fi_math_blame(n);
    return 0;
}

/* PRelu: slope broadcasts onto X one way (opset 7 on), so the output is X's
 * shape, with X's unknown dims learned from the slope's. */
static int fi_math_rule_prelu(fi_node *n) {
    if (fi_math_arity(n, 2, 2, 1)) return -1;
    fi_tensor *x = n->in[0], *slope = n->in[1];
    if (x->rank < 0 || slope->rank < 0 || n->opset < 7) return fi_set_like(n, 0, x);
    if (slope->rank > x->rank)
        return fi_fail(n, "slope has rank %d, more than X's %d: it cannot broadcast onto X",
                       slope->rank, x->rank);
    int rank;
    fi_dim dims[FI_MAX_RANK];
    if (fi_broadcast(n, n->in, 2, &rank, dims)) return -1;
    for (int d = 0; d < rank; d++)
        if (x->dims[d].v >= 0 && dims[d].v != x->dims[d].v)
            return fi_fail(n, "slope dim %d (%lld) does not broadcast onto X's %lld",
                           d - (rank - slope->rank), (long long)dims[d].v, (long long)x->dims[d].v);
    return fi_set_shape(n, 0, x->elem, rank, dims);
}

/* ------------------------------------------------------------ Clip, Cast */

/* Clip's bound k (1: min, 2: max): an attribute before opset 11, an
 * optional scalar input from 11.  *known false when an input bound's value
 * is unknown. */
static double fi_math_clip_bound(fi_node *n, size_t k, bool *known) {
    double dflt = k == 1 ? -INFINITY : INFINITY;
    if (n->opset > 0 && n->opset < 11)
        return fi_attr_float(n, k == 1 ? "min" : "max", k == 1 ? -FLT_MAX : FLT_MAX);
    if (!fi_in(n, k)) return dflt;
    const double *v;
    size_t len;
    if (!fi_in_floats(n, k, &v, &len) || len != 1) {
        *known = false;
        return dflt;
    }
    return v[0];
}

static void fi_math_clip_value(fi_node *n) {
    fi_tensor *x = n->in[0];
    bool known = true;
    double lo = fi_math_clip_bound(n, 1, &known), hi = fi_math_clip_bound(n, 2, &known);
    fi_math_val v;
    if (!known || !fi_math_known(x)) return;
    if (!fi_math_val_init(&v, x->elem, x->rank, x->dims)) {
        fi_math_val_free(&v);
        return;
    }
    bool ok = true;
    for (int64_t i = 0; i < v.t.n_const && ok; i++) {
        if (v.t.ci) {
            /* int bounds compare as ints: doubles hold them exactly up to 2^53 */
            int64_t e = x->ci[i];
            if ((double)e < lo) ok = fi_math_trunc(x->elem, ceil(lo), &e);
            if (ok && (double)e > hi) ok = fi_math_trunc(x->elem, floor(hi), &e);
            v.t.ci[i] = e;
        } else {
            double e = x->cf[i];
            v.t.cf[i] = e < lo ? lo : e > hi ? hi : e;
            if (lo > hi) v.t.cf[i] = hi; /* min(max(x, lo), hi), as ONNX Runtime */
        }
    }
    if (ok)
        fi_math_emit(n, 0, &v);
    else
        fi_math_val_free(&v);
}

/* Clip: the input's type and shape. */
static int fi_math_rule_clip(fi_node *n) {
    bool inputs = n->opset == 0 || n->opset >= 11;
    if (fi_math_arity(n, 1, inputs ? 3 : 1, 1)) return -1;
    if (fi_set_like(n, 0, n->in[0])) return -1;
    fi_math_clip_value(n);
    fi_math_blame(n);
    return fi_failed(n) ? -1 : 0;
}

/* Element i of x cast to `to`, into v. */
static bool fi_math_cast_elem(const fi_tensor *x, int64_t i, int32_t to, fi_math_val *v) {
    if (fi_is_int_type(x->elem)) {
        int64_t e = x->ci[i];
        if (v->t.ci) return fi_math_wrap(to, e, &v->t.ci[i]);
        return fi_math_round(to, (double)e, &v->t.cf[i]);
    }
    double e = x->cf[i];
    if (v->t.ci) return fi_math_trunc(to, e, &v->t.ci[i]);
    return fi_math_round(to, e, &v->t.cf[i]);
}

static int fi_math_cast_to(fi_node *n, int32_t to) {
    fi_tensor *x = n->in[0];
    if (fi_set_shape(n, 0, to, x->rank, x->dims)) return -1;
    fi_math_val v;
    if (!to || !fi_math_known(x) || !(fi_is_int_type(to) || fi_is_float_type(to))) return 0;
    if (!fi_math_val_init(&v, to, x->rank, x->dims)) {
        fi_math_val_free(&v);
        return 0;
    }
    for (int64_t i = 0; i < v.t.n_const; i++)
        if (!fi_math_cast_elem(x, i, to, &v)) {
            fi_math_val_free(&v);
            return 0;
        }
    return fi_math_emit(n, 0, &v);
}

/* Cast: the `to` attribute's type: an int from opset 6, the type's name
 * ("FLOAT") before.  saturate (19) only changes float8 values, which are
 * never evaluated. */
static int fi_math_rule_cast(fi_node *n) {
    if (fi_math_arity(n, 1, 1, 1)) return -1;
    const Onnx__AttributeProto *a = fi_attr(n, "to");
    if (!a) return fi_fail(n, "the attribute 'to' is missing");
    int64_t to = a->i;
    if (to == 0 && a->s.len > 0) {
        char name[32];
        const ProtobufCEnumValue *e = protobuf_c_enum_descriptor_get_value_by_name(
            &onnx__tensor_proto__data_type__descriptor,
            fi_attr_string(n, "to", "", name, sizeof name));
        if (!e) return fi_fail(n, "'to' = \"%s\" is not an element type", name);
        to = e->value;
    }
    if (to < 1 || to > FI_MATH_MAX_ELEM)
        return fi_fail(n, "'to' = %lld is not an element type", (long long)to);
    if (fi_math_cast_to(n, (int32_t)to)) return -1;
    fi_math_blame(n);
    return 0;
}

/* CastLike (15): input 1's type. */
static int fi_math_rule_castlike(fi_node *n) {
    if (fi_math_arity(n, 2, 2, 1)) return -1;
    if (fi_math_cast_to(n, n->in[1]->elem)) return -1;
    fi_math_blame(n);
    return 0;
}

/* ------------------------------------------------------------- reductions */

/* The axes a reduction reads: *unknown when they come from an input whose
 * value is unknown; otherwise v/len (len 0: none given). */
typedef struct fi_math_axes {
    const int64_t *v;
    size_t len;
    bool unknown;
    int32_t blame; /* what hides them */
} fi_math_axes;

static fi_math_axes fi_math_axes_of(fi_node *n, bool from_input, size_t k) {
    fi_math_axes ax = {NULL, 0, false, -1};
    if (!from_input) {
        if (!fi_attr_ints(n, "axes", &ax.v, &ax.len)) ax.len = 0;
        return ax;
    }
    const fi_tensor *t = fi_in(n, k);
    if (!t || fi_in_ints(n, k, &ax.v, &ax.len)) return ax;
    if (t->rank == 1 && t->dims[0].v == 0) return ax; /* explicitly empty */
    ax.unknown = true;
    ax.blame = t->blame >= 0 ? t->blame : fi_blame(t);
    return ax;
}

/* Marks the reduced axes of a rank-`rank` input (all when none given). */
static int fi_math_axes_mask(fi_node *n, const fi_math_axes *ax, int rank, bool *mask) {
    for (int d = 0; d < rank; d++) mask[d] = ax->len == 0;
    for (size_t i = 0; i < ax->len; i++) {
        int a;
        if (fi_axis(n, ax->v[i], rank, &a)) return -1;
        mask[a] = true;
    }
    return 0;
}

/* The value of ReduceSum/Prod/Max/Min: every input element accumulates
 * into the output element the iterator maps it to (kept-dims shape, which
 * has the same order as the output without them). */
static void fi_math_reduce_value(fi_node *n, fi_math_op op, const bool *mask, int out_rank,
                                 const fi_dim *out_dims) {
    fi_tensor *x = n->in[0];
    fi_math_val v;
    if (!fi_math_known(x)) return;
    if (!fi_math_val_init(&v, x->elem, out_rank, out_dims)) {
        fi_math_val_free(&v);
        return;
    }
    bool ints = v.t.ci != NULL, ok = true;
    unsigned char *seen = xcalloc((size_t)v.t.n_const, 1);
    fi_dim keep[FI_MAX_RANK];
    for (int d = 0; d < x->rank; d++) keep[d] = mask[d] ? fi_known(1) : x->dims[d];
    for (int64_t o = 0; o < v.t.n_const; o++) {
        if (ints)
            v.t.ci[o] = op == FI_MATH_PROD;
        else
            v.t.cf[o] = op == FI_MATH_PROD;
    }
    fi_math_iter it;
    fi_math_iter_init(&it, x->rank, x->dims);
    fi_math_iter_arg(&it, x->rank, keep);
    for (int64_t i = 0; i < x->n_const && ok; i++, fi_math_iter_next(&it)) {
        int64_t o = it.off[0];
        if (ints) {
            int64_t r = x->ci[i];
            ok = !seen[o] || fi_math_int_kernel(op, v.t.ci[o], x->ci[i], 0, &r);
            v.t.ci[o] = r;
        } else {
            double r = x->cf[i];
            ok = !seen[o] || fi_math_float_kernel(op, v.t.cf[o], x->cf[i], 0, &r);
            v.t.cf[o] = r;
        }
        seen[o] = 1;
    }
    /* Max/Min over nothing (a zero-size reduced dim) have no value */
    for (int64_t o = 0; o < v.t.n_const && ok; o++)
        if (!seen[o] && (op == FI_MATH_MAX || op == FI_MATH_MIN)) ok = false;
    for (int64_t o = 0; o < v.t.n_const && ok && ints; o++) ok = fi_math_fits(v.t.elem, v.t.ci[o]);
    if (ok)
        fi_math_emit(n, 0, &v);
    else
        fi_math_val_free(&v);
    free(seen);
}

static fi_math_op fi_math_reduce_op(const char *op) {
    if (!strcmp(op, "ReduceSum")) return FI_MATH_SUM;
    if (!strcmp(op, "ReduceProd")) return FI_MATH_PROD;
    if (!strcmp(op, "ReduceMax")) return FI_MATH_MAX;
    if (!strcmp(op, "ReduceMin")) return FI_MATH_MIN;
    return FI_MATH_NONE;
}

/* Reduce*: axes an attribute before opset 13 (ReduceSum) or 18 (the
 * others), an optional input from then, with noop_with_empty_axes. */
static int fi_math_rule_reduce(fi_node *n) {
    const char *op = n->np->op_type;
    int64_t since = strcmp(op, "ReduceSum") == 0 ? 13 : 18;
    bool from_input = n->opset == 0 || n->opset >= since;
    if (fi_math_arity(n, 1, from_input ? 2 : 1, 1)) return -1;
    fi_tensor *x = n->in[0];
    /* exactly 1 means true, as ONNX Runtime reads both (keepdims=2 drops) */
    bool keep = fi_attr_int(n, "keepdims", 1) == 1;
    bool noop = from_input && fi_attr_int(n, "noop_with_empty_axes", 0) == 1;
    if (from_input && fi_in(n, 1) && fi_attr(n, "axes"))
        return fi_fail(n, "axes given both as an input and an attribute");
    fi_math_axes ax = fi_math_axes_of(n, from_input, 1);
    if (x->rank < 0 || (ax.unknown && !keep)) return fi_set_type(n, 0, x->elem);
    fi_dim dims[FI_MAX_RANK];
    if (ax.unknown) {
        /* the rank stays; which dims become 1 is unknown */
        for (int d = 0; d < x->rank; d++) dims[d] = fi_math_dim_or_one(x->dims[d], ax.blame);
        return fi_set_shape(n, 0, x->elem, x->rank, dims);
    }
    bool mask[FI_MAX_RANK];
    if (noop && ax.len == 0)
        memset(mask, 0, sizeof mask); /* the identity */
    else if (fi_math_axes_mask(n, &ax, x->rank, mask))
        return -1;
    int rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (!mask[d])
            dims[rank++] = x->dims[d];
        else if (keep)
            dims[rank++] = fi_known(1);
    if (fi_set_shape(n, 0, x->elem, rank, dims)) return -1;
    fi_math_op code = fi_math_reduce_op(op);
    if (code != FI_MATH_NONE) fi_math_reduce_value(n, code, mask, rank, dims);
    fi_math_blame(n);
    return fi_failed(n) ? -1 : 0;
}

/* ArgMax/ArgMin: INT64 indices, one axis, keepdims (select_last_index,
 * from 12, changes values only). */
static int fi_math_rule_arg(fi_node *n) {
    if (fi_math_arity(n, 1, 1, 1)) return -1;
    fi_tensor *x = n->in[0];
    if (x->rank < 0) return fi_set_type(n, 0, FI_MATH_INT64);
    int axis;
    if (fi_axis(n, fi_attr_int(n, "axis", 0), x->rank, &axis)) return -1;
    bool keep = fi_attr_int(n, "keepdims", 1) == 1;
    fi_dim dims[FI_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (d != axis)
            dims[rank++] = x->dims[d];
        else if (keep)
            dims[rank++] = fi_known(1);
    return fi_set_shape(n, 0, FI_MATH_INT64, rank, dims);
}

/* ------------------------------------------------ softmax family, CumSum */

/* Softmax, LogSoftmax, Hardmax: the input's shape; `axis` (default 1
 * before opset 13, -1 from 13) must name a dim. */
static int fi_math_rule_softmax(fi_node *n) {
    if (fi_math_arity(n, 1, 1, 1)) return -1;
    fi_tensor *x = n->in[0];
    int axis;
    if (x->rank == 0) return fi_fail(n, "the input is a scalar; it needs rank >= 1");
    if (x->rank > 0 &&
        fi_axis(n, fi_attr_int(n, "axis", n->opset > 0 && n->opset < 13 ? 1 : -1), x->rank, &axis))
        return -1;
    return fi_set_like(n, 0, x);
}

/* CumSum (11): the input's shape; the axis is a scalar input. */
static int fi_math_rule_cumsum(fi_node *n) {
    if (fi_math_arity(n, 2, 2, 1)) return -1;
    fi_tensor *x = n->in[0], *axis = n->in[1];
    if (axis->rank > 1 || (axis->rank == 1 && axis->dims[0].v >= 0 && axis->dims[0].v != 1))
        return fi_fail(n, "the axis input must be a scalar");
    const int64_t *v;
    size_t len;
    int a;
    if (x->rank >= 0 && fi_in_ints(n, 1, &v, &len) && len == 1 && fi_axis(n, v[0], x->rank, &a))
        return -1;
    return fi_set_like(n, 0, x);
}

/* -------------------------------------------- normalizations, Dropout */

/* InstanceNormalization, GroupNormalization, LpNormalization,
 * MeanVarianceNormalization: X's type and shape; `inputs` inputs. */
static int fi_math_rule_norm_like(fi_node *n, size_t inputs) {
    if (fi_math_arity(n, inputs, inputs, 1)) return -1;
    return fi_set_like(n, 0, n->in[0]);
}

static int fi_math_rule_norm1(fi_node *n) {
    return fi_math_rule_norm_like(n, 1);
}
static int fi_math_rule_norm3(fi_node *n) {
    return fi_math_rule_norm_like(n, 3);
}

/* BatchNormalization's channel count: X's dim 1 (1 for rank-1 X) merged
 * with the rank-1 statistics inputs (opset 9 on; opset 7's spatial=0 form
 * had per-activation statistics of other shapes). */
static int fi_math_bn_channels(fi_node *n, fi_dim *c) {
    fi_tensor *x = n->in[0];
    *c = fi_unknown(-1);
    if (x->rank >= 0) *c = x->rank > 1 ? x->dims[1] : fi_known(1);
    if (n->opset > 0 && n->opset < 9) return 0;
    static const char *const names[] = {"", "scale", "B", "mean", "var"};
    for (size_t k = 1; k < 5; k++) {
        const fi_tensor *t = n->in[k];
        if (t->rank < 0) continue;
        if (t->rank != 1) return fi_fail(n, "%s must have rank 1, has %d", names[k], t->rank);
        *c = fi_dim_merge(n, *c, t->dims[0], "channel counts of X and the statistics");
    }
    return fi_failed(n) ? -1 : 0;
}

/* BatchNormalization: Y like X; mean/var (running statistics, training)
 * and, before opset 14, saved_mean/saved_var: the statistics' type (U/T2
 * from 14) and shape. */
static int fi_math_rule_batchnorm(fi_node *n) {
    bool five = n->opset > 0 && n->opset < 14;
    if (fi_math_arity(n, 5, 5, five ? 5 : 3)) return -1;
    fi_tensor *x = n->in[0], *mean = n->in[3];
    if (!five && fi_attr_int(n, "training_mode", 0) != 0 && n->n_out != 3)
        return fi_fail(n, "training_mode=1 needs 3 outputs, has %zu", n->n_out);
    fi_dim c;
    if (fi_set_like(n, 0, x) || fi_math_bn_channels(n, &c)) return -1;
    int32_t elem = mean->elem ? mean->elem : x->elem;
    for (size_t k = 1; k < n->n_out; k++) {
        if (n->opset > 0 && n->opset < 9) {
            if (fi_set_shape(n, k, elem, mean->rank, mean->dims)) return -1;
        } else if (fi_set_shape(n, k, elem, 1, &c)) {
            return -1;
        }
    }
    return 0;
}

/* LayerNormalization (17): Y like X; Mean and InvStdDev keep X's dims
 * before `axis` and have 1 from it on, in stash_type (float by default). */
static int fi_math_rule_layernorm(fi_node *n) {
    if (fi_math_arity(n, 2, 3, 3)) return -1;
    fi_tensor *x = n->in[0];
    if (fi_set_like(n, 0, x)) return -1;
    int64_t stash = fi_attr_int(n, "stash_type", FI_MATH_FLOAT);
    if (stash < 1 || stash > FI_MATH_MAX_ELEM)
        return fi_fail(n, "stash_type = %lld is not an element type", (long long)stash);
    if (x->rank < 0)
        return fi_set_type(n, 1, (int32_t)stash) || fi_set_type(n, 2, (int32_t)stash) ? -1 : 0;
    int axis;
    if (x->rank == 0) return fi_fail(n, "X is a scalar; it needs rank >= 1");
    if (fi_axis(n, fi_attr_int(n, "axis", -1), x->rank, &axis)) return -1;
    fi_dim dims[FI_MAX_RANK];
    for (int d = 0; d < x->rank; d++) dims[d] = d < axis ? x->dims[d] : fi_known(1);
    if (fi_set_shape(n, 1, (int32_t)stash, x->rank, dims)) return -1;
    return fi_set_shape(n, 2, (int32_t)stash, x->rank, dims);
}

/* Dropout: output like the input; mask of the input's shape, of the
 * input's type in opsets 7-9 (T) and bool from 10.  ratio and
 * training_mode are inputs from 12 (attributes before). */
static int fi_math_rule_dropout(fi_node *n) {
    if (fi_math_arity(n, 1, n->opset == 0 || n->opset >= 12 ? 3 : 1, 2)) return -1;
    fi_tensor *x = n->in[0];
    if (fi_set_like(n, 0, x)) return -1;
    int32_t mask = n->opset > 0 && n->opset < 10 ? x->elem : FI_MATH_BOOL;
    return fi_set_shape(n, 1, mask, x->rank, x->dims);
}

/* ---------------------------------------------------------------- losses */

/* SoftmaxCrossEntropyLoss (12): scores [N, C, D1...], labels [N, D1...],
 * optional weights [C]; the loss is [N, D1...] with reduction "none", else
 * a scalar; the optional log_prob has the scores' shape.
 * NegativeLogLikelihoodLoss (12): input [N, C, D1...], target [N, D1...],
 * the same reduction rule.  Both are what torch.onnx writes for
 * cross_entropy and nll_loss. */
static int fi_math_rule_loss(fi_node *n) {
    if (fi_math_arity(n, 2, 3, 2)) return -1;
    fi_tensor *x = n->in[0], *labels = n->in[1];
    char buf[16];
    const char *red = fi_attr_string(n, "reduction", "mean", buf, sizeof buf);
    if (strcmp(red, "none") && strcmp(red, "mean") && strcmp(red, "sum"))
        return fi_fail(n, "reduction '%s' is not none, mean or sum", red);
    if (x->rank >= 0 && x->rank < 2)
        return fi_fail(n, "the scores need rank >= 2 ([N, C, ...]), have %d", x->rank);
    if (x->rank >= 0 && labels->rank >= 0 && labels->rank != x->rank - 1)
        return fi_fail(n, "the labels need rank %d (the scores' without C), have %d", x->rank - 1,
                       labels->rank);
    if (n->n_out > 1 && fi_set_like(n, 1, x)) return -1;
    if (strcmp(red, "none") != 0) return fi_set_shape(n, 0, x->elem, 0, NULL);
    if (x->rank < 0) return fi_set_type(n, 0, x->elem);
    fi_dim dims[FI_MAX_RANK];
    dims[0] = x->dims[0];
    for (int d = 2; d < x->rank; d++) dims[d - 1] = x->dims[d];
    for (int d = 0; labels->rank >= 0 && d < labels->rank; d++)
        dims[d] = fi_dim_merge(n, dims[d], labels->dims[d], "dims of the scores and the labels");
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, x->elem, x->rank - 1, dims);
}

/* ------------------------------------------------------------------ table */

const fi_rule fi_rules_math[] = {
    /* unary, the input's shape (bool for Not, IsNaN, IsInf) */
    {"Relu", fi_math_rule_unary},
    {"Sigmoid", fi_math_rule_unary},
    {"Tanh", fi_math_rule_unary},
    {"Exp", fi_math_rule_unary},
    {"Log", fi_math_rule_unary},
    {"Sqrt", fi_math_rule_unary},
    {"Abs", fi_math_rule_unary},
    {"Neg", fi_math_rule_unary},
    {"Erf", fi_math_rule_unary},
    {"Floor", fi_math_rule_unary},
    {"Ceil", fi_math_rule_unary},
    {"Round", fi_math_rule_unary},
    {"Reciprocal", fi_math_rule_unary},
    {"Sin", fi_math_rule_unary},
    {"Cos", fi_math_rule_unary},
    {"Tan", fi_math_rule_unary},
    {"Asin", fi_math_rule_unary},
    {"Acos", fi_math_rule_unary},
    {"Atan", fi_math_rule_unary},
    {"Sinh", fi_math_rule_unary},
    {"Cosh", fi_math_rule_unary},
    {"Asinh", fi_math_rule_unary},
    {"Acosh", fi_math_rule_unary},
    {"Atanh", fi_math_rule_unary},
    {"Sign", fi_math_rule_unary},
    {"Softplus", fi_math_rule_unary},
    {"Softsign", fi_math_rule_unary},
    {"HardSigmoid", fi_math_rule_unary},
    {"HardSwish", fi_math_rule_unary},
    {"LeakyRelu", fi_math_rule_unary},
    {"Elu", fi_math_rule_unary},
    {"Selu", fi_math_rule_unary},
    {"Celu", fi_math_rule_unary},
    {"ThresholdedRelu", fi_math_rule_unary},
    {"Mish", fi_math_rule_unary},
    {"Shrink", fi_math_rule_unary},
    {"Gelu", fi_math_rule_unary},
    {"Not", fi_math_rule_unary},
    {"IsNaN", fi_math_rule_unary},
    {"IsInf", fi_math_rule_unary},
    {"BitwiseNot", fi_math_rule_unary},
    {"PRelu", fi_math_rule_prelu},
    /* broadcasting */
    {"Add", fi_math_rule_broadcast},
    {"Sub", fi_math_rule_broadcast},
    {"Mul", fi_math_rule_broadcast},
    {"Div", fi_math_rule_broadcast},
    {"Pow", fi_math_rule_broadcast},
    {"Mod", fi_math_rule_broadcast},
    {"Min", fi_math_rule_broadcast},
    {"Max", fi_math_rule_broadcast},
    {"Sum", fi_math_rule_broadcast},
    {"Mean", fi_math_rule_broadcast},
    {"And", fi_math_rule_broadcast},
    {"Or", fi_math_rule_broadcast},
    {"Xor", fi_math_rule_broadcast},
    {"Equal", fi_math_rule_broadcast},
    {"Less", fi_math_rule_broadcast},
    {"Greater", fi_math_rule_broadcast},
    {"LessOrEqual", fi_math_rule_broadcast},
    {"GreaterOrEqual", fi_math_rule_broadcast},
    {"BitShift", fi_math_rule_broadcast},
    {"BitwiseAnd", fi_math_rule_broadcast},
    {"BitwiseOr", fi_math_rule_broadcast},
    {"BitwiseXor", fi_math_rule_broadcast},
    {"Where", fi_math_rule_broadcast},
    /* Clip, Cast */
    {"Clip", fi_math_rule_clip},
    {"Cast", fi_math_rule_cast},
    {"CastLike", fi_math_rule_castlike},
    /* reductions */
    {"ReduceSum", fi_math_rule_reduce},
    {"ReduceMean", fi_math_rule_reduce},
    {"ReduceMax", fi_math_rule_reduce},
    {"ReduceMin", fi_math_rule_reduce},
    {"ReduceProd", fi_math_rule_reduce},
    {"ReduceL1", fi_math_rule_reduce},
    {"ReduceL2", fi_math_rule_reduce},
    {"ReduceLogSum", fi_math_rule_reduce},
    {"ReduceLogSumExp", fi_math_rule_reduce},
    {"ReduceSumSquare", fi_math_rule_reduce},
    {"ArgMax", fi_math_rule_arg},
    {"ArgMin", fi_math_rule_arg},
    /* softmax family, CumSum */
    {"Softmax", fi_math_rule_softmax},
    {"LogSoftmax", fi_math_rule_softmax},
    {"Hardmax", fi_math_rule_softmax},
    {"CumSum", fi_math_rule_cumsum},
    /* normalizations, Dropout */
    {"BatchNormalization", fi_math_rule_batchnorm},
    {"InstanceNormalization", fi_math_rule_norm3},
    {"LayerNormalization", fi_math_rule_layernorm},
    {"GroupNormalization", fi_math_rule_norm3},
    {"LpNormalization", fi_math_rule_norm1},
    {"MeanVarianceNormalization", fi_math_rule_norm1},
    {"Dropout", fi_math_rule_dropout},
    {"SoftmaxCrossEntropyLoss", fi_math_rule_loss},
    {"NegativeLogLikelihoodLoss", fi_math_rule_loss},
    {NULL, NULL},
};
