/* Device profiles: the built-in table, profile files, and an op's seconds
 * on a device (see fit.h; every figure and why: planner/fit/DEVICES.md). */
#include "fit.h"
#include "base.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#define TF 1e12
#define GB 1e9
#define GIB 1073741824.0

/* The host-link figures are effective bandwidths: 80% of the link's raw
 * rate in one direction, about what pinned cudaMemcpy reaches (DEVICES.md). */
#define SRC_PCIE4                                                                                  \
    "PCIe 4.0 x16: 16 GT/s x 16 lanes, 128b/130b = 31.5 GB/s each way (PCI-SIG PCIe Base "         \
    "Specification 4.0, 2017); 80% of it assumed for pinned copies"
#define SRC_PCIE5                                                                                  \
    "PCIe 5.0 x16: 32 GT/s x 16 lanes, 128b/130b = 63 GB/s each way (PCI-SIG PCIe Base "           \
    "Specification 5.0, 2019; datasheet: 128 GB/s both ways); 80% of it assumed for pinned copies"

#define H100_DS "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM"
#define A100_DS "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM"
#define L4_DS "NVIDIA L4 Tensor Core GPU datasheet (2023)"
#define ADA_WP "NVIDIA Ada GPU Architecture whitepaper (2023), GeForce RTX 4090"
#define GH200_DS "NVIDIA GH200 Grace Hopper Superchip datasheet (2023), GH200 with 96GB HBM3"
#define CC89_FP64                                                                                  \
    "CUDA C++ Programming Guide (2023), arithmetic instruction throughput: compute capability "    \
    "8.9 runs fp64 at 2 and fp32 at 128 results per clock per SM, so 1/64 of the fp32 rate"

static const fit_device fit_builtin[] = {
    {.key = "h100",
     .name = "NVIDIA H100 SXM5 80GB",
     .figure = {67 * TF, 494.5 * TF, 989.5 * TF, 989.5 * TF, 34 * TF, 3350 * GB, 50 * GB, 80 * GIB},
     .source = {H100_DS ": FP32 67 TFLOPS",
                H100_DS ": TF32 Tensor Core 989 TFLOPS with sparsity; half without",
                H100_DS ": BFLOAT16 Tensor Core 1,979 TFLOPS with sparsity; half without",
                H100_DS ": FP16 Tensor Core 1,979 TFLOPS with sparsity; half without",
                H100_DS ": FP64 34 TFLOPS", H100_DS ": GPU memory bandwidth 3.35 TB/s", SRC_PCIE5,
                H100_DS ": GPU memory 80GB HBM3"},
     .tf32_matmul = false,
     .tf32_conv = true},
    {.key = "a100",
     .name = "NVIDIA A100 SXM4 80GB",
     .figure = {19.5 * TF, 156 * TF, 312 * TF, 312 * TF, 9.7 * TF, 2039 * GB, 25 * GB, 80 * GIB},
     .source = {A100_DS ": FP32 19.5 TFLOPS",
                A100_DS ": Tensor Float 32 (TF32) 156 TFLOPS (312 with sparsity)",
                A100_DS ": BFLOAT16 Tensor Core 312 TFLOPS (624 with sparsity)",
                A100_DS ": FP16 Tensor Core 312 TFLOPS (624 with sparsity)",
                A100_DS ": FP64 9.7 TFLOPS", A100_DS ": GPU memory bandwidth 2,039 GB/s", SRC_PCIE4,
                A100_DS ": GPU memory 80GB HBM2e"},
     .tf32_matmul = false,
     .tf32_conv = true},
    {.key = "l4",
     .name = "NVIDIA L4 24GB",
     .figure = {30.3 * TF, 60 * TF, 121 * TF, 121 * TF, 30.3 / 64 * TF, 300 * GB, 25 * GB,
                24 * GIB},
     .source = {L4_DS ": FP32 30.3 teraFLOPs",
                L4_DS ": TF32 Tensor Core 120 teraFLOPS with sparsity; half without",
                L4_DS ": BFLOAT16 Tensor Core 242 teraFLOPS with sparsity; half without",
                L4_DS ": FP16 Tensor Core 242 teraFLOPS with sparsity; half without", CC89_FP64,
                L4_DS ": GPU memory bandwidth 300GB/s", SRC_PCIE4, L4_DS ": GPU memory 24GB"},
     .tf32_matmul = false,
     .tf32_conv = true},
    {.key = "4090",
     .name = "NVIDIA GeForce RTX 4090",
     .figure = {82.6 * TF, 82.6 * TF, 165.2 * TF, 165.2 * TF, 82.6 / 64 * TF, 1008 * GB, 25 * GB,
                24 * GIB},
     .source = {ADA_WP ": peak FP32 TFLOPS (non-tensor) 82.6",
                ADA_WP ": peak TF32 Tensor TFLOPS 82.6 (165.2 with sparsity)",
                ADA_WP ": peak BF16 Tensor TFLOPS with FP32 accumulate 165.2 (330.4 sparse)",
                ADA_WP ": peak FP16 Tensor TFLOPS with FP32 accumulate 165.2 (330.4 sparse; "
                       "PyTorch accumulates fp16 products in fp32)",
                CC89_FP64, ADA_WP ": memory bandwidth 1008 GB/sec (GDDR6X, 21 Gbps, 384-bit)",
                SRC_PCIE4, ADA_WP ": 24 GB GDDR6X"},
     .tf32_matmul = false,
     .tf32_conv = true},
    {.key = "gh200",
     .name = "NVIDIA GH200 Grace Hopper 96GB",
     .figure = {67 * TF, 494.5 * TF, 989.5 * TF, 989.5 * TF, 34 * TF, 4000 * GB, 360 * GB,
                96 * GIB},
     .source = {GH200_DS ": FP32 67 TFLOPS",
                GH200_DS ": TF32 Tensor Core 494 TFLOPS (989 with sparsity)",
                GH200_DS ": BFLOAT16 Tensor Core 990 TFLOPS (1,979 with sparsity)",
                GH200_DS ": FP16 Tensor Core 990 TFLOPS (1,979 with sparsity)",
                GH200_DS ": FP64 34 TFLOPS", GH200_DS ": GPU memory bandwidth 4 TB/s (HBM3)",
                GH200_DS ": NVLink-C2C CPU-GPU 900 GB/s both ways, 450 each way; 80% of it "
                         "assumed for copies",
                GH200_DS ": 96GB HBM3"},
     .tf32_matmul = false,
     .tf32_conv = true},
};

