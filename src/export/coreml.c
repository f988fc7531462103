/* coreml.c — `statelm export --target coreml`: the legalised program of an `ane` plan as a Core ML
 * ML Program (specification version 9, iOS 18 / macOS 15), node for node.
 *
 * Output: an .mlpackage folder (Manifest.json, Data/com.apple.CoreML/model.mlmodel,
 * Data/com.apple.CoreML/weights/weight.bin) written into a temporary folder beside the target
 * and renamed at the end, so a failed export leaves nothing behind. The model holds two
 * functions sharing weights (one blob per weight, referenced by both) and states — "prefill"
 * over the plan's n_prefill tokens and "decode" over one (the default function) — with inputs
 * input_ids (int32, (n)) and pos (int32, (1)), every state of the plan as a state input (f16, at
 * its allocated shape), and output logits (f32, (1, n_vocab)). Activations are f16, as Core ML
 * computes for the Neural Engine. Names: IR names with every character outside [A-Za-z0-9_]
 * replaced by '_' (state "blk.0.kv_k" is input "blk_0_kv_k").
 *
 * Refused, naming the node and the rule: a plan for a target other than "ane", a node whose op
 * the ane profile rejects or lacks, any residual finding on a state or a write (a legalisation
 * that did not apply), an op this exporter cannot express. Ops the profile runs elsewhere
 * (ONEHOT: position arithmetic) are exported and listed with their reason in the report.
 *
 * Protobuf: protobuf-c structs generated at build time from src/export/proto/{Model,MIL}.proto
 * (see CMakeLists.txt); weight.bin is MIL blob storage v2: a 64-byte header (u32 count, u32 version
 * 2, zeros), then per blob a 64-byte record (u32 0xDEADBEEF, u32 dtype (1 = f16), u64 size, u64
 * data offset, zeros) and its data, each at a 64-byte boundary (coremltools' MILBlob
 * StorageFormat.hpp); a const names its blob by the offset of its record. */
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */
#include "statelm.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/params.h"
#include "compile/plan.h"

#if defined(SLM_HAVE_COREML)

#include <ftw.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "MIL.pb-c.h"
#include "Model.pb-c.h"
#include "base/dtype.h"
#include "base/half.h"

typedef CoreML__Specification__MILSpec__Operation mil_op;
typedef CoreML__Specification__MILSpec__ValueType mil_type;
typedef CoreML__Specification__MILSpec__Value mil_value;
typedef CoreML__Specification__MILSpec__NamedValueType mil_nvt;

#define DT_BOOL CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BOOL
#define DT_STR CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__STRING
#define DT_F16 CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16
#define DT_F32 CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32
#define DT_I32 CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32
#define MAX_RANK 5
#define PATH_CAP 4096

/* A value of the function being built: its name, MIL dtype and shape (outermost axis first). */
typedef struct xval {
    char *name;
    int32_t dt;
    int32_t rank;
    int64_t shape[MAX_RANK];
} xval;

typedef struct arena_blk {
    struct arena_blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_blk;

typedef struct rope_cache {
    int32_t n_rot;
    float base, freq_scale;
    bool neox;
    int32_t cos_v, sin_v;
} rope_cache;

/* Exporter state. Invariants: every pointer in the protobuf tree lives in the arena; vals[i]
 * is the type of the i-th value of the current function; tval[t] is the value holding IR tensor
 * t in the current function, or -1; blob_off[3t] is the record offset of weight t in weight.bin,
 * or 0 when not written yet (offset 0 is the file header, never a record). */
typedef struct exporter {
    const slm_allocator *al;
    arena_blk *arena;
    slm_status st;
    slm_err *e;
    slm_plan *pl;
    const g_program *p;
    /* current function */
    int32_t fn;
    int64_t n;
    xval *vals;
    int32_t n_vals, cap_vals;
    mil_op **ops;
    size_t n_ops, cap_ops;
    int32_t *tval;
    int32_t pos_v;
    int32_t *state_v;
    rope_cache ropes[4];
    int32_t n_ropes;
    int32_t mask_v[4], mask_window[4], mask_ring[4], n_masks;
    int32_t node_pos;     /* position of the IR node being lowered, -1 outside */
    int32_t counter;
    /* weights */
    FILE *wf;
    uint64_t w_end;
    uint32_t n_blobs;
    uint64_t *blob_off;   /* (3 n_tensors) per weight: data, scale, offset record offsets */
    slm_dtype wq;         /* F16, Q8_0 (int8 blocks) or Q4_0 (int4 blocks) */
    int32_t n_exact, n_requant, n_f16; /* weights in blocks copied as they are / requantised; f16 */
    float *row;
    uint16_t *row16;
    int64_t row_cap;
    /* report */
    cJSON *rep_ops;   /* ops of the function being built */
    cJSON *rep_fns;   /* per function: name, tokens, ops */
    cJSON *histogram; /* MIL op type -> count over both functions */
} exporter;

/* ---- arena -------------------------------------------------------------------------------- */

static void *ar_alloc(exporter *x, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (!x->arena || x->arena->cap - x->arena->used < size) {
        size_t cap = size > (1u << 20) ? size : (1u << 20);
        arena_blk *b = al_malloc(x->al, sizeof(arena_blk) + cap);
        if (!b) {
            if (x->st == SLM_OK) x->st = err_set(x->e, SLM_ERR_NOMEM, "export: out of memory");
            return NULL;
        }
        b->next = x->arena, b->used = 0, b->cap = cap;
        x->arena = b;
    }
    void *r = x->arena->data + x->arena->used;
    x->arena->used += size;
    memset(r, 0, size);
    return r;
}

static void ar_free(exporter *x) {
    while (x->arena) {
        arena_blk *n = x->arena->next;
        al_free(x->al, x->arena);
        x->arena = n;
    }
}

static char *ar_str(exporter *x, const char *s) {
    size_t n = strlen(s);
    char *r = ar_alloc(x, n + 1);
    if (r) memcpy(r, s, n + 1);
    return r;
}

/* Grows an array of pointers held in the arena to hold one more; false on OOM. */
static bool ar_push(exporter *x, void ***arr, size_t *n, size_t *cap, void *item) {
    if (!item) return false;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        void **na = ar_alloc(x, nc * sizeof(void *));
        if (!na) return false;
        if (*n) memcpy(na, *arr, *n * sizeof(void *));
        *arr = na, *cap = nc;
    }
    (*arr)[(*n)++] = item;
    return true;
}

