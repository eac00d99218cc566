/* Shape inference rules: TODO family control (see infer.h). */
#include "infer.h"

const fi_rule fi_rules_control[] = {
    {NULL, NULL},
};