#define FIT_N_BUILTIN (sizeof fit_builtin / sizeof fit_builtin[0])

/* Names fit_device_find takes besides the keys. */
static const struct {
    const char *alias, *key;
} fit_aliases[] = {
    {"h100-sxm", "h100"},         {"h100-sxm5", "h100"},     {"h100-80gb", "h100"},
    {"a100-sxm", "a100"},         {"a100-80gb", "a100"},     {"a100-sxm4", "a100"},
    {"nvidia-l4", "l4"},          {"rtx4090", "4090"},       {"rtx-4090", "4090"},
    {"geforce-rtx-4090", "4090"}, {"grace-hopper", "gh200"}, {"gh200-96gb", "gh200"},
};

/* JSON fields of the figures, their unit (the factor to SI) and label. */
static const struct {
    const char *field;
    double unit;
    const char *label;
} fit_fields[FIT_N_FIGURES] = {
    [FIT_FP32] = {"fp32_tflops", TF, "fp32"},
    [FIT_TF32] = {"tf32_tflops", TF, "tf32 tensor"},
    [FIT_BF16] = {"bf16_tflops", TF, "bf16 tensor"},
    [FIT_FP16] = {"fp16_tflops", TF, "fp16 tensor"},
    [FIT_FP64] = {"fp64_tflops", TF, "fp64"},
    [FIT_MEMORY_BW] = {"memory_gbps", GB, "memory bandwidth"},
    [FIT_HOST_BW] = {"host_link_gbps", GB, "host link"},
    [FIT_MEMORY] = {"memory_gib", GIB, "memory"},
};

const char *fit_figure_field(int figure) {
    return figure >= 0 && figure < FIT_N_FIGURES ? fit_fields[figure].field : NULL;
}

size_t fit_device_count(void) {
    return FIT_N_BUILTIN;
}

const fit_device *fit_device_builtin(size_t i) {
    return i < FIT_N_BUILTIN ? &fit_builtin[i] : NULL;
}

const fit_device *fit_device_find(const char *name) {
    ROAMC_ASSERT(name);
    const char *key = name;
    for (size_t a = 0; a < sizeof fit_aliases / sizeof fit_aliases[0]; a++)
        if (strcasecmp(name, fit_aliases[a].alias) == 0) key = fit_aliases[a].key;
    for (size_t i = 0; i < FIT_N_BUILTIN; i++)
        if (strcasecmp(key, fit_builtin[i].key) == 0) return &fit_builtin[i];
    return NULL;
}

/* ------------------------------------------------------------ profile files */

static int fit_fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fit_fail(char *err, size_t errlen, const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fe_verrorf(err, errlen, path, NULL, fmt, ap);
    va_end(ap);
    return -1;
}