static slm_status fail(exporter *x, slm_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static slm_status fail(exporter *x, slm_status st, const char *fmt, ...) {
    if (x->st != SLM_OK) return x->st;
    char msg[SLM_ERR_MSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    x->st = err_set(x->e, st, "%s", msg);
    return x->st;
}

/* ---- protobuf pieces -------------------------------------------------------------------------- */

static mil_type *tensor_type(exporter *x, int32_t dt, int32_t rank, const int64_t *shape) {
    mil_type *vt = ar_alloc(x, sizeof *vt);
    CoreML__Specification__MILSpec__TensorType *tt = ar_alloc(x, sizeof *tt);
    CoreML__Specification__MILSpec__Dimension **dims = ar_alloc(x, (size_t)(rank > 0 ? rank : 1) * sizeof(void *));
    if (!vt || !tt || !dims) return NULL;
    core_ml__specification__milspec__value_type__init(vt);
    core_ml__specification__milspec__tensor_type__init(tt);
    tt->datatype = (CoreML__Specification__MILSpec__DataType)dt;
    tt->rank = rank;
    for (int32_t i = 0; i < rank; i++) {
        CoreML__Specification__MILSpec__Dimension *d = ar_alloc(x, sizeof *d);
        CoreML__Specification__MILSpec__Dimension__ConstantDimension *c = ar_alloc(x, sizeof *c);
        if (!d || !c) return NULL;
        core_ml__specification__milspec__dimension__init(d);
        core_ml__specification__milspec__dimension__constant_dimension__init(c);
        c->size = (uint64_t)shape[i];
        d->dimension_case = CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT;
        d->constant = c;
        dims[i] = d;
    }
    tt->n_dimensions = (size_t)rank;
    tt->dimensions = dims;
    vt->type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE;
    vt->tensortype = tt;
    return vt;
}

static mil_nvt *named(exporter *x, char *name, mil_type *t) {
    mil_nvt *v = ar_alloc(x, sizeof *v);
    if (!v || !t || !name) return NULL;
    core_ml__specification__milspec__named_value_type__init(v);
    v->name = name;
    v->type = t;
    return v;
}

/* An immediate tensor value: exactly one of ints, floats, bools, bytes (f16), str is used. */
typedef struct imm {
    int32_t dt, rank;
    int64_t shape[MAX_RANK];
    size_t n;
    const int32_t *ints;
    const float *floats;
    const protobuf_c_boolean *bools;
    const uint16_t *halfs;
    const char *str;
} imm;

static mil_value *imm_value(exporter *x, const imm *m) {
    mil_value *v = ar_alloc(x, sizeof *v);
    CoreML__Specification__MILSpec__Value__ImmediateValue *iv = ar_alloc(x, sizeof *iv);
    CoreML__Specification__MILSpec__TensorValue *tv = ar_alloc(x, sizeof *tv);
    if (!v || !iv || !tv) return NULL;
    core_ml__specification__milspec__value__init(v);
    core_ml__specification__milspec__value__immediate_value__init(iv);
    core_ml__specification__milspec__tensor_value__init(tv);
    if (!(v->type = tensor_type(x, m->dt, m->rank, m->shape))) return NULL;
    if (m->ints) {
        CoreML__Specification__MILSpec__TensorValue__RepeatedInts *r = ar_alloc(x, sizeof *r);
        int32_t *vals = ar_alloc(x, m->n * sizeof(int32_t) + 1);
        if (!r || !vals) return NULL;
        core_ml__specification__milspec__tensor_value__repeated_ints__init(r);
        memcpy(vals, m->ints, m->n * sizeof(int32_t));
        r->n_values = m->n, r->values = vals;
        tv->value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_INTS;
        tv->ints = r;
    } else if (m->floats) {
        CoreML__Specification__MILSpec__TensorValue__RepeatedFloats *r = ar_alloc(x, sizeof *r);
        float *vals = ar_alloc(x, m->n * sizeof(float) + 1);
        if (!r || !vals) return NULL;
        core_ml__specification__milspec__tensor_value__repeated_floats__init(r);
        memcpy(vals, m->floats, m->n * sizeof(float));
        r->n_values = m->n, r->values = vals;
        tv->value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS;
        tv->floats = r;
    } else if (m->bools) {
        CoreML__Specification__MILSpec__TensorValue__RepeatedBools *r = ar_alloc(x, sizeof *r);
        protobuf_c_boolean *vals = ar_alloc(x, m->n * sizeof(protobuf_c_boolean) + 1);
        if (!r || !vals) return NULL;
        core_ml__specification__milspec__tensor_value__repeated_bools__init(r);
        memcpy(vals, m->bools, m->n * sizeof(protobuf_c_boolean));
        r->n_values = m->n, r->values = vals;
        tv->value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BOOLS;
        tv->bools = r;
    } else if (m->halfs) {
        CoreML__Specification__MILSpec__TensorValue__RepeatedBytes *r = ar_alloc(x, sizeof *r);
        uint8_t *vals = ar_alloc(x, m->n * 2 + 1);
        if (!r || !vals) return NULL;
        core_ml__specification__milspec__tensor_value__repeated_bytes__init(r);
        memcpy(vals, m->halfs, m->n * 2);
        r->values.len = m->n * 2, r->values.data = vals;
        tv->value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES;
        tv->bytes = r;
    } else {
        CoreML__Specification__MILSpec__TensorValue__RepeatedStrings *r = ar_alloc(x, sizeof *r);
        char **vals = ar_alloc(x, sizeof(char *));
        if (!r || !vals || !(vals[0] = ar_str(x, m->str ? m->str : ""))) return NULL;
        core_ml__specification__milspec__tensor_value__repeated_strings__init(r);
        r->n_values = 1, r->values = vals;
        tv->value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_STRINGS;
        tv->strings = r;
    }
    iv->value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR;
    iv->tensor = tv;
    v->value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE;
    v->immediatevalue = iv;
    return v;
}

static bool op_attr(exporter *x, mil_op *op, const char *key, mil_value *val) {
    CoreML__Specification__MILSpec__Operation__AttributesEntry *a = ar_alloc(x, sizeof *a);
    if (!a || !val) return false;
    core_ml__specification__milspec__operation__attributes_entry__init(a);
    if (!(a->key = ar_str(x, key))) return false;
    a->value = val;
    size_t cap = op->n_attributes;
    return ar_push(x, (void ***)&op->attributes, &op->n_attributes, &cap, a);
}

/* Adds a binding of value v to input key of op; a key given twice becomes a tuple (concat). */
static bool op_input(exporter *x, mil_op *op, const char *key, int32_t v) {
    CoreML__Specification__MILSpec__Argument__Binding *b = ar_alloc(x, sizeof *b);
    if (!b) return false;
    core_ml__specification__milspec__argument__binding__init(b);
    b->binding_case = CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME;
    b->name = x->vals[v].name;
    CoreML__Specification__MILSpec__Argument *arg = NULL;
    for (size_t i = 0; i < op->n_inputs; i++)
        if (strcmp(op->inputs[i]->key, key) == 0) arg = op->inputs[i]->value;
    if (!arg) {
        CoreML__Specification__MILSpec__Operation__InputsEntry *en = ar_alloc(x, sizeof *en);
        if (!en || !(arg = ar_alloc(x, sizeof *arg))) return false;
        core_ml__specification__milspec__operation__inputs_entry__init(en);
        core_ml__specification__milspec__argument__init(arg);
        if (!(en->key = ar_str(x, key))) return false;
        en->value = arg;
        size_t cap = op->n_inputs;
        if (!ar_push(x, (void ***)&op->inputs, &op->n_inputs, &cap, en)) return false;
    }
    size_t cap = arg->n_arguments;
    return ar_push(x, (void ***)&arg->arguments, &arg->n_arguments, &cap, b);
}

static int32_t new_val(exporter *x, const char *hint, int32_t dt, int32_t rank, const int64_t *shape) {
    if (x->n_vals == x->cap_vals) {
        int32_t nc = x->cap_vals ? x->cap_vals * 2 : 256;
        xval *nv = ar_alloc(x, (size_t)nc * sizeof(xval));
        if (!nv) return -1;
        if (x->n_vals) memcpy(nv, x->vals, (size_t)x->n_vals * sizeof(xval));
        x->vals = nv, x->cap_vals = nc;
    }
    char buf[96];
    snprintf(buf, sizeof buf, "%s_%d", hint, x->counter++);
    xval *v = &x->vals[x->n_vals];
    if (!(v->name = ar_str(x, buf))) return -1;
    v->dt = dt, v->rank = rank;
    for (int32_t i = 0; i < rank; i++) v->shape[i] = shape[i];
    return x->n_vals++;
}

static void report_op(exporter *x, const char *type, const char *name) {
    if (!x->rep_ops) return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", type);
    cJSON_AddStringToObject(o, "name", name);
    const char *device = "ane", *reason = "";
    if (x->node_pos >= 0) {
        int32_t id = x->p->functions[x->fn].nodes[x->node_pos];
        const g_node *nd = &x->p->nodes[id];
        cJSON_AddNumberToObject(o, "ir_node", x->node_pos);
        cJSON_AddStringToObject(o, "ir_op", g_op_name(nd->op));
        cJSON_AddNumberToObject(o, "layer", nd->layer);
        device = x->pl->nodes[id].device;
        reason = x->pl->nodes[id].reason;
    } else {
        cJSON_AddNullToObject(o, "ir_node");
    }
    cJSON_AddStringToObject(o, "device", device);
    cJSON_AddBoolToObject(o, "ane_eligible", strcmp(device, "ane") == 0);
    cJSON_AddStringToObject(o, "reason", reason);
    cJSON_AddItemToArray(x->rep_ops, o);
    cJSON *h = cJSON_GetObjectItemCaseSensitive(x->histogram, type);
    if (h) cJSON_SetNumberValue(h, h->valuedouble + 1);
    else cJSON_AddNumberToObject(x->histogram, type, 1);
}

/* Appends op `type` with inputs keys[i] = ins[i] and one output (dt < 0: none) of the given
 * shape; returns the output value, or -1 (x->st set) on failure. */
static int32_t emit(exporter *x, const char *type, int32_t n_in, const char *const *keys, const int32_t *ins,
                    int32_t dt, int32_t rank, const int64_t *shape) {
    if (x->st != SLM_OK) return -1;
    for (int32_t i = 0; i < n_in; i++)
        if (ins[i] < 0) {
            fail(x, SLM_ERR_UNSUPPORTED, "export: internal: %s has an undefined input %s", type, keys[i]);
            return -1;
        }
    mil_op *op = ar_alloc(x, sizeof *op);
    if (!op) return -1;
    core_ml__specification__milspec__operation__init(op);
    if (!(op->type = ar_str(x, type))) return -1;
    for (int32_t i = 0; i < n_in; i++)
        if (!op_input(x, op, keys[i], ins[i])) return -1;
    int32_t out = -1;
    const char *name = type;
    if (dt >= 0) {
        if ((out = new_val(x, type, dt, rank, shape)) < 0) return -1;
        mil_nvt *o = named(x, x->vals[out].name, tensor_type(x, dt, rank, shape));
        size_t cap = 0;
        if (!o || !ar_push(x, (void ***)&op->outputs, &op->n_outputs, &cap, o)) return -1;
        name = x->vals[out].name;
    }
    imm nm = {.dt = DT_STR, .rank = 0, .n = 1, .str = name};
    if (!op_attr(x, op, "name", imm_value(x, &nm))) return -1;
    if (!ar_push(x, (void ***)&x->ops, &x->n_ops, &x->cap_ops, op)) return -1;
    report_op(x, type, name);
    return dt >= 0 ? out : 0;
}

/* A const op holding an immediate value. */
static int32_t emit_const(exporter *x, const imm *m) {
    if (x->st != SLM_OK) return -1;
    mil_op *op = ar_alloc(x, sizeof *op);
    if (!op) return -1;
    core_ml__specification__milspec__operation__init(op);
    int32_t out = new_val(x, "const", m->dt, m->rank, m->shape);
    if (out < 0 || !(op->type = ar_str(x, "const"))) return -1;
    mil_nvt *o = named(x, x->vals[out].name, tensor_type(x, m->dt, m->rank, m->shape));
    size_t cap = 0;
    if (!o || !ar_push(x, (void ***)&op->outputs, &op->n_outputs, &cap, o)) return -1;
    imm nm = {.dt = DT_STR, .rank = 0, .n = 1, .str = x->vals[out].name};
    if (!op_attr(x, op, "val", imm_value(x, m)) || !op_attr(x, op, "name", imm_value(x, &nm))) return -1;
    if (!ar_push(x, (void ***)&x->ops, &x->n_ops, &x->cap_ops, op)) return -1;
    return out;
}

static int32_t c_ints(exporter *x, const int32_t *v, int32_t n) {
    imm m = {.dt = DT_I32, .rank = 1, .shape = {n}, .n = (size_t)n, .ints = v};
    return emit_const(x, &m);
}
static int32_t c_int(exporter *x, int32_t v) {
    imm m = {.dt = DT_I32, .rank = 0, .n = 1, .ints = &v};
    return emit_const(x, &m);
}
static int32_t c_bool(exporter *x, bool b) {
    protobuf_c_boolean v = b;
    imm m = {.dt = DT_BOOL, .rank = 0, .n = 1, .bools = &v};
    return emit_const(x, &m);
}
static int32_t c_half(exporter *x, float f) {
    uint16_t h = f32_to_f16(f);
    imm m = {.dt = DT_F16, .rank = 0, .n = 1, .halfs = &h};
    return emit_const(x, &m);
}
static int32_t c_floats(exporter *x, const float *v, int32_t n) {
    imm m = {.dt = DT_F32, .rank = 1, .shape = {n}, .n = (size_t)n, .floats = v};
    return emit_const(x, &m);
}
static int32_t c_str(exporter *x, const char *s) {
    imm m = {.dt = DT_STR, .rank = 0, .n = 1, .str = s};
    return emit_const(x, &m);
}

/* ---- op helpers (shapes outermost first) ------------------------------------------------------ */

static const xval *V(exporter *x, int32_t v) { return &x->vals[v]; }

static int32_t unary(exporter *x, const char *type, int32_t a) {
    if (a < 0) return -1;
    const char *k[] = {"x"};
    xval t = *V(x, a);
    return emit(x, type, 1, k, &a, t.dt, t.rank, t.shape);
}

/* Elementwise binary op with numpy broadcasting; out_dt < 0: the dtype of a. */
static int32_t binary(exporter *x, const char *type, int32_t a, int32_t b, int32_t out_dt) {
    if (a < 0 || b < 0) return -1;
    xval ta = *V(x, a), tb = *V(x, b);
    int32_t rank = ta.rank > tb.rank ? ta.rank : tb.rank;
    int64_t shape[MAX_RANK];
    for (int32_t i = 0; i < rank; i++) {
        int32_t ia = i - (rank - ta.rank), ib = i - (rank - tb.rank);
        int64_t da = ia >= 0 ? ta.shape[ia] : 1, db = ib >= 0 ? tb.shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            fail(x, SLM_ERR_SHAPE, "export: internal: %s of incompatible shapes", type);
            return -1;
        }
        shape[i] = da == 1 ? db : da;
    }
    const char *k[] = {"x", "y"};
    int32_t in[] = {a, b};
    return emit(x, type, 2, k, in, out_dt >= 0 ? out_dt : ta.dt, rank, shape);
}

/* Rank and shape of a and b broadcast together (numpy rule; no check). */
static int32_t broadcast_rank(exporter *x, int32_t a, int32_t b) {
    return V(x, a)->rank > V(x, b)->rank ? V(x, a)->rank : V(x, b)->rank;
}
static const int64_t *broadcast_to_shape(exporter *x, int32_t a, int32_t b, int64_t *shape) {
    xval ta = *V(x, a), tb = *V(x, b);
    int32_t rank = broadcast_rank(x, a, b);
    for (int32_t i = 0; i < rank; i++) {
        int32_t ia = i - (rank - ta.rank), ib = i - (rank - tb.rank);
        int64_t da = ia >= 0 ? ta.shape[ia] : 1, db = ib >= 0 ? tb.shape[ib] : 1;
        shape[i] = da == 1 ? db : da;
    }
    return shape;
}
static bool same_shape(exporter *x, const int64_t *a, int32_t rank, const int64_t *b) {
    (void)x;
    for (int32_t i = 0; i < rank; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static int32_t reshape(exporter *x, int32_t a, int32_t rank, const int64_t *shape) {
    if (a < 0) return -1;
    int32_t s[MAX_RANK];
    for (int32_t i = 0; i < rank; i++) s[i] = (int32_t)shape[i];
    int32_t sv = c_ints(x, s, rank);
    const char *k[] = {"x", "shape"};
    int32_t in[] = {a, sv};
    return emit(x, "reshape", 2, k, in, V(x, a)->dt, rank, shape);
}

static int32_t transpose(exporter *x, int32_t a, const int32_t *perm) {
    if (a < 0) return -1;
    xval t = *V(x, a);
    int64_t shape[MAX_RANK];
    for (int32_t i = 0; i < t.rank; i++) shape[i] = t.shape[perm[i]];
    int32_t pv = c_ints(x, perm, t.rank);
    const char *k[] = {"x", "perm"};
    int32_t in[] = {a, pv};
    return emit(x, "transpose", 2, k, in, t.dt, t.rank, shape);
}

/* a[..., begin:end, ...] along MIL axis `axis`. */
static int32_t slice_axis(exporter *x, int32_t a, int32_t axis, int64_t begin, int64_t end) {
    if (a < 0) return -1;
    xval t = *V(x, a);
    int32_t b[MAX_RANK], en[MAX_RANK];
    int64_t shape[MAX_RANK];
    for (int32_t i = 0; i < t.rank; i++) {
        b[i] = i == axis ? (int32_t)begin : 0;
        en[i] = (int32_t)(i == axis ? end : t.shape[i]);
        shape[i] = en[i] - b[i];
    }
    int32_t bv = c_ints(x, b, t.rank), ev = c_ints(x, en, t.rank);
    const char *k[] = {"x", "begin", "end"};
    int32_t in[] = {a, bv, ev};
    return emit(x, "slice_by_index", 3, k, in, t.dt, t.rank, shape);
}

static int32_t concat2(exporter *x, int32_t a, int32_t b, int32_t axis) {
    if (a < 0 || b < 0) return -1;
    xval ta = *V(x, a);
    ta.shape[axis] += V(x, b)->shape[axis];
    int32_t av = c_int(x, axis);
    const char *k[] = {"values", "values", "axis"};
    int32_t in[] = {a, b, av};
    return emit(x, "concat", 3, k, in, ta.dt, ta.rank, ta.shape);
}

static int32_t reduce(exporter *x, const char *type, int32_t a, int32_t axis) {
    if (a < 0) return -1;
    xval t = *V(x, a);
    t.shape[axis] = 1;
    int32_t axv = c_ints(x, &axis, 1), kv = c_bool(x, true);
    const char *k[] = {"x", "axes", "keep_dims"};
    int32_t in[] = {a, axv, kv};
    return emit(x, type, 3, k, in, t.dt, t.rank, t.shape);
}

static int32_t cast(exporter *x, int32_t a, const char *dtype, int32_t dt) {
    if (a < 0) return -1;
    xval t = *V(x, a);
    int32_t dv = c_str(x, dtype);
    const char *k[] = {"x", "dtype"};
    int32_t in[] = {a, dv};
    return emit(x, "cast", 2, k, in, dt, t.rank, t.shape);
}

static int32_t range1d(exporter *x, int32_t n) {
    int32_t e = c_int(x, n), s = c_int(x, 0), st = c_int(x, 1);
    const char *k[] = {"end", "start", "step"};
    int32_t in[] = {e, s, st};
    int64_t shape[] = {n};
    return emit(x, "range_1d", 3, k, in, DT_I32, 1, shape);
}

static int32_t matmul(exporter *x, int32_t a, int32_t b, bool ta, bool tb) {
    if (a < 0 || b < 0) return -1;
    xval va = *V(x, a), vb = *V(x, b);
    int32_t r = va.rank;
    int64_t shape[MAX_RANK];
    for (int32_t i = 0; i < r - 2; i++) shape[i] = va.shape[i] > vb.shape[i] ? va.shape[i] : vb.shape[i];
    shape[r - 2] = ta ? va.shape[r - 1] : va.shape[r - 2];
    shape[r - 1] = tb ? vb.shape[r - 2] : vb.shape[r - 1];
    int32_t tav = c_bool(x, ta), tbv = c_bool(x, tb);
    const char *k[] = {"x", "y", "transpose_x", "transpose_y"};
    int32_t in[] = {a, b, tav, tbv};
    return emit(x, "matmul", 4, k, in, va.dt, r, shape);
}

/* ---- weights ---------------------------------------------------------------------------------- */

/* MILBlob BlobDataType codes (coremltools MILBlob/Blob/BlobDataType.hpp). */
#define BLOB_F16 1u
#define BLOB_I8 4u
#define BLOB_U4 11u
#define DT_I8 CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8
#define DT_U4 CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT4
#define QBLOCK 32

/* Appends one blob record (header at a 64-byte boundary, data at the next) holding `size` bytes
 * of `data` (NULL: written by the caller right after) and returns its record offset, 0 on error.
 * In a dry run nothing is written but the offsets advance alike. */
static uint64_t blob_write(exporter *x, uint32_t dtype, uint64_t size, const void *data) {
    uint64_t rec = (x->w_end + 63) & ~(uint64_t)63, off = rec + 64;
    unsigned char hdr[64] = {0};
    uint32_t sentinel = 0xDEADBEEFu;
    memcpy(hdr, &sentinel, 4), memcpy(hdr + 4, &dtype, 4), memcpy(hdr + 8, &size, 8), memcpy(hdr + 16, &off, 8);
    if (x->wf && (fseek(x->wf, (long)rec, SEEK_SET) != 0 || fwrite(hdr, 1, 64, x->wf) != 64 ||
                  (data && fwrite(data, 1, (size_t)size, x->wf) != size))) {
        fail(x, SLM_ERR_IO, "export: writing weight.bin: %s", strerror(errno));
        return 0;
    }
    x->w_end = off + size;
    x->n_blobs++;
    return rec;
}

static mil_value *blob_value(exporter *x, uint64_t rec, int32_t dt, int32_t rank, const int64_t *shape) {
    mil_value *val = ar_alloc(x, sizeof *val);
    CoreML__Specification__MILSpec__Value__BlobFileValue *bf = ar_alloc(x, sizeof *bf);
    if (!val || !bf) return NULL;
    core_ml__specification__milspec__value__init(val);
    core_ml__specification__milspec__value__blob_file_value__init(bf);
    if (!(bf->filename = ar_str(x, "@model_path/weights/weight.bin"))) return NULL;
    bf->offset = rec;
    if (!(val->type = tensor_type(x, dt, rank, shape))) return NULL;
    val->value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE;
    val->blobfilevalue = bf;
    return val;
}

/* Row r of weight w dequantised into x->row (ne0 floats); false when the dtype cannot be read. */
static bool weight_row(exporter *x, const g_tensor *w, int64_t r) {
    uint64_t row_bytes = 0;
    dtype_row_bytes(w->dtype, (uint64_t)w->ne[0], &row_bytes);
    return dequant_row(w->dtype, (const unsigned char *)w->data + (uint64_t)r * row_bytes, x->row, w->ne[0]);
}

/* Writes w as f16 (one blob). */
static uint64_t write_f16(exporter *x, const g_tensor *w, int64_t rows) {
    int64_t ne0 = w->ne[0];
    uint64_t rec = blob_write(x, BLOB_F16, (uint64_t)(ne0 * rows) * 2, NULL);
    for (int64_t r = 0; rec && x->wf && r < rows; r++) {
        if (!weight_row(x, w, r)) {
            fail(x, SLM_ERR_UNSUPPORTED, "export: cannot dequantise weight %s", w->name);
            return 0;
        }
        for (int64_t i = 0; i < ne0; i++) x->row16[i] = f32_to_f16(x->row[i]);
        if (fwrite(x->row16, 2, (size_t)ne0, x->wf) != (size_t)ne0) {
            fail(x, SLM_ERR_IO, "export: writing weight.bin: %s", strerror(errno));
            return 0;
        }
    }
    return rec;
}

/* Blocks of 32 along ne0 for constexpr_blockwise_shift_scale: w = scale * (q - offset).
 * int8: q int8, no offset; int4: q uint4 (element 2i in the low nibble of byte i), offset 8.
 * GGUF q8_0 (to int8) and q4_0 (to int4 or int8) blocks are copied as they are; every other
 * dtype is dequantised and requantised (per block: scale = max |w| / 127, or / 7 for int4).
 * Sets exact. Writes data, scale and (int4) offset blobs; recs receives their record offsets. */
static bool write_blockwise(exporter *x, const g_tensor *w, bool int4, uint64_t recs[3], bool *exact) {
    int64_t k = w->ne[0], m = w->ne[1], nb = k / QBLOCK;
    size_t n = (size_t)(k * m), data_bytes = int4 ? n / 2 : n;
    uint8_t *q = al_calloc(x->al, data_bytes ? data_bytes : 1, 1);
    uint16_t *scale = al_array(x->al, (size_t)(m * nb), sizeof(uint16_t));
    bool ok = false;
    if (!q || !scale) {
        fail(x, SLM_ERR_NOMEM, "export: out of memory quantising %s", w->name);
        goto done;
    }
    *exact = (w->dtype == SLM_DTYPE_Q8_0 && !int4) || w->dtype == SLM_DTYPE_Q4_0;
    for (int64_t r = 0; r < m; r++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)(r * nb) * (w->dtype == SLM_DTYPE_Q8_0 ? 34u : 18u);
        if (!*exact && !weight_row(x, w, r)) {
            fail(x, SLM_ERR_UNSUPPORTED, "export: cannot dequantise weight %s", w->name);
            goto done;
        }
        for (int64_t b = 0; b < nb; b++) {
            int8_t qv[QBLOCK];
            uint16_t d16;
            if (*exact) {
                const uint8_t *blk = src + b * (w->dtype == SLM_DTYPE_Q8_0 ? 34 : 18);
                memcpy(&d16, blk, 2);
                for (int32_t i = 0; i < QBLOCK; i++)
                    qv[i] = w->dtype == SLM_DTYPE_Q8_0 ? (int8_t)blk[2 + i]
                                                       : (int8_t)((i < 16 ? blk[2 + i] & 15 : blk[2 + i - 16] >> 4) - 8);
            } else {
                const float *v = x->row + b * QBLOCK;
                float amax = 0.0f;
                for (int32_t i = 0; i < QBLOCK; i++) amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
                float lim = int4 ? 7.0f : 127.0f, d = amax / lim;
                d16 = f32_to_f16(d);
                float dq = f16_to_f32(d16), inv = dq > 0.0f ? 1.0f / dq : 0.0f;
                for (int32_t i = 0; i < QBLOCK; i++) {
                    float qf = roundf(v[i] * inv);
                    qf = qf < -lim - (int4 ? 1.0f : 0.0f) ? -lim - (int4 ? 1.0f : 0.0f) : qf > lim ? lim : qf;
                    qv[i] = (int8_t)qf;
                }
            }
            scale[r * nb + b] = d16;
            for (int32_t i = 0; i < QBLOCK; i++) {
                size_t e = (size_t)(r * k + b * QBLOCK + i);
                if (!int4) q[e] = (uint8_t)qv[i];
                else q[e / 2] = (uint8_t)(q[e / 2] | (uint8_t)(((qv[i] + 8) & 15) << ((e & 1) * 4)));
            }
        }
    }
    recs[0] = blob_write(x, int4 ? BLOB_U4 : BLOB_I8, data_bytes, q);
    recs[1] = recs[0] ? blob_write(x, BLOB_F16, (uint64_t)(m * nb) * 2, scale) : 0;
    recs[2] = 0;
    if (recs[1] && int4) {
        /* offset 8 for every block: uint4 nibbles 0x88 */
        size_t ob = (size_t)(m * nb + 1) / 2;
        memset(q, 0x88, ob);
        recs[2] = blob_write(x, BLOB_U4, ob, q);
    }
    ok = recs[0] && recs[1] && (!int4 || recs[2]);
done:
    al_free(x->al, q), al_free(x->al, scale);
    return ok;
}

/* Whether weight w is written blockwise (--weights int8/int4): 2-D, rows a multiple of 32. */
static bool blockwise(const exporter *x, const g_tensor *w) {
    return x->wq != SLM_DTYPE_F16 && w->n_dims == 2 && w->ne[0] % QBLOCK == 0 && w->ne[1] > 1;
}

static void sanitize(char *s);

/* Writes weight t (once; both functions name the same blobs) and returns a const of it (f16) or
 * a constexpr_blockwise_shift_scale (int8/int4) in the current function. */
static int32_t weight_const(exporter *x, int32_t t) {
    const g_tensor *w = &x->p->tensors[t];
    if (x->st != SLM_OK) return -1;
    if (!dtype_traits_of(w->dtype))
        return fail(x, SLM_ERR_UNSUPPORTED, "export: weight %s has a dtype statelm cannot read", w->name), -1;
    int64_t ne0 = w->ne[0], rows = 1;
    for (int32_t d = 1; d < w->n_dims; d++) rows *= w->ne[d];
    bool bw = blockwise(x, w), int4 = x->wq == SLM_DTYPE_Q4_0;
    if (ne0 > x->row_cap) {
        al_free(x->al, x->row), al_free(x->al, x->row16);
        x->row = al_array(x->al, (size_t)ne0, sizeof(float));
        x->row16 = al_array(x->al, (size_t)ne0, sizeof(uint16_t));
        x->row_cap = x->row && x->row16 ? ne0 : 0;
        if (!x->row_cap) return fail(x, SLM_ERR_NOMEM, "export: out of memory"), -1;
    }
    if (!x->blob_off[3 * t]) {
        bool exact = w->dtype == SLM_DTYPE_F16 || w->dtype == SLM_DTYPE_F32 || w->dtype == SLM_DTYPE_BF16;
        if (bw ? !write_blockwise(x, w, int4, &x->blob_off[3 * t], &exact) : !(x->blob_off[3 * t] = write_f16(x, w, rows)))
            return -1;
        if (bw && exact) x->n_exact++;
        else if (bw) x->n_requant++;
        else x->n_f16++;
    }
    int64_t shape[MAX_RANK];
    for (int32_t i = 0; i < w->n_dims; i++) shape[i] = w->ne[w->n_dims - 1 - i];
    mil_op *op = ar_alloc(x, sizeof *op);
    if (!op) return -1;
    core_ml__specification__milspec__operation__init(op);
    /* named after the weight (GGUF name, '.' -> '_'): one const per weight and function */
    char wname[G_NAME_CAP];
    snprintf(wname, sizeof wname, "%s", w->name);
    sanitize(wname);
    int32_t out = new_val(x, "w", DT_F16, w->n_dims, shape);
    if (out < 0 || !(x->vals[out].name = ar_str(x, wname)) ||
        !(op->type = ar_str(x, bw ? "constexpr_blockwise_shift_scale" : "const")))
        return -1;
    mil_nvt *o = named(x, x->vals[out].name, tensor_type(x, DT_F16, w->n_dims, shape));
    size_t cap = 0;
    imm nm = {.dt = DT_STR, .rank = 0, .n = 1, .str = x->vals[out].name};
    if (!o || !ar_push(x, (void ***)&op->outputs, &op->n_outputs, &cap, o) || !op_attr(x, op, "name", imm_value(x, &nm)))
        return -1;
    if (!bw) {
        if (!op_attr(x, op, "val", blob_value(x, x->blob_off[3 * t], DT_F16, w->n_dims, shape))) return -1;
    } else {
        int64_t sshape[] = {shape[0], shape[1] / QBLOCK};
        const char *keys[] = {"data", "scale", "offset"};
        mil_value *vals[] = {blob_value(x, x->blob_off[3 * t], int4 ? DT_U4 : DT_I8, 2, shape),
                             blob_value(x, x->blob_off[3 * t + 1], DT_F16, 2, sshape),
                             int4 ? blob_value(x, x->blob_off[3 * t + 2], DT_U4, 2, sshape) : NULL};
        for (int32_t i = 0; i < (int4 ? 3 : 2); i++) {
            CoreML__Specification__MILSpec__Argument__Binding *b = ar_alloc(x, sizeof *b);
            CoreML__Specification__MILSpec__Argument *arg = ar_alloc(x, sizeof *arg);
            CoreML__Specification__MILSpec__Operation__InputsEntry *en = ar_alloc(x, sizeof *en);
            if (!b || !arg || !en || !vals[i]) return -1;
            core_ml__specification__milspec__argument__binding__init(b);
            core_ml__specification__milspec__argument__init(arg);
            core_ml__specification__milspec__operation__inputs_entry__init(en);
            b->binding_case = CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_VALUE;
            b->value = vals[i];
            size_t acap = 0, icap = op->n_inputs;
            if (!ar_push(x, (void ***)&arg->arguments, &arg->n_arguments, &acap, b) || !(en->key = ar_str(x, keys[i])))
                return -1;
            en->value = arg;
            if (!ar_push(x, (void ***)&op->inputs, &op->n_inputs, &icap, en)) return -1;
        }
    }
    if (!ar_push(x, (void ***)&x->ops, &x->n_ops, &x->cap_ops, op)) return -1;
    return out;
}

/* The value of IR tensor t in the current function (weights become consts on first use). */
static int32_t val_of(exporter *x, int32_t t) {
    if (x->st != SLM_OK) return -1;
    if (x->tval[t] >= 0) return x->tval[t];
    if (x->p->tensors[t].storage == G_WEIGHT) return x->tval[t] = weight_const(x, t);
    fail(x, SLM_ERR_UNSUPPORTED, "export: internal: tensor %s used before it is computed", x->p->tensors[t].name);
    return -1;
}

/* ---- lowering one IR node ------------------------------------------------------------------- */

/* MIL shape (outermost first) of IR tensor t in the current function. */
static int32_t ir_shape(const exporter *x, int32_t t, int64_t *shape) {
    const g_tensor *g = &x->p->tensors[t];
    for (int32_t i = 0; i < g->n_dims; i++) shape[i] = g_ne(g, g->n_dims - 1 - i, x->n);
    return g->n_dims;
}

/* cos and sin of (pos + t) * inv_freq_i, (n, half) in f16, for one rope configuration. */
static void rope_tables(exporter *x, const g_node *nd, int32_t *cos_v, int32_t *sin_v) {
    bool neox = nd->p.rope.style == G_ROPE_NEOX;
    for (int32_t i = 0; i < x->n_ropes; i++) {
        rope_cache *c = &x->ropes[i];
        if (c->n_rot == nd->p.rope.n_rot && c->base == nd->p.rope.base && c->freq_scale == nd->p.rope.freq_scale &&
            c->neox == neox) {
            *cos_v = c->cos_v, *sin_v = c->sin_v;
            return;
        }
    }
    int32_t half = nd->p.rope.n_rot / 2, n = (int32_t)x->n;
    float inv_freq[512];
    for (int32_t i = 0; i < half; i++)
        inv_freq[i] = nd->p.rope.freq_scale * (1.0f / powf(nd->p.rope.base, (float)(2 * i) / (float)nd->p.rope.n_rot));
    int32_t posf = cast(x, binary(x, "add", range1d(x, n), x->pos_v, -1), "fp32", DT_F32);
    int64_t col[] = {n, 1};
    int32_t theta = binary(x, "mul", reshape(x, posf, 2, col), c_floats(x, inv_freq, half), -1);
    int64_t s3[] = {n, 1, half}, s4[] = {n, 1, half, 1};
    int32_t c = cast(x, unary(x, "cos", theta), "fp16", DT_F16), s = cast(x, unary(x, "sin", theta), "fp16", DT_F16);
    *cos_v = reshape(x, c, neox ? 3 : 4, neox ? s3 : s4);
    *sin_v = reshape(x, s, neox ? 3 : 4, neox ? s3 : s4);
    if (x->n_ropes < 4)
        x->ropes[x->n_ropes++] = (rope_cache){nd->p.rope.n_rot, nd->p.rope.base, nd->p.rope.freq_scale, neox, *cos_v,
                                              *sin_v};
}

/* y = x rotated: (n, H, hd) in MIL order. */
static int32_t lower_rope(exporter *x, const g_node *nd, int32_t a) {
    xval t = *V(x, a);
    int64_t n = t.shape[0], H = t.shape[1], hd = t.shape[2];
    int32_t n_rot = nd->p.rope.n_rot, half = n_rot / 2;
    if (n_rot > hd || n_rot % 2 || half > 512) return fail(x, SLM_ERR_UNSUPPORTED, "export: ROPE n_rot %d", n_rot), -1;
    int32_t cs, sn;
    rope_tables(x, nd, &cs, &sn);
    int32_t xr = n_rot < hd ? slice_axis(x, a, 2, 0, n_rot) : a, yr;
    if (nd->p.rope.style == G_ROPE_NEOX) {
        int32_t x0 = slice_axis(x, xr, 2, 0, half), x1 = slice_axis(x, xr, 2, half, n_rot);
        int32_t y0 = binary(x, "sub", binary(x, "mul", x0, cs, -1), binary(x, "mul", x1, sn, -1), -1);
        int32_t y1 = binary(x, "add", binary(x, "mul", x1, cs, -1), binary(x, "mul", x0, sn, -1), -1);
        yr = concat2(x, y0, y1, 2);
    } else {
        int64_t s4[] = {n, H, half, 2}, s3[] = {n, H, n_rot};
        int32_t p = reshape(x, xr, 4, s4);
        int32_t x0 = slice_axis(x, p, 3, 0, 1), x1 = slice_axis(x, p, 3, 1, 2);
        int32_t y0 = binary(x, "sub", binary(x, "mul", x0, cs, -1), binary(x, "mul", x1, sn, -1), -1);
        int32_t y1 = binary(x, "add", binary(x, "mul", x1, cs, -1), binary(x, "mul", x0, sn, -1), -1);
        yr = reshape(x, concat2(x, y0, y1, 3), 3, s3);
    }
    return n_rot < hd ? concat2(x, yr, slice_axis(x, a, 2, n_rot, hd), 2) : yr;
}

/* Additive mask (n, ctx) in f16: 0 where key row j is visible to query t, else -30000. Query t
 * has position q = pos + t; row j holds position P_j = j, or for a ring of R rows the newest
 * position written there, P_j = last - ((last - j) mod R) with last = pos + n - 1 (negative: never
 * written). Visible: 0 <= P_j <= q, and P_j > q - window when window > 0 (kern_ref ATTENTION). */
static int32_t attn_mask(exporter *x, int64_t ctx, int32_t window, int32_t ring) {
    for (int32_t i = 0; i < x->n_masks; i++)
        if (x->mask_window[i] == window && x->mask_ring[i] == ring) return x->mask_v[i];
    int32_t n = (int32_t)x->n;
    int64_t col[] = {n, 1}, row[] = {1, ctx};
    int32_t q = reshape(x, binary(x, "add", range1d(x, n), x->pos_v, -1), 2, col);
    int32_t P = reshape(x, range1d(x, (int32_t)ctx), 2, row);
    int32_t ok;
    if (ring > 0) {
        int32_t last = binary(x, "add", x->pos_v, c_int(x, n - 1), -1);
        P = binary(x, "sub", last, binary(x, "mod", binary(x, "sub", last, P, -1), c_int(x, ring), -1), -1);
        ok = binary(x, "logical_and", binary(x, "less_equal", P, q, DT_BOOL),
                    binary(x, "greater_equal", P, c_int(x, 0), DT_BOOL), -1);
    } else {
        ok = binary(x, "less_equal", P, q, DT_BOOL);
    }
    if (window > 0) {
        int32_t lo = binary(x, "sub", q, c_int(x, window), -1);
        ok = binary(x, "logical_and", ok, binary(x, "greater", P, lo, DT_BOOL), -1);
    }
    /* (ok - 1) * 30000: 0 or -30000 (select broadcasts a and b, not cond) */
    int32_t m = binary(x, "mul", binary(x, "sub", cast(x, ok, "fp16", DT_F16), c_half(x, 1.0f), -1),
                       c_half(x, 30000.0f), -1);
    if (x->n_masks < 4)
        x->mask_window[x->n_masks] = window, x->mask_ring[x->n_masks] = ring, x->mask_v[x->n_masks++] = m;
    return m;
}

/* (n, H, hdv) <- q (n, H, hd), K (ctx, Hkv*hd), V (ctx, Hkv*hdv); head h reads kv head h / G. */
static int32_t lower_attention(exporter *x, const g_node *nd, int32_t q, int32_t k, int32_t v, int32_t out_t) {
    xval tq = *V(x, q), tk = *V(x, k), tv = *V(x, v);
    int64_t n = tq.shape[0], H = tq.shape[1], hd = tq.shape[2], Hkv = nd->p.attn.n_head_kv, G = H / Hkv;
    int64_t ctx = tk.shape[0], hdv = x->p->tensors[out_t].ne[0];
    if (tk.rank != 2 || tk.shape[1] != Hkv * hd || tv.shape[1] != Hkv * hdv)
        return fail(x, SLM_ERR_UNSUPPORTED, "export: ATTENTION state rows are not Hkv * head_dim"), -1;
    int32_t p021[] = {1, 0, 2};
    int64_t ks[] = {ctx, Hkv, hd}, vs[] = {ctx, Hkv, hdv}, qs[] = {Hkv, G * n, hd};
    int32_t K = transpose(x, reshape(x, k, 3, ks), p021);
    int32_t Vv = transpose(x, reshape(x, v, 3, vs), p021);
    int32_t Q = reshape(x, transpose(x, q, p021), 3, qs);
    int32_t S = binary(x, "mul", matmul(x, Q, K, false, true), c_half(x, nd->p.attn.scale), -1);
    int64_t s4[] = {Hkv, G, n, ctx}, s3[] = {Hkv, G * n, ctx};
    S = binary(x, "add", reshape(x, S, 4, s4), attn_mask(x, ctx, nd->p.attn.window, nd->p.attn.ring), -1);
    int32_t ax = c_int(x, 3);
    const char *kk[] = {"x", "axis"};
    int32_t in[] = {S, ax};
    S = emit(x, "softmax", 2, kk, in, DT_F16, 4, s4);
    int64_t os[] = {H, n, hdv};
    int32_t O = reshape(x, matmul(x, reshape(x, S, 3, s3), Vv, false, false), 3, os);
    return transpose(x, O, p021);
}

/* Qwen3.5's gated DeltaNet, recurrent form unrolled over the call's n tokens (kern_ref.c
 * DELTANET): per token, S *= exp(g); u = k S; S += k^T (beta (v - u)); o = q S. MIL shapes:
 * q, k (n, Hk, dk), v (n, Hv, dv), g, beta (n, Hv), S (Hv, dk, dv); o (n, Hv, dv). Returns o and
 * sets *s_new. */
static int32_t lower_deltanet(exporter *x, const g_node *nd, const int32_t *in, int32_t *s_new) {
    xval tq = *V(x, in[0]), tv = *V(x, in[2]);
    int64_t n = tq.shape[0], Hk = tq.shape[1], dk = tq.shape[2], Hv = tv.shape[1], R = Hv / Hk;
    int32_t p102[] = {1, 0, 2};
    int32_t qk[2];
    for (int32_t i = 0; i < 2; i++) {
        int32_t a = in[i];
        if (R > 1) {
            /* kv head of v-head h: tiled h mod Hk, grouped h / R */
            int32_t reps[4] = {1, 1, 1, 1};
            int64_t s4[] = {n, Hk, 1, dk}, s4t[] = {n, 1, Hk, dk}, s3[] = {n, Hv, dk};
            int32_t src = nd->p.dn.v_heads_tiled ? reshape(x, a, 4, s4t) : reshape(x, a, 4, s4);
            reps[nd->p.dn.v_heads_tiled ? 1 : 2] = (int32_t)R;
            int64_t ts[4] = {n, nd->p.dn.v_heads_tiled ? R : Hk, nd->p.dn.v_heads_tiled ? Hk : R, dk};
            int32_t rv = c_ints(x, reps, 4);
            const char *k[] = {"x", "reps"};
            int32_t ins[] = {src, rv};
            a = reshape(x, emit(x, "tile", 2, k, ins, DT_F16, 4, ts), 3, s3);
        }
        qk[i] = transpose(x, a, p102); /* (Hv, n, dk) */
    }
    int32_t vv = transpose(x, in[2], p102); /* (Hv, n, dv) */
    int32_t p10[] = {1, 0};
    int64_t gs[] = {Hv, n, 1};
    int32_t decay = reshape(x, transpose(x, unary(x, "exp", in[3]), p10), 3, gs);
    int32_t beta = reshape(x, transpose(x, in[4], p10), 3, gs);
    int32_t S = in[5], o = -1;
    for (int64_t t = 0; t < n && x->st == SLM_OK; t++) {
        int32_t q_t = slice_axis(x, qk[0], 1, t, t + 1), k_t = slice_axis(x, qk[1], 1, t, t + 1);
        int32_t v_t = slice_axis(x, vv, 1, t, t + 1);
        S = binary(x, "mul", S, slice_axis(x, decay, 1, t, t + 1), -1);
        int32_t u = matmul(x, k_t, S, false, false); /* (Hv, 1, dv) */
        int32_t d = binary(x, "mul", binary(x, "sub", v_t, u, -1), slice_axis(x, beta, 1, t, t + 1), -1);
        S = binary(x, "add", S, matmul(x, k_t, d, true, false), -1);
        int32_t o_t = matmul(x, q_t, S, false, false);
        o = t == 0 ? o_t : concat2(x, o, o_t, 1);
    }
    *s_new = S;
    return transpose(x, o, p102);
}

static int32_t lower_norm(exporter *x, const g_node *nd, int32_t a, int32_t w) {
    xval t = *V(x, a);
    int32_t last = t.rank - 1;
    int32_t ss = reduce(x, nd->op == G_OP_L2NORM ? "reduce_sum" : "reduce_mean", binary(x, "mul", a, a, -1), last);
    int32_t ev = c_half(x, nd->p.norm.eps);
    const char *k[] = {"x", "epsilon"};
    int32_t in[] = {ss, ev};
    int32_t inv = emit(x, "rsqrt", 2, k, in, DT_F16, t.rank, V(x, ss)->shape);
    int32_t y = binary(x, "mul", a, inv, -1);
    if (w >= 0) {
        if (nd->op == G_OP_RMSNORM && nd->p.norm.w_offset != 0.0f) w = binary(x, "add", w, c_half(x, nd->p.norm.w_offset), -1);
        y = binary(x, "mul", y, w, -1);
    }
    return y;
}

/* STATE_WRITE: read_state, slice_update of the window (static after legalisation), write_state. */
static void lower_write(exporter *x, const g_node *nd, int32_t value) {
    const g_state *s = &x->p->states[nd->p.write.state];
    const g_tensor *vt = &x->p->tensors[nd->in[0]];
    int32_t r = s->n_dims;
    int64_t shape[MAX_RANK] = {0}, ext[MAX_RANK] = {0};
    int32_t b[MAX_RANK] = {0}, en[MAX_RANK] = {0};
    bool full = true;
    for (int32_t i = 0; i < r; i++) {
        int32_t d = r - 1 - i;
        g_affine bg = nd->p.write.begin[d];
        if (bg.has_pos) {
            fail(x, SLM_ERR_UNSUPPORTED,
                 "export: %s #%d STATE_WRITE %s: its begin depends on pos (rule ane.write.static_begin)",
                 x->p->functions[x->fn].name, x->node_pos, s->name);
            return;
        }
        shape[i] = s->alloc_ne[d];
        ext[i] = d < vt->n_dims ? g_ne(vt, d, x->n) : 1;
        b[i] = (int32_t)g_affine_eval(bg, x->n, 0);
        en[i] = (int32_t)(b[i] + ext[i]);
        if (b[i] < 0 || en[i] > shape[i]) {
            fail(x, SLM_ERR_SHAPE, "export: STATE_WRITE %s: window outside the state", s->name);
            return;
        }
        if (b[i] != 0 || en[i] != shape[i]) full = false;
    }
    if (vt->n_dims != r) value = reshape(x, value, r, ext);
    int32_t data = value;
    if (!full) {
        const char *rk[] = {"input"};
        int32_t cur = emit(x, "read_state", 1, rk, &x->state_v[nd->p.write.state], DT_F16, r, shape);
        int32_t bv = c_ints(x, b, r), ev = c_ints(x, en, r);
        const char *k[] = {"x", "update", "begin", "end"};
        int32_t in[] = {cur, value, bv, ev};
        data = emit(x, "slice_update", 4, k, in, DT_F16, r, shape);
    }
    const char *k[] = {"input", "data"};
    int32_t in[] = {x->state_v[nd->p.write.state], data};
    emit(x, "write_state", 2, k, in, -1, 0, NULL);
}

static void state_shape(const g_state *s, int64_t *shape);

static void lower_node(exporter *x, const g_node *nd) {
    int32_t in[G_MAX_IN];
    for (int32_t i = 0; i < nd->n_in; i++) {
        if (nd->op == G_OP_STATE_READ) break;
        if ((in[i] = val_of(x, nd->in[i])) < 0) return;
    }
    int64_t shape[MAX_RANK] = {0};
    int32_t out = -1, rank = nd->n_out ? ir_shape(x, nd->out[0], shape) : 0;
    switch (nd->op) {
    case G_OP_EMBED: {
        int32_t ax = c_int(x, 0);
        const char *k[] = {"x", "indices", "axis"};
        int32_t ins[] = {in[0], in[1], ax};
        out = emit(x, "gather", 3, k, ins, DT_F16, rank, shape);
        break;
    }
    case G_OP_MATMUL: {
        const char *k[] = {"x", "weight"};
        int32_t ins[] = {in[1], in[0]};
        out = emit(x, "linear", 2, k, ins, DT_F16, rank, shape);
        break;
    }
    case G_OP_ADD: out = binary(x, "add", in[0], in[1], -1); break;
    case G_OP_MUL: out = binary(x, "mul", in[0], in[1], -1); break;
    case G_OP_SCALE: out = binary(x, "mul", in[0], c_half(x, nd->p.f[0]), -1); break;
    case G_OP_SILU: out = unary(x, "silu", in[0]); break;
    case G_OP_SIGMOID: out = unary(x, "sigmoid", in[0]); break;
    case G_OP_SOFTPLUS: out = unary(x, "softplus", in[0]); break;
    case G_OP_EXP: out = unary(x, "exp", in[0]); break;
    case G_OP_SWIGLU: out = binary(x, "mul", unary(x, "silu", in[0]), in[1], -1); break;
    case G_OP_GEGLU: {
        int32_t mv = c_str(x, "TANH_APPROXIMATION");
        const char *k[] = {"x", "mode"};
        int32_t ins[] = {in[0], mv};
        out = binary(x, "mul", emit(x, "gelu", 2, k, ins, DT_F16, V(x, in[0])->rank, V(x, in[0])->shape), in[1], -1);
        break;
    }
    case G_OP_RMSNORM: out = lower_norm(x, nd, in[0], nd->n_in > 1 ? in[1] : -1); break;
    case G_OP_L2NORM: out = lower_norm(x, nd, in[0], -1); break;
    case G_OP_GATED_RMSNORM:
        out = binary(x, "mul", lower_norm(x, nd, in[0], in[2]), unary(x, "silu", in[1]), -1);
        break;
    case G_OP_ROPE: out = lower_rope(x, nd, in[0]); break;
    case G_OP_DELTANET: {
        int32_t s_new = -1;
        out = lower_deltanet(x, nd, in, &s_new);
        if (s_new >= 0) x->tval[nd->out[1]] = s_new;
        break;
    }
    case G_OP_ATTENTION: out = lower_attention(x, nd, in[0], in[1], in[2], nd->out[0]); break;
    case G_OP_CONV1D: {
        int64_t K = x->p->tensors[nd->in[1]].ne[0], C = shape[1];
        for (int64_t kk = 0; kk < K; kk++) {
            int64_t wc[] = {C};
            int32_t wk = reshape(x, slice_axis(x, in[1], 1, kk, kk + 1), 1, wc);
            int32_t term = binary(x, "mul", slice_axis(x, in[0], 0, kk, kk + shape[0]), wk, -1);
            out = kk == 0 ? term : binary(x, "add", out, term, -1);
        }
        break;
    }
    case G_OP_SLICE: {
        if (nd->p.slice.begin.has_pos) {
            fail(x, SLM_ERR_UNSUPPORTED, "export: SLICE at a position-dependent begin");
            return;
        }
        int32_t ax = V(x, in[0])->rank - 1 - nd->p.slice.axis;
        int64_t b = g_affine_eval(nd->p.slice.begin, x->n, 0);
        out = slice_axis(x, in[0], ax, b, b + shape[ax]);
        break;
    }
    case G_OP_CONCAT: out = concat2(x, in[0], in[1], rank - 1 - nd->p.concat.axis); break;
    case G_OP_RESHAPE: out = reshape(x, in[0], rank, shape); break;
    case G_OP_STATE_READ: {
        /* the view has the state's logical shape; the state input its allocated (padded) one */
        const char *k[] = {"input"};
        const g_state *st = &x->p->states[nd->p.read.state];
        int64_t alloc[MAX_RANK] = {0};
        state_shape(st, alloc);
        out = emit(x, "read_state", 1, k, &x->state_v[nd->p.read.state], DT_F16, st->n_dims, alloc);
        if (st->n_dims != rank) {
            fail(x, SLM_ERR_SHAPE, "export: internal: a view of %s has another rank", st->name);
            return;
        }
        for (int32_t i = 0; i < rank; i++)
            if (alloc[i] != shape[i]) out = slice_axis(x, out, i, 0, shape[i]);
        break;
    }
    case G_OP_STATE_WRITE: lower_write(x, nd, in[0]); return;
    case G_OP_SUM: out = reduce(x, "reduce_sum", in[0], V(x, in[0])->rank - 1 - nd->p.reduce.axis); break;
    case G_OP_SELECT: {
        /* MIL select's output has the shape of a and b broadcast: widen a to the output's */
        int32_t c = binary(x, "not_equal", in[0], c_half(x, 0.0f), DT_BOOL), a = in[1];
        int64_t bshape[MAX_RANK];
        if (broadcast_rank(x, in[1], in[2]) != rank || !same_shape(x, broadcast_to_shape(x, in[1], in[2], bshape), rank, shape)) {
            int32_t sv[MAX_RANK];
            for (int32_t i = 0; i < rank; i++) sv[i] = (int32_t)shape[i];
            int32_t shv = c_ints(x, sv, rank), zero = c_half(x, 0.0f);
            const char *fk[] = {"shape", "value"};
            int32_t fin[] = {shv, zero};
            a = binary(x, "add", a, emit(x, "fill", 2, fk, fin, DT_F16, rank, shape), -1);
        }
        const char *k[] = {"cond", "a", "b"};
        int32_t ins[] = {c, a, in[2]};
        out = emit(x, "select", 3, k, ins, DT_F16, rank, shape);
        break;
    }
    case G_OP_ONEHOT: {
        /* MIL (n, L): out[t, j] = (j == begin + t) */
        g_affine bg = nd->p.onehot.begin;
        int32_t rows = binary(x, "add", range1d(x, (int32_t)shape[0]), c_int(x, (int32_t)(bg.base + (bg.has_n ? x->n : 0))), -1);
        if (bg.has_pos) rows = binary(x, "add", rows, x->pos_v, -1);
        if (bg.mod > 0) rows = binary(x, "mod", rows, c_int(x, (int32_t)bg.mod), -1);
        int64_t col[] = {shape[0], 1}, row[] = {1, shape[1]};
        int32_t eq = binary(x, "equal", reshape(x, range1d(x, (int32_t)shape[1]), 2, row), reshape(x, rows, 2, col), DT_BOOL);
        out = cast(x, eq, "fp16", DT_F16);
        break;
    }
    case G_OP_MATMUL_T: out = matmul(x, in[1], in[0], true, false); break;
    case G_OP_ROUND:
        if (nd->p.round.dtype != SLM_DTYPE_F16) {
            fail(x, SLM_ERR_UNSUPPORTED, "export: ROUND to %s (Core ML activations are f16)",
                 slm_dtype_name((slm_dtype)nd->p.round.dtype));
            return;
        }
        out = in[0]; /* f16 activations are already rounded */
        break;
    default: {
        fail(x, SLM_ERR_UNSUPPORTED, "export: %s #%d (%s): the Core ML exporter cannot express %s yet",
             x->p->functions[x->fn].name, x->node_pos, x->p->tensors[nd->out[0]].name, g_op_name(nd->op));
        return;
    }
    }
    if (out < 0) {
        if (x->st == SLM_OK) fail(x, SLM_ERR_UNSUPPORTED, "export: could not lower %s", g_op_name(nd->op));
        return;
    }
    const xval *ov = V(x, out);
    bool same = ov->rank == rank;
    for (int32_t i = 0; same && i < rank; i++) same = ov->shape[i] == shape[i];
    if (!same) {
        fail(x, SLM_ERR_SHAPE, "export: internal: %s #%d %s lowered to a different shape",
             x->p->functions[x->fn].name, x->node_pos, g_op_name(nd->op));
        return;
    }
    x->tval[nd->out[0]] = out;
}

/* ---- functions, description, files ------------------------------------------------------------ */

static void sanitize(char *s) {
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) *s = '_';
}

static CoreML__Specification__FeatureDescription *feature(exporter *x, const char *name, bool state,
                                                          CoreML__Specification__ArrayFeatureType__ArrayDataType dt,
                                                          int32_t rank, const int64_t *shape) {
    CoreML__Specification__FeatureDescription *f = ar_alloc(x, sizeof *f);
    CoreML__Specification__FeatureType *ft = ar_alloc(x, sizeof *ft);
    CoreML__Specification__ArrayFeatureType *at = ar_alloc(x, sizeof *at);
    int64_t *sh = ar_alloc(x, (size_t)rank * sizeof(int64_t) + 1);
    if (!f || !ft || !at || !sh) return NULL;
    core_ml__specification__feature_description__init(f);
    core_ml__specification__feature_type__init(ft);
    core_ml__specification__array_feature_type__init(at);
    if (!(f->name = ar_str(x, name))) return NULL;
    memcpy(sh, shape, (size_t)rank * sizeof(int64_t));
    at->n_shape = (size_t)rank, at->shape = sh, at->datatype = dt;
    if (state) {
        CoreML__Specification__StateFeatureType *st = ar_alloc(x, sizeof *st);
        if (!st) return NULL;
        core_ml__specification__state_feature_type__init(st);
        st->type_case = CORE_ML__SPECIFICATION__STATE_FEATURE_TYPE__TYPE_ARRAY_TYPE;
        st->arraytype = at;
        ft->type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE;
        ft->statetype = st;
    } else {
        ft->type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE;
        ft->multiarraytype = at;
    }
    f->type = ft;
    return f;
}

static void state_shape(const g_state *s, int64_t *shape) {
    for (int32_t i = 0; i < s->n_dims; i++) shape[i] = s->alloc_ne[s->n_dims - 1 - i];
}

/* Refuses what the ane profile rejects or lacks and every residual rule on states and writes. */
static slm_status check_exportable(exporter *x) {
    const slm_plan *pl = x->pl;
    for (int32_t i = 0; i < pl->residual.n; i++) {
        const plan_finding *f = &pl->residual.v[i];
        if (f->op_rule && f->effect != TGT_REJECT) continue; /* op fallbacks: exported and reported */
        if (f->fn < 0)
            return fail(x, SLM_ERR_UNSUPPORTED, "export: state %s breaks %s (%s): %s", x->p->states[f->state].name,
                        f->rule, tgt_effect_name(f->effect), f->detail);
        return fail(x, SLM_ERR_UNSUPPORTED, "export: %s #%d %s%s%s breaks %s (%s): %s", x->p->functions[f->fn].name,
                    f->index, g_op_name(f->op), f->state >= 0 ? " " : "",
                    f->state >= 0 ? x->p->states[f->state].name : "", f->rule, tgt_effect_name(f->effect), f->detail);
    }
    for (int32_t fn = 0; fn < x->p->n_functions; fn++) {
        const g_function *F = &x->p->functions[fn];
        for (int32_t i = 0; i < F->n_nodes; i++) {
            const g_node *nd = &x->p->nodes[F->nodes[i]];
            const tgt_op_rule *r = tgt_op_lookup(pl->target, nd->op, tgt_node_dtype(x->p, nd));
            if (!r || r->effect == TGT_REJECT)
                return fail(x, SLM_ERR_UNSUPPORTED, "export: %s #%d %s (%s): the ane profile %s it%s%s", F->name, i,
                            g_op_name(nd->op), nd->n_out ? x->p->tensors[nd->out[0]].name : "",
                            r ? "rejects" : "has no rule for", r ? ": " : "", r ? r->why : "");
        }
    }
    for (int32_t s = 0; s < x->p->n_states; s++)
        if (x->p->states[s].dtype != SLM_DTYPE_F16)
            return fail(x, SLM_ERR_UNSUPPORTED, "export: state %s is %s; Core ML states here are f16 (ane.state.dtype)",
                        x->p->states[s].name, slm_dtype_name((slm_dtype)x->p->states[s].dtype));
    return SLM_OK;
}

static CoreML__Specification__MILSpec__Function *build_function(exporter *x, int32_t fn,
                                                                CoreML__Specification__FunctionDescription *fd) {
    const g_program *p = x->p;
    const g_function *F = &p->functions[fn];
    x->fn = fn;
    x->n = F->symbolic_n ? x->pl->n_prefill : F->fixed_n;
    if (p->max_call_tokens > 0 && x->n > p->max_call_tokens) {
        fail(x, SLM_ERR_RANGE,
             "export: %s over %lld tokens: a call may take at most %d (a ring state would overwrite keys still "
             "in a window); use --prefill-len %d or less",
             F->name, (long long)x->n, p->max_call_tokens, p->max_call_tokens);
        return NULL;
    }
    x->n_vals = 0, x->n_ops = 0, x->cap_ops = 0, x->ops = NULL, x->counter = 0, x->n_ropes = 0, x->n_masks = 0;
    x->node_pos = -1;
    for (int32_t t = 0; t < p->n_tensors; t++) x->tval[t] = -1;
    CoreML__Specification__MILSpec__Function *f = ar_alloc(x, sizeof *f);
    CoreML__Specification__MILSpec__Block *blk = ar_alloc(x, sizeof *blk);
    CoreML__Specification__MILSpec__Function__BlockSpecializationsEntry *be = ar_alloc(x, sizeof *be);
    if (!f || !blk || !be) return NULL;
    core_ml__specification__milspec__function__init(f);
    core_ml__specification__milspec__block__init(blk);
    core_ml__specification__milspec__function__block_specializations_entry__init(be);
    size_t in_cap = 0, fin_cap = 0, fst_cap = 0;
    /* inputs: input_ids (n), pos (1), then the states */
    int64_t ids_shape[] = {x->n}, one[] = {1};
    int32_t ids = new_val(x, "input_ids", DT_I32, 1, ids_shape);
    x->pos_v = new_val(x, "pos", DT_I32, 1, one);
    if (ids < 0 || x->pos_v < 0) return NULL;
    x->vals[ids].name = ar_str(x, "input_ids"), x->vals[x->pos_v].name = ar_str(x, "pos");
    if (!ar_push(x, (void ***)&f->inputs, &f->n_inputs, &in_cap, named(x, x->vals[ids].name, tensor_type(x, DT_I32, 1, ids_shape))) ||
        !ar_push(x, (void ***)&f->inputs, &f->n_inputs, &in_cap, named(x, x->vals[x->pos_v].name, tensor_type(x, DT_I32, 1, one))) ||
        !ar_push(x, (void ***)&fd->input, &fd->n_input, &fin_cap,
                 feature(x, "input_ids", false, CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__INT32, 1, ids_shape)) ||
        !ar_push(x, (void ***)&fd->input, &fd->n_input, &fin_cap,
                 feature(x, "pos", false, CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__INT32, 1, one)))
        return NULL;
    x->tval[F->tokens] = ids;
    for (int32_t s = 0; s < p->n_states; s++) {
        const g_state *st = &p->states[s];
        int64_t shape[MAX_RANK];
        state_shape(st, shape);
        char name[G_NAME_CAP];
        snprintf(name, sizeof name, "%s", st->name);
        sanitize(name);
        int32_t v = new_val(x, name, DT_F16, st->n_dims, shape);
        if (v < 0 || !(x->vals[v].name = ar_str(x, name))) return NULL;
        x->state_v[s] = v;
        mil_type *vt = ar_alloc(x, sizeof *vt);
        CoreML__Specification__MILSpec__StateType *stt = ar_alloc(x, sizeof *stt);
        if (!vt || !stt) return NULL;
        core_ml__specification__milspec__value_type__init(vt);
        core_ml__specification__milspec__state_type__init(stt);
        if (!(stt->wrappedtype = tensor_type(x, DT_F16, st->n_dims, shape))) return NULL;
        vt->type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_STATE_TYPE;
        vt->statetype = stt;
        if (!ar_push(x, (void ***)&f->inputs, &f->n_inputs, &in_cap, named(x, x->vals[v].name, vt)) ||
            !ar_push(x, (void ***)&fd->state, &fd->n_state, &fst_cap,
                     feature(x, name, true, CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT16,
                             st->n_dims, shape)))
            return NULL;
    }
    /* body: the legalised nodes in order */
    cJSON *rf = NULL;
    if (x->histogram) {
        rf = cJSON_CreateObject();
        cJSON_AddStringToObject(rf, "name", F->name);
        cJSON_AddNumberToObject(rf, "tokens", (double)x->n);
        x->rep_ops = cJSON_AddArrayToObject(rf, "ops");
    }
    for (int32_t i = 0; i < F->n_nodes && x->st == SLM_OK; i++) {
        x->node_pos = i;
        lower_node(x, &p->nodes[F->nodes[i]]);
    }
    x->node_pos = -1;
    int32_t logits = x->st == SLM_OK ? val_of(x, F->logits) : -1;
    if (logits >= 0) {
        int32_t lv = cast(x, logits, "fp32", DT_F32);
        if (lv >= 0) x->vals[lv].name = ar_str(x, "logits");
        /* the op's output NamedValueType shares the old name: rename it too */
        if (lv >= 0 && x->n_ops) x->ops[x->n_ops - 1]->outputs[0]->name = x->vals[lv].name;
        if (lv >= 0) {
            size_t out_cap = 0, fo_cap = 0;
            CoreML__Specification__FeatureDescription *fo = feature(
                x, "logits", false, CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT32, V(x, lv)->rank,
                V(x, lv)->shape);
            if (!ar_push(x, (void ***)&blk->outputs, &blk->n_outputs, &out_cap, x->vals[lv].name) ||
                !ar_push(x, (void ***)&fd->output, &fd->n_output, &fo_cap, fo))
                return NULL;
        }
    }
    x->rep_ops = NULL;
    if (x->st != SLM_OK) {
        cJSON_Delete(rf);
        return NULL;
    }
    if (rf) cJSON_AddItemToArray(x->rep_fns, rf);
    blk->n_operations = x->n_ops, blk->operations = x->ops;
    if (!(be->key = ar_str(x, "CoreML8")) || !(f->opset = ar_str(x, "CoreML8"))) return NULL;
    be->value = blk;
    size_t bcap = 0;
    if (!ar_push(x, (void ***)&f->block_specializations, &f->n_block_specializations, &bcap, be)) return NULL;
    return f;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_tree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static slm_status write_file(exporter *x, const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return fail(x, SLM_ERR_IO, "export: cannot write %s: %s", path, strerror(errno));
    bool ok = fwrite(data, 1, size, f) == size;
    ok = fclose(f) == 0 && ok;
    return ok ? SLM_OK : fail(x, SLM_ERR_IO, "export: writing %s failed", path);
}

static const char manifest[] =
    "{\n"
    "    \"fileFormatVersion\": \"1.0.0\",\n"
    "    \"itemInfoEntries\": {\n"
    "        \"5C2D1F4A-8B0E-4E35-9C0B-2F6A7D1E3B90\": {\n"
    "            \"author\": \"com.apple.CoreML\",\n"
    "            \"description\": \"CoreML Model Weights\",\n"
    "            \"name\": \"weights\",\n"
    "            \"path\": \"com.apple.CoreML/weights\"\n"
    "        },\n"
    "        \"9E41B7C2-3A6D-4F08-B5E1-7C0D2A4F6B18\": {\n"
    "            \"author\": \"com.apple.CoreML\",\n"
    "            \"description\": \"CoreML Model Specification\",\n"
    "            \"name\": \"model.mlmodel\",\n"
    "            \"path\": \"com.apple.CoreML/model.mlmodel\"\n"
    "        }\n"
    "    },\n"
    "    \"rootModelIdentifier\": \"9E41B7C2-3A6D-4F08-B5E1-7C0D2A4F6B18\"\n"
    "}\n";

static slm_status export_coreml(exporter *x, const slm_export_params *ep, const char *tmp) {
    const g_program *p = x->p;
    char buf[PATH_CAP + 64];
    if (check_exportable(x) != SLM_OK) return x->st;
    bool dry = tmp == NULL;
    if (dry) goto body;
    snprintf(buf, sizeof buf, "%s/Data", tmp);
    if (mkdir(buf, 0755) != 0) return fail(x, SLM_ERR_IO, "export: mkdir %s: %s", buf, strerror(errno));
    snprintf(buf, sizeof buf, "%s/Data/com.apple.CoreML", tmp);
    if (mkdir(buf, 0755) != 0) return fail(x, SLM_ERR_IO, "export: mkdir %s: %s", buf, strerror(errno));
    snprintf(buf, sizeof buf, "%s/Data/com.apple.CoreML/weights", tmp);
    if (mkdir(buf, 0755) != 0) return fail(x, SLM_ERR_IO, "export: mkdir %s: %s", buf, strerror(errno));
    snprintf(buf, sizeof buf, "%s/Data/com.apple.CoreML/weights/weight.bin", tmp);
    if (!(x->wf = fopen(buf, "w+b"))) return fail(x, SLM_ERR_IO, "export: cannot write %s: %s", buf, strerror(errno));
body:
    x->w_end = 64;
    x->tval = al_array(x->al, (size_t)p->n_tensors, sizeof(int32_t));
    x->blob_off = al_calloc(x->al, (size_t)p->n_tensors * 3, sizeof(uint64_t));
    x->state_v = al_calloc(x->al, (size_t)(p->n_states ? p->n_states : 1), sizeof(int32_t));
    if (!x->tval || !x->blob_off || !x->state_v) return fail(x, SLM_ERR_NOMEM, "export: out of memory");
    if (ep->report_path) {
        x->histogram = cJSON_CreateObject();
        x->rep_fns = cJSON_CreateArray();
    }

    CoreML__Specification__Model *m = ar_alloc(x, sizeof *m);
    CoreML__Specification__ModelDescription *desc = ar_alloc(x, sizeof *desc);
    CoreML__Specification__MILSpec__Program *prog = ar_alloc(x, sizeof *prog);
    if (!m || !desc || !prog) return x->st;
    core_ml__specification__model__init(m);
    core_ml__specification__model_description__init(desc);
    core_ml__specification__milspec__program__init(prog);
    size_t fcap = 0, dcap = 0;
    /* decode first: the default function */
    int32_t order[G_MAX_FUNCTIONS], n_order = 0;
    int32_t dec = graph_find_function(p, "decode"), pre = graph_find_function(p, "prefill");
    if (dec < 0 || pre < 0) return fail(x, SLM_ERR_UNSUPPORTED, "export: the plan lacks a prefill or decode function");
    order[n_order++] = pre, order[n_order++] = dec;
    for (int32_t i = 0; i < n_order; i++) {
        int32_t fn = order[i];
        CoreML__Specification__FunctionDescription *fd = ar_alloc(x, sizeof *fd);
        CoreML__Specification__MILSpec__Program__FunctionsEntry *fe = ar_alloc(x, sizeof *fe);
        if (!fd || !fe) return x->st;
        core_ml__specification__function_description__init(fd);
        core_ml__specification__milspec__program__functions_entry__init(fe);
        if (!(fd->name = ar_str(x, p->functions[fn].name)) || !(fe->key = fd->name)) return x->st;
        if (!(fe->value = build_function(x, fn, fd))) return x->st != SLM_OK ? x->st : fail(x, SLM_ERR_NOMEM, "export: out of memory");
        if (!ar_push(x, (void ***)&prog->functions, &prog->n_functions, &fcap, fe) ||
            !ar_push(x, (void ***)&desc->functions, &desc->n_functions, &dcap, fd))
            return x->st;
    }
    prog->version = 1;
    desc->defaultfunctionname = ar_str(x, "decode");
    m->specificationversion = 9;
    m->description = desc;
    m->type_case = CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM;
    m->mlprogram = prog;
    if (x->st != SLM_OK || dry) return x->st;

    /* weight.bin header, then close it */
    unsigned char hdr[64] = {0};
    uint32_t version = 2;
    memcpy(hdr, &x->n_blobs, 4), memcpy(hdr + 4, &version, 4);
    if (fseek(x->wf, 0, SEEK_SET) != 0 || fwrite(hdr, 1, 64, x->wf) != 64 || fseek(x->wf, 0, SEEK_END) != 0)
        return fail(x, SLM_ERR_IO, "export: writing weight.bin failed");
    /* pad the last blob to 64 bytes, as coremltools does */
    long end = ftell(x->wf);
    static const unsigned char zeros[64];
    if (end > 0 && (end % 64) && fwrite(zeros, 1, (size_t)(64 - end % 64), x->wf) != (size_t)(64 - end % 64))
        return fail(x, SLM_ERR_IO, "export: writing weight.bin failed");
    int rc = fclose(x->wf);
    x->wf = NULL;
    if (rc != 0) return fail(x, SLM_ERR_IO, "export: writing weight.bin failed");

    size_t size = core_ml__specification__model__get_packed_size(m);
    uint8_t *bytes = al_malloc(x->al, size ? size : 1);
    if (!bytes) return fail(x, SLM_ERR_NOMEM, "export: out of memory (%zu bytes of model spec)", size);
    core_ml__specification__model__pack(m, bytes);
    snprintf(buf, sizeof buf, "%s/Data/com.apple.CoreML/model.mlmodel", tmp);
    slm_status st = write_file(x, buf, bytes, size);
    al_free(x->al, bytes);
    if (st != SLM_OK) return st;
    snprintf(buf, sizeof buf, "%s/Manifest.json", tmp);
    if (write_file(x, buf, manifest, sizeof manifest - 1) != SLM_OK) return x->st;
    return SLM_OK;
}

/* The compute-plan report: per function its MIL ops (ANE-eligible or why not), the states and the
 * op histogram. */
static slm_status write_report(exporter *x, const char *path, const char *package) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "format", "coreml");
    cJSON_AddStringToObject(r, "package", package);
    cJSON_AddNumberToObject(r, "specification_version", 9);
    cJSON_AddStringToObject(r, "default_function", "decode");
    cJSON_AddNumberToObject(r, "n_ctx", x->pl->n_ctx);
    cJSON *wo = cJSON_AddObjectToObject(r, "weights");
    cJSON_AddStringToObject(wo, "form", x->wq == SLM_DTYPE_Q8_0 ? "int8" : x->wq == SLM_DTYPE_Q4_0 ? "int4" : "f16");
    cJSON_AddNumberToObject(wo, "exact", x->n_exact);
    cJSON_AddNumberToObject(wo, "requantised", x->n_requant);
    cJSON_AddNumberToObject(wo, "f16", x->n_f16);
    cJSON_AddNumberToObject(wo, "bytes", (double)x->w_end);
    cJSON_AddItemToObject(r, "functions", x->rep_fns);
    x->rep_fns = NULL;
    cJSON *sts = cJSON_AddArrayToObject(r, "states");
    for (int32_t s = 0; s < x->p->n_states; s++) {
        const g_state *st = &x->p->states[s];
        char name[G_NAME_CAP];
        snprintf(name, sizeof name, "%s", st->name);
        sanitize(name);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddStringToObject(o, "dtype", "f16");
        int64_t shape[MAX_RANK];
        state_shape(st, shape);
        cJSON *a = cJSON_AddArrayToObject(o, "shape");
        for (int32_t i = 0; i < st->n_dims; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)shape[i]));
        cJSON_AddItemToArray(sts, o);
    }
    cJSON_AddItemToObject(r, "op_histogram", x->histogram);
    x->histogram = NULL;
    char *text = cJSON_Print(r);
    cJSON_Delete(r);
    if (!text) return fail(x, SLM_ERR_NOMEM, "export: out of memory");
    char tmp[PATH_CAP + 8];
    snprintf(tmp, sizeof tmp, "%.*s.tmp", PATH_CAP - 1, path);
    slm_status st = write_file(x, tmp, text, strlen(text));
    cJSON_free(text);
    if (st == SLM_OK && rename(tmp, path) != 0) st = fail(x, SLM_ERR_IO, "export: cannot write %s: %s", path, strerror(errno));
    if (st != SLM_OK) remove(tmp);
    return st;
}

