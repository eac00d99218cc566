/* Shape inference rules: TODO family math (see infer.h). */
#include "infer.h"

const fi_rule fi_rules_math[] = {
    {NULL, NULL},
};