/* What a JSON value is, for "got ..." in a message. */
static const char *fit_json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* A string field of 1 .. cap-1 bytes with no control characters into out. */
static int fit_load_string(const json_t *v, const char *field, char *out, size_t cap,
                           const char *path, char *err, size_t errlen) {
    if (!json_is_string(v))
        return fit_fail(err, errlen, path, "field '%s': must be a string, got %s", field,
                        fit_json_kind(v));
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len == 0 || len >= cap)
        return fit_fail(err, errlen, path, "field '%s': must be 1 to %zu bytes long, is %zu", field,
                        cap - 1, len);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return fit_fail(err, errlen, path, "field '%s': holds a control character (byte %zu)",
                            field, i);
    memcpy(out, s, len + 1);
    return 0;
}

/* {"value": number > 0, "source": string} into d's figure f. */
static int fit_load_figure(const json_t *v, int f, fit_device *d, const char *path, char *err,
                           size_t errlen) {
    const char *field = fit_fields[f].field;
    if (!json_is_object(v))
        return fit_fail(err, errlen, path,
                        "field '%s': must be an object {\"value\": number, \"source\": string}, "
                        "got %s",
                        field, fit_json_kind(v));
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x) {
        if (strcmp(k, "value") != 0 && strcmp(k, "source") != 0)
            return fit_fail(err, errlen, path,
                            "field '%s.%s': unknown (a figure has value and "
                            "source)",
                            field, k);
    }
    char name[64];
    snprintf(name, sizeof name, "%s.value", field);
    const json_t *val = json_object_get(v, "value");
    if (!val) return fit_fail(err, errlen, path, "field '%s': missing", name);
    if (!json_is_number(val))
        return fit_fail(err, errlen, path, "field '%s': must be a number above 0, got %s", name,
                        fit_json_kind(val));
    double x0 = json_number_value(val);
    /* at most 1e9 of any unit: beyond every device, and the product in SI
     * units stays finite */
    if (!(x0 > 0) || !isfinite(x0) || x0 > 1e9)
        return fit_fail(err, errlen, path,
                        "field '%s': must be a number above 0 and at most 1e9, "
                        "got %g",
                        name, x0);
    d->figure[f] = x0 * fit_fields[f].unit;
    snprintf(name, sizeof name, "%s.source", field);
    const json_t *src = json_object_get(v, "source");
    if (!src) return fit_fail(err, errlen, path, "field '%s': missing", name);
    return fit_load_string(src, name, d->source[f], sizeof d->source[f], path, err, errlen);
}

static int fit_load_object(const json_t *root, fit_device *d, const char *path, char *err,
                           size_t errlen) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)root, k, v) {
        bool known = !strcmp(k, "name") || !strcmp(k, "tf32_matmul") || !strcmp(k, "tf32_conv");
        for (int f = 0; f < FIT_N_FIGURES && !known; f++) known = !strcmp(k, fit_fields[f].field);
        if (!known)
            return fit_fail(err, errlen, path,
                            "field '%s': unknown (the fields are name, fp32_tflops, tf32_tflops, "
                            "bf16_tflops, fp16_tflops, fp64_tflops, memory_gbps, host_link_gbps, "
                            "memory_gib, tf32_matmul, tf32_conv)",
                            k);
    }
    const json_t *name = json_object_get(root, "name");
    if (!name) return fit_fail(err, errlen, path, "field 'name': missing");
    if (fit_load_string(name, "name", d->name, sizeof d->name, path, err, errlen)) return -1;
    for (int f = 0; f < FIT_N_FIGURES; f++) {
        const json_t *x = json_object_get(root, fit_fields[f].field);
        if (!x) return fit_fail(err, errlen, path, "field '%s': missing", fit_fields[f].field);
        if (fit_load_figure(x, f, d, path, err, errlen)) return -1;
    }
    static const char *const flags[2] = {"tf32_matmul", "tf32_conv"};
    bool *dst[2] = {&d->tf32_matmul, &d->tf32_conv};
    for (int i = 0; i < 2; i++) {
        const json_t *x = json_object_get(root, flags[i]);
        if (!x) continue;
        if (!json_is_boolean(x))
            return fit_fail(err, errlen, path, "field '%s': must be true or false, got %s",
                            flags[i], fit_json_kind(x));
        *dst[i] = json_is_true(x);
    }
    return 0;
}