static void exporter_free(exporter *x) {
    if (x->wf) fclose(x->wf);
    x->wf = NULL;
    cJSON_Delete(x->histogram);
    cJSON_Delete(x->rep_fns);
    al_free(x->al, x->tval), al_free(x->al, x->blob_off), al_free(x->al, x->state_v);
    al_free(x->al, x->row), al_free(x->al, x->row16);
    ar_free(x);
}

SLM_API bool slm_export_available(const char *format, const char **why) {
    if (why) *why = "";
    if (format && strcmp(format, "coreml") != 0) {
        if (why) *why = "unknown export format (known: coreml)";
        return false;
    }
    return true;
}

SLM_API slm_status slm_plan_export(slm_plan *pl, const char *path, const slm_export_params *params) {
    if (!pl) return SLM_ERR_INVALID_ARG;
    err_clear(&pl->err);
    slm_export_params ep = slm_export_params_default();
    params_read(&ep, sizeof ep, params);
    if (ep.weights == 0) ep.weights = SLM_DTYPE_F16;
    if (!path || !*path) return err_set(&pl->err, SLM_ERR_INVALID_ARG, "export: no output path");
    if (ep.format && strcmp(ep.format, "coreml") != 0)
        return err_set(&pl->err, SLM_ERR_INVALID_ARG, "export: unknown format '%s' (known: coreml)", ep.format);
    if (ep.weights != SLM_DTYPE_F16 && ep.weights != SLM_DTYPE_Q8_0 && ep.weights != SLM_DTYPE_Q4_0)
        return err_set(&pl->err, SLM_ERR_UNSUPPORTED, "export: weights %s: f16, q8_0 (int8) or q4_0 (int4) only",
                       slm_dtype_name(ep.weights));
    if (strcmp(pl->target->name, "ane") != 0)
        return err_set(&pl->err, SLM_ERR_INVALID_ARG, "export: Core ML export needs a plan for target ane, not %s",
                       pl->target->name);
    if (!pl->legal) return err_set(&pl->err, SLM_ERR_INVALID_ARG, "export: the plan has no legalised program");
    size_t plen = strlen(path);
    while (plen > 1 && path[plen - 1] == '/') plen--;
    if (plen + 16 >= PATH_CAP) return err_set(&pl->err, SLM_ERR_INVALID_ARG, "export: output path too long");
    char out[PATH_CAP - 16], tmp[PATH_CAP];
    memcpy(out, path, plen);
    out[plen] = 0;
    exporter x = {0};
    x.al = &pl->alloc;
    x.e = &pl->err;
    x.pl = pl;
    x.p = pl->legal;
    x.wq = ep.weights;
    if (ep.dry_run) {
        slm_status st = export_coreml(&x, &ep, NULL);
        exporter_free(&x);
        return st;
    }
    struct stat sb;
    if (stat(out, &sb) == 0)
        return err_set(&pl->err, SLM_ERR_IO, "export: %s already exists (remove it first)", out);
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", out);
    if (!mkdtemp(tmp)) return err_set(&pl->err, SLM_ERR_IO, "export: cannot create %s: %s", tmp, strerror(errno));
    slm_status st = export_coreml(&x, &ep, tmp);
    if (x.wf) fclose(x.wf);
    x.wf = NULL;
    if (st == SLM_OK && rename(tmp, out) != 0) st = fail(&x, SLM_ERR_IO, "export: cannot rename %s to %s: %s", tmp, out, strerror(errno));
    if (st != SLM_OK) rm_tree(tmp);
    if (st == SLM_OK && ep.report_path && write_report(&x, ep.report_path, out) != SLM_OK) {
        st = x.st;
        rm_tree(out);
    }
    exporter_free(&x);
    return st;
}

#else /* !SLM_HAVE_COREML */

#ifndef SLM_COREML_MISSING
#define SLM_COREML_MISSING " the Core ML protobuf sources"
#endif

SLM_API bool slm_export_available(const char *format, const char **why) {
    if (why)
        *why = format && strcmp(format, "coreml") != 0 ? "unknown export format (known: coreml)"
                                                       : "this build has no Core ML export (built without:" SLM_COREML_MISSING ")";
    return false;
}

SLM_API slm_status slm_plan_export(slm_plan *pl, const char *path, const slm_export_params *params) {
    (void)path, (void)params;
    if (!pl) return SLM_ERR_INVALID_ARG;
    return err_set(&pl->err, SLM_ERR_UNSUPPORTED,
                   "export: this build has no Core ML export (built without:" SLM_COREML_MISSING ")");
}

#endif

SLM_API slm_export_params slm_export_params_default(void) {
    slm_export_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.format = "coreml";
    p.weights = SLM_DTYPE_F16;
    return p;
}
