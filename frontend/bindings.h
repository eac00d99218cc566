/* frontend/bindings.h — what a caller binds before shapes are inferred:
 * --input-shape NAME=D1,D2,... and --dim SYMBOL=V (fe_options), and the
 * kinds of symbol a dim may stand for.
 *
 * Below both the loader (frontend.c), which takes the bindings, and shape
 * inference (infer/), which applies them: a file both include and neither
 * owns, so that includes run one way (frontend.c -> infer/ -> bindings.h).
 * frontend.h includes it: its users see these as part of frontend.h.
 */
#ifndef ROAMC_FRONTEND_BINDINGS_H
#define ROAMC_FRONTEND_BINDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fe_symbol_kind {
    FE_SYMBOL_INPUT = 1, /* a dim_param of the file (or a --dim name) */
    FE_SYMBOL_DATA = 2,  /* a size that depends on data, planned at an upper bound */
};

/* --input-shape NAME=D1,D2,... */
typedef struct fe_input_shape {
    char *name;
    int64_t *dims;
    size_t rank;
} fe_input_shape;

/* --dim SYMBOL=V */
typedef struct fe_dim_binding {
    char *symbol;
    int64_t value;
} fe_dim_binding;

/* What the caller binds before inference.  Zero-initialize; fill with
 * fe_options_parse; free with fe_options_free. */
typedef struct fe_options {
    fe_input_shape *shapes;
    size_t n_shapes;
    fe_dim_binding *dims;
    size_t n_dims;
    /* Keep values whose shape stays unknown (roamc shapes) instead of
     * failing the load; such a model must not be planned. */
    bool allow_unresolved;
} fe_options;

/* Adds one binding from the command line: flag is "--input-shape" (spec
 * NAME=D1,D2,... or NAME:D1xD2x..., NAME= for a scalar; the last '=' or else the last ':'
 * ending the name, as onnxruntime's and TensorRT's tools spell it) or
 * "--dim" (SYMBOL=V or SYMBOL:V).  Dims are integers from 0 to 2^62.
 * Returns 0, or -1 with a message in err (a name bound twice, bad
 * numbers, out of memory). */
int fe_options_parse(fe_options *o, const char *flag, const char *spec, char *err, size_t errlen);
/* Frees what fe_options_parse added; *o is zeroed (empty) again. */
void fe_options_free(fe_options *o);

#endif
