/* model.h — struct slm_model: the loaded file(s), the canonical tensor directory, hyper-parameters,
 * tokenizer and chat template. Immutable after slm_model_load; safe to share between threads.
 * Canonical tensor names are GGUF names (the spec tensor tables); Hugging Face names are mapped
 * on load. Does not build programs (graph builders do) and does not run anything. */
#ifndef SLM_MODEL_MODEL_H
#define SLM_MODEL_MODEL_H

#include <pthread.h>

#include "base/alloc.h"
#include "base/log.h"
#include "format/gguf.h"
#include "format/hfconfig.h"
#include "format/safetensors.h"
#include "model/hparams.h"

typedef struct mdl_tensor {
    char *name;             /* canonical (GGUF-style) name; owned */
    const char *file_name;  /* as stored in the file; borrowed from the reader */
    uint32_t type;          /* slm_dtype */
    int32_t n_dims;
    int64_t ne[4];          /* ggml order; size-1 middle dims of HF conv weights squeezed */
    uint64_t size_bytes;
    const uint8_t *data;    /* mapped, or one of slm_model.owned (HF layout rewrite, quantised on load) */
} mdl_tensor;

typedef struct arch_def arch_def;

struct slm_model {
    slm_allocator alloc;
    slm_logger log;
    int32_t n_threads;
    slm_model_format format;
    char *path;
    char *name;
    const arch_def *arch;
    gguf_file gguf;          /* format GGUF */
    st_set st;               /* format HF */
    hf_config hf;            /* format HF */
    int32_t n_tensors;
    mdl_tensor *tensors;     /* (n_tensors), file order */
    uint64_t weight_bytes;
    int32_t n_owned;         /* buffers of rewritten (hf_layout.c) or quantised-on-load weights */
    uint8_t **owned;         /* (3 * n_tensors at most), al_malloc_large */
    mdl_hparams hp;
    int32_t n_hparams;
    mdl_hparam_entry *hparams; /* (n_hparams) for info */
    slm_tokenizer *tok;      /* NULL if the model carries none */
    char *chat_template;     /* NULL if none stored */
    uint8_t fingerprint[16]; /* XXH3-128 of arch, hyper-parameters, tensor names/types/shapes */
    /* Memoised by the runtime when the first session is created, guarded by rt_mu: data derived
     * from the weights and shared by every session (repacked weights). The model stays logically
     * immutable; rt_cache_free releases it at destroy. */
    pthread_mutex_t rt_mu;
    void *rt_cache;
    void (*rt_cache_free)(void *cache);
    /* chat_template parsed by the Jinja interpreter on its first render (under rt_mu), then
     * shared read-only by every render; NULL before. */
    struct jinja_template *chat_jinja;
    int32_t n_states;
    char **state_names;      /* (n_states) */
    int32_t *state_layer;    /* (n_states) */
    slm_state_role *state_role; /* (n_states) */
};

/* Canonical-name lookup; NULL if absent. */
const mdl_tensor *mdl_find_tensor(const slm_model *m, const char *name);
/* Formatted-name lookup: mdl_find_tensorf(m, "blk.%d.attn_q.weight", il). */
const mdl_tensor *mdl_find_tensorf(const slm_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Architecture table entry (model/arch.c). */
struct arch_def {
    const char *name;                 /* GGUF general.architecture */
    const char *const *hf_model_types; /* config.json model_type values, NULL-terminated */
    /* Fills m->hp from GGUF metadata / HF config. Tensors are already loaded (for shape-derived
     * values such as n_ff). */
    slm_status (*hparams_gguf)(slm_model *m, slm_err *e);
    slm_status (*hparams_hf)(slm_model *m, slm_err *e);
    /* Maps an HF tensor name to the canonical GGUF name into out (cap bytes); n_layer is
     * config.json's num_hidden_layers (qwen35's MTP block is numbered after it). Returns false for
     * tensors the runtime ignores (vision tower, rotary caches). */
    bool (*hf_tensor_name)(const char *hf_name, int32_t n_layer, char *out, size_t cap);
};

/* The supported architectures, and lookups by GGUF name / HF model_type. */
extern const arch_def *const arch_table[];
const arch_def *arch_find(const char *gguf_arch);
const arch_def *arch_find_hf(const char *model_type);
/* The names of arch_table, ", "-separated ("llama, qwen3, ..."), into out (cut to cap). */
void arch_supported_list(char *out, size_t cap);

/* ---- states a session of this model holds (model/states.c) ---------------------------------
 * One source of truth for `statelm info` and the program builders. Order: by layer; attention
 * and sliding-attention layers hold kv_k then kv_v, conv layers one conv state, linear-attention
 * layers ssm_conv then ssm_state. Shapes in ggml order (innermost first):
 *   kv_k      (head_dim * n_head_kv, n_ctx)            kv dtype, pos_axis 1
 *   kv_v      (head_dim_v * n_head_kv, n_ctx)          kv dtype, pos_axis 1
 *             sliding layers: R = mdl_swa_rows rows instead of n_ctx (a ring when R < n_ctx)
 *   conv      (n_embd, conv_kernel - 1)                f32, pos_axis 1 (sliding window)
 *   ssm_conv  (2*Hk*dk + Hv*dv, ssm_conv_kernel - 1)   f32, pos_axis 1 (sliding window)
 *   ssm_state (dv, dk, Hv)                             f32, no pos axis */
typedef struct mdl_state_spec {
    const char *name;      /* borrowed from the model */
    slm_state_role role;
    int32_t layer;
    slm_dtype dtype;
    int32_t n_dims;
    int64_t ne[4];
    int32_t pos_axis;
} mdl_state_spec;

int32_t mdl_n_states(const slm_model *m);
/* Rows of a sliding layer's KV states for a context of n_ctx: a ring of R = 2 W rounded up to a
 * multiple of 16 (key P in row P mod R; a call then writes at most W rows, mdl_swa_call_tokens),
 * or n_ctx rows when n_ctx <= R (no ring: key P in row P). *ring = R, or 0 without a ring. */
int32_t mdl_swa_rows(const mdl_hparams *hp, int32_t n_ctx, int32_t *ring);
/* Most tokens one Program call of a context of n_ctx may take (0 = any). */
int32_t mdl_swa_call_tokens(const mdl_hparams *hp, int32_t n_ctx);
/* Fills spec i for a session of n_ctx tokens with K states of dtype kv_k and V states of dtype kv_v
 * (F16, F32, Q8_0 or Q4_0). */
void mdl_state_spec_at(const slm_model *m, int32_t n_ctx, slm_dtype kv_k, slm_dtype kv_v, int32_t i,
                       mdl_state_spec *spec);
/* NULL when states of dtype kv (K: key true) fit the model, else why not (a quantised type needs a
 * head dimension that is a multiple of its 32-element block). Static storage. */
const char *mdl_kv_dtype_why(const slm_model *m, slm_dtype kv, bool key);
/* Builds m's state-name table (called once by the loader). */
slm_status mdl_states_init(slm_model *m, slm_err *e);

#endif
