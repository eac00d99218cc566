/* Shape inference rules: TODO family nn (see infer.h). */
#include "infer.h"

const fi_rule fi_rules_nn[] = {
    {NULL, NULL},
};