int fit_device_load(const char *path, fit_device *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    d->tf32_matmul = false; /* PyTorch's defaults (fit.h) */
    d->tf32_conv = true;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return fit_fail(err, errlen, path, "cannot read the device profile: %s", strerror(errno));
    json_error_t je;
    json_t *root = json_loadf(fp, 0, &je);
    fclose(fp);
    if (!root)
        return fit_fail(err, errlen, path, "not a JSON device profile: %s (line %d, column %d)",
                        je.text, je.line, je.column);
    int rc = 0;
    if (!json_is_object(root))
        rc = fit_fail(err, errlen, path, "a device profile is a JSON object, this is %s",
                      fit_json_kind(root));
    else
        rc = fit_load_object(root, d, path, err, errlen);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------ listing */

void fit_device_list(FILE *f) {
    fprintf(f, "%-6s %-32s %8s %8s %8s %9s %9s %7s\n", "device", "name", "fp32", "tf32", "bf16",
            "memory", "host", "memory");
    fprintf(f, "%-6s %-32s %8s %8s %8s %9s %9s %7s\n", "", "", "TFLOP/s", "TFLOP/s", "TFLOP/s",
            "GB/s", "GB/s", "GiB");
    for (size_t i = 0; i < FIT_N_BUILTIN; i++) {
        const fit_device *d = &fit_builtin[i];
        fprintf(f, "%-6s %-32s %8.1f %8.1f %8.1f %9.0f %9.0f %7.0f\n", d->key, d->name,
                d->figure[FIT_FP32] / TF, d->figure[FIT_TF32] / TF, d->figure[FIT_BF16] / TF,
                d->figure[FIT_MEMORY_BW] / GB, d->figure[FIT_HOST_BW] / GB,
                d->figure[FIT_MEMORY] / GIB);
    }
}

void fit_device_print(FILE *f, const fit_device *d, const char *indent) {
    static const char *const units[FIT_N_FIGURES] = {"TFLOP/s", "TFLOP/s", "TFLOP/s", "TFLOP/s",
                                                     "TFLOP/s", "GB/s",    "GB/s",    "GiB"};
    fprintf(f, "%sdevice %s%s%s%s\n", indent, d->name, d->key[0] ? " (" : "", d->key,
            d->key[0] ? ")" : "");
    for (int i = 0; i < FIT_N_FIGURES; i++)
        fprintf(f, "%s  %-16s %9.4g %-7s  %s\n", indent, fit_fields[i].label,
                d->figure[i] / fit_fields[i].unit, units[i], d->source[i]);
    fprintf(f, "%s  fp32 matmuls on %s, fp32 convolutions on %s\n", indent,
            d->tf32_matmul ? "tf32" : "fp32", d->tf32_conv ? "tf32" : "fp32");
}

/* ------------------------------------------------------------ seconds */

double fit_op_rate(const fit_device *d, const graph_op_cost *c) {
    int32_t t = c->elem_type;
    if (t == 11) return d->figure[FIT_FP64]; /* DOUBLE */
    if (!c->tensor_op) return d->figure[FIT_FP32];
    if (t == 16 || (t >= 17 && t <= 20) || t == 23) return d->figure[FIT_BF16]; /* BF16, FP8 */
    if (t == 10) return d->figure[FIT_FP16];
    if (t == 1) {
        bool conv = c->rule == GRAPH_COST_CONV || c->rule == GRAPH_COST_CONV_BACKWARD;
        if (conv ? d->tf32_conv : d->tf32_matmul) return d->figure[FIT_TF32];
    }
    return d->figure[FIT_FP32];
}

double fit_op_seconds(const fit_device *d, const graph_op_cost *c) {
    if (c->rule == GRAPH_COST_HOST_COPY) return 0;
    double compute = c->flops / fit_op_rate(d, c);
    double memory = (double)c->bytes / d->figure[FIT_MEMORY_BW];
    return compute > memory ? compute : memory;
}

double fit_copy_seconds(const fit_device *d, uint64_t bytes) {
    return (double)bytes / d->figure[FIT_HOST_BW];
}

void fit_step_sum(const fit_device *d, const graph_op_cost *costs, size_t n, fit_step_cost *out) {
    memset(out, 0, sizeof *out);
    out->n_ops = n;
    for (size_t i = 0; i < n; i++) {
        const graph_op_cost *c = &costs[i];
        ROAMC_ASSERT(c->rule >= 0 && c->rule < GRAPH_COST_N_RULES);
        out->n_rule[c->rule]++;
        if (c->rule == GRAPH_COST_HOST_COPY) {
            out->copy_bytes += c->bytes;
            out->copy_s += fit_copy_seconds(d, c->bytes);
            continue;
        }
        if (c->rule != GRAPH_COST_VIEW && c->rule != GRAPH_COST_ALLOC) out->n_kernels++;
        double s = fit_op_seconds(d, c);
        out->flops += c->flops;
        out->bytes += c->bytes;
        out->compute_s += s;
        out->rule_s[c->rule] += s;
    }
    out->n_default = out->n_rule[GRAPH_COST_DEFAULT];
}

void fit_step_estimate(const fit_device *d, const graph *g, fit_step_cost *out) {
    graph_op_cost *c = xmallocarray(g->n_ops, sizeof *c);
    graph_op_costs(g, c);
    fit_step_sum(d, c, g->n_ops, out);
    free(c);
}
