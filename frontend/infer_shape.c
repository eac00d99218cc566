/* Shape inference rules: TODO family shape (see infer.h). */
#include "infer.h"

const fi_rule fi_rules_shape[] = {
    {NULL, NULL},
};
