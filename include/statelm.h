/* statelm.h — the public header of statelm, a C11 runtime for small language models whose
 * state (KV caches, LFM2 conv state, Qwen3.5 DeltaNet state) is first-class. The one other public
 * header, statelm_engine.h (the serving engine), includes this one.
 *
 * Conventions (see docs/style.md):
 *  - Every fallible call returns slm_status: 0 = SLM_OK, negative = error. Codes are append-only.
 *  - Out-params are set to NULL/0 on failure; inputs are left unchanged on failure.
 *  - Error detail lives on the handle (slm_session_errmsg) or, for constructors, in an optional
 *    caller buffer (err, err_cap).
 *  - Handles are opaque. slm_model is immutable after load and may be shared by threads;
 *    slm_session is used by one thread at a time. Destroy functions accept NULL.
 *  - Params structs are append-only, begin with `size` and have a slm_*_params_default()
 *    constructor. The library reads only the first `size` bytes (sizeof the struct the caller was
 *    built with): fields a smaller, older struct lacks keep their defaults, and a struct zeroed
 *    whole (size 0) gives every default, so set size (or start from the constructor) to pass any
 *    field. A field left at 0 means its default, except where its comment gives 0 a meaning of its
 *    own (slm_sampler_params: temperature 0 = greedy, top_k 0 and min_p 0 = off).
 *  - The library never prints, exits or aborts on bad input.
 *
 * NULL policy (every function; tests/unit/test_api_null.c calls each one with NULL):
 *  - Calls returning slm_status return SLM_ERR_INVALID_ARG for a NULL handle, a NULL required
 *    out-param, or a NULL array with a non-zero count; their non-NULL out-params are cleared first
 *    (NULL, 0, false; -1 for token ids and first_diff). Out-params documented as optional may be NULL.
 *  - Getters of a NULL handle return "nothing": 0 for counts, sizes, positions and n_ctx, -1 for
 *    token ids, false for predicates, NULL for pointers and strings, and the first enumerator
 *    (SLM_FORMAT_GGUF, SLM_LAYER_ATTENTION, SLM_TOKENIZER_BPE) for enums. Their out-params get the
 *    same: slm_session_history(NULL, &n) sets n = 0, slm_session_checkpoint_stats(NULL, &st) zeroes
 *    st, slm_model_fingerprint(NULL, out) zeroes out.
 *  - slm_session_errmsg(NULL) and slm_plan_errmsg(NULL) return "invalid argument: NULL handle".
 *  - Destroy functions, slm_free and slm_session_reset do nothing with NULL.
 *  - Params pointers may be NULL (defaults); a NULL err buffer means no message.
 */
#ifndef STATELM_H
#define STATELM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLM_API __attribute__((visibility("default")))

#define SLM_VERSION_MAJOR 0
#define SLM_VERSION_MINOR 1
#define SLM_VERSION_PATCH 0

/* ---------------------------------------------------------------------------------------------
 * Status codes: one table generates the enum, slm_status_name() and slm_status_str().
 * Append only; never renumber. */
#define SLM_STATUS_LIST(X)                                                                 \
    X(SLM_OK, 0, "ok")                                                                     \
    X(SLM_ERR_INVALID_ARG, -1, "invalid argument")                                         \
    X(SLM_ERR_NOMEM, -2, "out of memory")                                                  \
    X(SLM_ERR_IO, -3, "input/output error")                                                \
    X(SLM_ERR_FORMAT, -4, "malformed file")                                                \
    X(SLM_ERR_UNSUPPORTED, -5, "unsupported feature")                                      \
    X(SLM_ERR_SHAPE, -6, "tensor shape mismatch")                                          \
    X(SLM_ERR_RANGE, -7, "value out of range")                                             \
    X(SLM_ERR_CONTEXT_FULL, -8, "context is full")                                         \
    X(SLM_ERR_STATE, -9, "incompatible or damaged state")                                  \
    X(SLM_ERR_BACKEND, -10, "backend failure")                                             \
    X(SLM_ERR_ABORTED, -11, "aborted by callback")                                         \
    X(SLM_ERR_NOT_FOUND, -12, "not found")

typedef enum slm_status {
#define SLM_X_ENUM(name, value, text) name = value,
    SLM_STATUS_LIST(SLM_X_ENUM)
#undef SLM_X_ENUM
} slm_status;

/* "SLM_ERR_FORMAT" for SLM_ERR_FORMAT; "SLM_UNKNOWN_STATUS" for values outside the table. */
SLM_API const char *slm_status_name(slm_status status);
/* A short English description of the status. Static storage. */
SLM_API const char *slm_status_str(slm_status status);

/* ---------------------------------------------------------------------------------------------
 * Tensor data types. Values are the GGUF/ggml type ids (docs/spec/gguf.md §2). */
typedef enum slm_dtype {
    SLM_DTYPE_F32 = 0,
    SLM_DTYPE_F16 = 1,
    SLM_DTYPE_Q4_0 = 2,
    SLM_DTYPE_Q4_1 = 3,
    SLM_DTYPE_Q5_0 = 6,
    SLM_DTYPE_Q5_1 = 7,
    SLM_DTYPE_Q8_0 = 8,
    SLM_DTYPE_Q8_1 = 9,
    SLM_DTYPE_Q2_K = 10,
    SLM_DTYPE_Q3_K = 11,
    SLM_DTYPE_Q4_K = 12,
    SLM_DTYPE_Q5_K = 13,
    SLM_DTYPE_Q6_K = 14,
    SLM_DTYPE_Q8_K = 15,
    SLM_DTYPE_I8 = 24,
    SLM_DTYPE_I16 = 25,
    SLM_DTYPE_I32 = 26,
    SLM_DTYPE_I64 = 27,
    SLM_DTYPE_F64 = 28,
    SLM_DTYPE_BF16 = 30,
    SLM_DTYPE_COUNT = 40 /* upper bound of ids, not a type */
} slm_dtype;

/* "f32", "q4_k", ...; "unknown" for ids that are not types statelm knows. Static storage. */
SLM_API const char *slm_dtype_name(slm_dtype dtype);

/* ---------------------------------------------------------------------------------------------
 * Logging and allocation hooks, carried by params structs. */
typedef enum slm_log_level { SLM_LOG_ERROR = 0, SLM_LOG_WARN = 1, SLM_LOG_INFO = 2, SLM_LOG_DEBUG = 3 } slm_log_level;
typedef void (*slm_log_fn)(void *user_data, slm_log_level level, const char *message);
/* alloc returns NULL on failure; free accepts NULL. Both must be thread-safe if the model is
 * shared by threads. NULL hooks mean malloc/free. */
typedef void *(*slm_alloc_fn)(void *user_data, size_t size);
typedef void (*slm_free_fn)(void *user_data, void *ptr);
/* Returning true aborts the running computation with SLM_ERR_ABORTED. */
typedef bool (*slm_abort_fn)(void *user_data);

/* ---------------------------------------------------------------------------------------------
 * Models: a loaded GGUF file or Hugging Face folder. Immutable after load; shareable. */
typedef struct slm_model slm_model;

typedef enum slm_model_format { SLM_FORMAT_GGUF = 0, SLM_FORMAT_HF = 1 } slm_model_format;

typedef struct slm_model_params {
    size_t size;          /* sizeof(slm_model_params) */
    slm_log_fn log_fn;    /* optional */
    void *log_user_data;
    slm_alloc_fn alloc_fn; /* optional; with free_fn */
    slm_free_fn free_fn;
    void *alloc_user_data;
    int32_t n_threads;    /* default for sessions; 0 = number of online CPUs */
    const char *quantize; /* NULL, or a type of slm_quantize ("q4_0", "q4_k_m", ...): the weights are
                           * quantised in memory on load with the tensor types and bytes slm_quantize
                           * would write for the same source (docs/quantize.md) */
} slm_model_params;

SLM_API slm_model_params slm_model_params_default(void);

/* Loads a GGUF file or a Hugging Face folder (config.json + model.safetensors or a sharded
 * model.safetensors.index.json, tokenizer.json, generation_config.json). Weights stay memory-
 * mapped, except the tensors of a folder that llama.cpp's converter rewrites (llama q/k rows,
 * qwen35 linear-attention heads and norms, gemma3 norms): those are held, in the GGUF layout, in
 * memory the model owns (docs/convert.md). On failure *out is NULL and err (if err_cap > 0) holds
 * a one-line message naming the field and, for binary files, the byte offset. */
SLM_API slm_status slm_model_load(const char *path, const slm_model_params *params, slm_model **out,
                                  char *err, size_t err_cap);
SLM_API void slm_model_destroy(slm_model *model);

SLM_API slm_model_format slm_model_get_format(const slm_model *model);
/* Architecture id as in GGUF general.architecture: "llama", "qwen3", "lfm2", "qwen35", "gemma3".
 * Borrowed until slm_model_destroy. */
SLM_API const char *slm_model_arch(const slm_model *model);
/* general.name or the folder name; borrowed. May be "". */
SLM_API const char *slm_model_name(const slm_model *model);

typedef enum slm_layer_kind {
    SLM_LAYER_ATTENTION = 0,        /* softmax attention with a KV cache */
    SLM_LAYER_CONV = 1,             /* LFM2 gated short convolution */
    SLM_LAYER_LINEAR_ATTENTION = 2, /* Qwen3.5 gated DeltaNet */
    SLM_LAYER_SLIDING_ATTENTION = 3 /* Gemma 3 local layers: attention over the last W positions, whose
                                     * KV state is a ring of rows independent of the context */
} slm_layer_kind;
SLM_API const char *slm_layer_kind_name(slm_layer_kind kind);

SLM_API int32_t slm_model_n_layer(const slm_model *model);
SLM_API slm_layer_kind slm_model_layer_kind(const slm_model *model, int32_t layer);
SLM_API int32_t slm_model_n_vocab(const slm_model *model);
SLM_API int32_t slm_model_n_embd(const slm_model *model);
SLM_API int32_t slm_model_n_ctx_train(const slm_model *model);
/* Default context of a session when slm_session_params.n_ctx is 0: min(n_ctx_train, 4096). */
SLM_API int32_t slm_model_n_ctx_default(const slm_model *model);

/* How slm_session_embed pools the hidden states of n tokens into one vector. The values are
 * llama.cpp's (GGUF <arch>.pooling_type); SLM_POOLING_RANK (a reranker head) is refused. */
typedef enum slm_pooling {
    SLM_POOLING_MODEL = -1, /* the model's <arch>.pooling_type, SLM_POOLING_LAST when it has none */
    SLM_POOLING_NONE = 0,   /* no pooling: one vector per token */
    SLM_POOLING_MEAN = 1,   /* mean over the tokens */
    SLM_POOLING_CLS = 2,    /* the first token's */
    SLM_POOLING_LAST = 3,   /* the last token's (causal embedding models: Qwen3-Embedding) */
    SLM_POOLING_RANK = 4
} slm_pooling;
/* "none", "mean", "cls", "last", "rank"; NULL for other values. Static storage. */
SLM_API const char *slm_pooling_name(slm_pooling pooling);
/* The GGUF's <arch>.pooling_type as stored (any integer), or SLM_POOLING_MODEL (-1) when the file
 * has none (and for Hugging Face folders). */
SLM_API int32_t slm_model_pooling(const slm_model *model);

/* Named numeric hyper-parameters exactly as the model builder sees them (after defaults and
 * derivations such as n_ff from tensor shapes). i in [0, slm_model_n_hparams). */
SLM_API int32_t slm_model_n_hparams(const slm_model *model);
SLM_API slm_status slm_model_hparam(const slm_model *model, int32_t i, const char **name, double *value);

typedef struct slm_tensor_info {
    const char *name;     /* canonical (GGUF-style) name; borrowed until model destroy */
    const char *file_name;/* name as stored in the file */
    slm_dtype dtype;
    int32_t n_dims;
    int64_t ne[4];        /* ggml order: ne[0] is the contiguous axis */
    uint64_t size_bytes;
} slm_tensor_info;

SLM_API int32_t slm_model_n_tensors(const slm_model *model);
SLM_API slm_status slm_model_tensor(const slm_model *model, int32_t i, slm_tensor_info *info);
/* Sum of the tensor data bytes of all tensors. */
SLM_API uint64_t slm_model_weight_bytes(const slm_model *model);
/* The chat template stored with the model (GGUF tokenizer.chat_template or tokenizer_config.json),
 * or NULL. Borrowed. */
SLM_API const char *slm_model_chat_template(const slm_model *model);

/* States a session of this model holds. */
typedef enum slm_state_role {
    SLM_STATE_KV_KEY = 0,
    SLM_STATE_KV_VALUE = 1,
    SLM_STATE_CONV = 2,
    SLM_STATE_RECURRENT = 3
} slm_state_role;
SLM_API const char *slm_state_role_name(slm_state_role role);

typedef struct slm_state_info {
    const char *name;   /* e.g. "blk.2.kv_k"; borrowed until the owner is destroyed */
    slm_state_role role;
    int32_t layer;
    slm_dtype dtype;
    int32_t n_dims;
    int64_t ne[4];      /* ggml order */
    int32_t pos_axis;   /* axis along which positions move, -1 if none (recurrent) */
    uint64_t size_bytes;
} slm_state_info;

/* The states a session with context n_ctx (0 = default) and KV dtype kv_dtype (F16, F32, Q8_0 or
 * Q4_0, for both K and V) will hold, in declaration order. A quantised kv_dtype for a model whose
 * head dimension is not a multiple of 32 gives SLM_ERR_UNSUPPORTED for its KV states. */
SLM_API int32_t slm_model_n_states(const slm_model *model);
SLM_API slm_status slm_model_state(const slm_model *model, int32_t n_ctx, slm_dtype kv_dtype, int32_t i,
                                   slm_state_info *info);

/* ---------------------------------------------------------------------------------------------
 * Tokenizer: owned by the model (borrowed handle, slm_model_tokenizer), or loaded on its own from
 * a file's tokenizer metadata (slm_tokenizer_load, freed with slm_tokenizer_free). */
typedef struct slm_tokenizer slm_tokenizer;

typedef enum slm_tokenizer_kind {
    SLM_TOKENIZER_BPE = 0,          /* byte-level BPE (GGUF model "gpt2") */
    SLM_TOKENIZER_SPM = 1,          /* SentencePiece-style BPE with byte fallback ("llama") */
    SLM_TOKENIZER_WPM = 2           /* WordPiece ("bert") */
} slm_tokenizer_kind;

/* Borrowed until slm_model_destroy; NULL if the model carries no tokenizer. */
SLM_API const slm_tokenizer *slm_model_tokenizer(const slm_model *model);
/* Loads only the tokenizer of path: a GGUF file's tokenizer.ggml.* keys (a vocab-only GGUF without
 * tensors, or a model of an architecture statelm does not run, loads as well as one it runs) or a
 * Hugging Face folder's tokenizer.json. params (NULL = defaults): only the allocator hooks are used.
 * The file is not kept open. Tokenizer models: "gpt2" (byte-level BPE; tokenizer.ggml.pre names
 * the pre-tokenizer, docs/spec/gguf.md §7 lists those supported), "llama" (SentencePiece BPE),
 * "gemma4" (BPE on raw UTF-8 with byte fallback), "bert" (WordPiece). Others (e.g. "t5", "rwkv")
 * and unknown pre-tokenizers fail with SLM_ERR_UNSUPPORTED and a message naming them; a file without a
 * tokenizer with SLM_ERR_NOT_FOUND; damaged metadata with SLM_ERR_FORMAT. The tokenizer is
 * thread-safe and independent of any model; free it with slm_tokenizer_free. */
SLM_API slm_status slm_tokenizer_load(const char *path, const slm_model_params *params, slm_tokenizer **out,
                                      char *err, size_t err_cap);
/* Frees a tokenizer from slm_tokenizer_load (NULL is a no-op). Never pass slm_model_tokenizer's. */
SLM_API void slm_tokenizer_free(slm_tokenizer *tok);
SLM_API slm_tokenizer_kind slm_tokenizer_get_kind(const slm_tokenizer *tok);
/* Pre-tokenizer name, e.g. "llama3", "gpt2", "qwen2", "smollm". Static storage. */
SLM_API const char *slm_tokenizer_pre_name(const slm_tokenizer *tok);
SLM_API int32_t slm_tokenizer_n_vocab(const slm_tokenizer *tok);
/* Special ids; -1 when absent. */
SLM_API int32_t slm_tokenizer_bos(const slm_tokenizer *tok);
SLM_API int32_t slm_tokenizer_eos(const slm_tokenizer *tok);
SLM_API int32_t slm_tokenizer_eot(const slm_tokenizer *tok);
SLM_API int32_t slm_tokenizer_pad(const slm_tokenizer *tok);
SLM_API bool slm_tokenizer_add_bos(const slm_tokenizer *tok);
/* True for ids that end generation (eos, eot, end-of-turn tokens). */
SLM_API bool slm_tokenizer_is_eog(const slm_tokenizer *tok, int32_t id);
/* Token text as stored (e.g. "Ġthe"); borrowed; NULL when id is out of range. */
SLM_API const char *slm_tokenizer_token_text(const slm_tokenizer *tok, int32_t id);

#define SLM_TOKENIZE_ADD_BOS 1u        /* prepend BOS when the tokenizer says add_bos */
#define SLM_TOKENIZE_PARSE_SPECIAL 2u  /* match special/control token text before splitting */

/* Encodes text[0, len) into ids. *n_out receives the number of ids; if it exceeds cap, the ids are
 * not written beyond cap and SLM_ERR_RANGE is returned (call again with a larger buffer).
 * Invalid UTF-8 in text is not an error: its bytes are encoded one by one (byte-level tokens, or
 * <0xNN> byte fallback). Text never encodes to a control token unless it spells one and
 * SLM_TOKENIZE_PARSE_SPECIAL is set: a byte (BPE) or character (SPM) the vocabulary cannot spell —
 * no token, no byte token — becomes the unknown token when the model has one that is not a
 * control token, else the call fails with SLM_ERR_INVALID_ARG and *n_out receives the byte offset
 * of that text (in text, or in its NFC form when the tokenizer normalises and NFC changed it).
 * E.g. SmolLM2's byte-level vocabulary has no token for 21 bytes (0xC0, 0xC1, 0xF5-0xFF, some
 * ASCII controls such as 0x04) and names the control token <|endoftext|> as unknown: "a\xff" fails
 * at offset 1.
 * Thread-safe. */
SLM_API slm_status slm_tokenizer_encode(const slm_tokenizer *tok, const char *text, size_t len, uint32_t flags,
                                        int32_t *ids, size_t cap, size_t *n_out);
/* Raw bytes of a token after undoing the byte-level mapping / byte fallback (may be a partial
 * UTF-8 sequence). Writes up to cap bytes; *n_out receives the full length. */
SLM_API slm_status slm_tokenizer_token_bytes(const slm_tokenizer *tok, int32_t id, char *buf, size_t cap,
                                             size_t *n_out);
/* Decodes ids to the concatenated token bytes (not NUL-terminated). Control tokens are skipped
 * unless render_special; SentencePiece's added space prefix (WordPiece's before the first word)
 * is removed. Decoding what slm_tokenizer_encode made gives the text back byte for byte (not for
 * WordPiece, which lowercases and respaces words) when the text is unchanged by the tokenizer's
 * NFC normalisation (if it has one), no part of it became the unknown token, and
 * render_special is set for control tokens it spelled (SLM_TOKENIZE_PARSE_SPECIAL, ADD_BOS).
 * Ids out of range fail with SLM_ERR_RANGE. Same cap rule. */
SLM_API slm_status slm_tokenizer_decode(const slm_tokenizer *tok, const int32_t *ids, size_t n_ids,
                                        bool render_special, char *buf, size_t cap, size_t *n_out);

/* Streaming detokenizer: feeds ids one by one and yields only complete UTF-8 characters. */
typedef struct slm_detokenizer slm_detokenizer;
SLM_API slm_status slm_detokenizer_create(const slm_tokenizer *tok, slm_detokenizer **out);
SLM_API void slm_detokenizer_destroy(slm_detokenizer *d);
/* Appends the token; *text and *len receive the newly completed text (borrowed until the next call).
 * Invalid byte sequences are emitted as U+FFFD once they can no longer become valid. */
SLM_API slm_status slm_detokenizer_push(slm_detokenizer *d, int32_t id, const char **text, size_t *len);
/* Flushes pending bytes (as U+FFFD if incomplete). */
SLM_API slm_status slm_detokenizer_flush(slm_detokenizer *d, const char **text, size_t *len);

/* ---------------------------------------------------------------------------------------------
 * Chat templates for the ChatML-style families. */
typedef struct slm_chat_message {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
} slm_chat_message;

/* How a chat is rendered (README "How templates are chosen"): template_name NULL runs the model's
 * own stored Jinja template (tokenizer.chat_template) through statelm's Jinja interpreter, with
 * the context transformers builds (messages, tools, add_generation_prompt, bos_token, eos_token);
 * SLM_ERR_NOT_FOUND when the model has none. A name selects one of the templates written out in C
 * instead: "chatml", "smollm2", "qwen3", "qwen3-nothink" (Qwen3 with enable_thinking=false: an
 * empty think block after the generation prompt), "lfm2", "llama3", "gemma" (Gemma 3: a system
 * message opens the first user turn). slm_chat_template_detect names the built-in that resembles
 * the stored template (static storage, NULL if none does); nothing runs it by default. */
SLM_API const char *slm_chat_template_detect(const slm_model *model);
/* Renders messages into *out (caller frees with slm_free). The rendered text contains the
 * special-token strings (e.g. "<|im_start|>"). To prefill, use slm_chat_tokenize: tokenising this
 * text with SLM_TOKENIZE_PARSE_SPECIAL would also turn control-token text inside messages into
 * control tokens. */
SLM_API slm_status slm_chat_render(const slm_model *model, const char *template_name, const slm_chat_message *msgs,
                                   size_t n_msgs, bool add_generation_prompt, char **out);
/* Token ids of a message's content, given to slm_chat_tokenize. */
typedef struct slm_chat_ids {
    const int32_t *ids; /* NULL: tokenise the content */
    size_t n_ids;
} slm_chat_ids;
/* Renders and tokenises the messages into *ids (*n_ids of them; caller frees with slm_free), ready
 * to prefill (BOS included where the template writes it). Special/control token text is recognised
 * only in the template's own text: message roles and contents are tokenised as plain text, so a
 * message that spells "<|im_end|>" gets the ids of those characters, never the control token.
 * The whole text is tokenised in one pass, so for contents that spell no control token the ids are
 * those of slm_chat_render's text tokenised with SLM_TOKENIZE_PARSE_SPECIAL. content_ids (n_msgs
 * entries, or NULL): where an entry has ids and the template writes that message's content whole
 * and unchanged, the content becomes exactly those ids (e.g. the ids an assistant turn was
 * generated as), the text on either side being tokenised up to it and from it; ids out of the
 * vocabulary fail with SLM_ERR_RANGE. */
SLM_API slm_status slm_chat_tokenize(const slm_model *model, const char *template_name, const slm_chat_message *msgs,
                                     size_t n_msgs, const slm_chat_ids *content_ids, bool add_generation_prompt,
                                     int32_t **ids, size_t *n_ids);
/* Tool calls (docs/serve.md "Tools"). tools: the OpenAI "tools" array as JSON text (NULL: none);
 * tool_calls: NULL, or n_msgs entries, each an assistant message's "tool_calls" array as JSON text
 * or NULL; tool_call_ids: NULL, or n_msgs entries, each a tool message's "tool_call_id" or NULL
 * (Jinja templates read it, e.g. Mistral's; the built-ins do not); fields: NULL, or n_msgs entries,
 * each NULL or a JSON object's text whose members are added to that message as a Jinja template
 * sees it, replacing members of the same name (e.g. {"name": ..., "reasoning_content": ...};
 * "role" and "tool_calls" may not be given; the built-ins ignore them). Rendered as the template renders them ("gemma":
 * SLM_ERR_UNSUPPORTED, Gemma 3's template has none); a bad tool, call or fields fails with
 * SLM_ERR_INVALID_ARG. The reason goes to err (err_cap bytes, may be 0). */
typedef struct slm_chat_tools {
    const char *tools;
    const char *const *tool_calls;
    const char *const *tool_call_ids;
    const char *const *fields;
} slm_chat_tools;
SLM_API slm_status slm_chat_render_tools(const slm_model *model, const char *template_name, const slm_chat_message *msgs,
                                         size_t n_msgs, const slm_chat_tools *tools, bool add_generation_prompt,
                                         char **out, char *err, size_t err_cap);
SLM_API slm_status slm_chat_tokenize_tools(const slm_model *model, const char *template_name,
                                           const slm_chat_message *msgs, size_t n_msgs, const slm_chat_tools *tools,
                                           const slm_chat_ids *content_ids, bool add_generation_prompt, int32_t **ids,
                                           size_t *n_ids, char *err, size_t err_cap);
/* The template a chat runs: name, a built-in (as template_name above); else text, Jinja source
 * (e.g. a --chat-template-file, a request's chat_template); both NULL: the model's stored template.
 * kwargs: chat_template_kwargs, a JSON object's text whose keys are added to the Jinja context
 * (e.g. "{\"enable_thinking\": false}"), or NULL; ignored by the built-ins. A bad template fails with
 * SLM_ERR_FORMAT and "line:column: what" in err, a raise_exception in it with SLM_ERR_INVALID_ARG
 * and its message. */
typedef struct slm_chat_template {
    const char *name;
    const char *text;
    const char *kwargs;
    bool request; /* text came with a request (a server's "chat_template" field): it runs under the
                   * tighter limits of docs/jinja.md "Limits" (a limit: SLM_ERR_RANGE, named) */
} slm_chat_template;
/* slm_chat_render_tools and slm_chat_tokenize_tools with the template tmpl (NULL: the stored one). */
SLM_API slm_status slm_chat_render_with(const slm_model *model, const slm_chat_template *tmpl,
                                        const slm_chat_message *msgs, size_t n_msgs, const slm_chat_tools *tools,
                                        bool add_generation_prompt, char **out, char *err, size_t err_cap);
SLM_API slm_status slm_chat_tokenize_with(const slm_model *model, const slm_chat_template *tmpl,
                                          const slm_chat_message *msgs, size_t n_msgs, const slm_chat_tools *tools,
                                          const slm_chat_ids *content_ids, bool add_generation_prompt, int32_t **ids,
                                          size_t *n_ids, char *err, size_t err_cap);
/* The tool-call format (slm_tool_format_detect's names) of the template tmpl selects (NULL: the
 * stored one): a built-in's own, else detected from the template text; NULL when it has none. */
SLM_API const char *slm_chat_tool_format(const slm_model *model, const slm_chat_template *tmpl);
/* Checks an OpenAI "tools" array (JSON text): SLM_ERR_INVALID_ARG with the entry and field in err. */
SLM_API slm_status slm_tools_check(const char *tools_json, char *err, size_t err_cap);
/* The tool-call format a chat template's text implies, from the markers it writes: "hermes"
 * (<tool_call>{json}</tool_call>: Qwen2.5/Qwen3, Hermes, Granite 4, SmolLM3), "qwen-xml"
 * (<tool_call><function=NAME><parameter=K>v</parameter></function></tool_call>: Qwen3.5,
 * Qwen3-Coder), "lfm2" (<|tool_call_start|>[f(a=1)]<|tool_call_end|>: LFM2, LFM2.5), "llama3"
 * ({"name", "parameters"}), "mistral" ([TOOL_CALLS][{...}]), "mistral-args"
 * ([TOOL_CALLS]NAME[ARGS]{...}), "granite" (<|tool_call|>[{...}]: Granite 3.x), "gpt-oss"
 * (harmony: <|channel|>commentary to=functions.NAME<|message|>{...}<|call|>); NULL when the
 * template renders no tool calls (or template_text is NULL). Static storage. Every function below
 * that takes a template_name also takes these format names. */
SLM_API const char *slm_tool_format_detect(const char *template_text);
/* The tool calls in a generated answer text[0, len), in the call format of template_name (a
 * built-in template name or a format name): *out (slm_free) is the JSON text {"content": string,
 * "tool_calls": [{"name": string, "arguments": string of a JSON object}, ...]}; without a
 * well-formed call, no calls and the whole text as content. */
SLM_API slm_status slm_tool_calls_parse(const char *template_name, const char *text, size_t len, char **out);
#define SLM_TOOL_PARSE_REASONING 1u  /* split the answer's leading think block off first */
#define SLM_TOOL_PARSE_THINK_OPEN 2u /* the prompt ended inside a think block: the answer opens as reasoning */
/* As slm_tool_calls_parse, with the request's "tools" (JSON text or NULL: the values of "qwen-xml"
 * calls are typed by each parameter's schema, a string parameter keeping its text) and flags: with
 * reasoning split off, *out also has "reasoning_content" (gpt-oss: its analysis channel, always).
 * Calls carry "id" where the model wrote one (Mistral's [CALL_ID], "id" members). */
SLM_API slm_status slm_tool_calls_parse_opts(const char *format, const char *tools_json, unsigned flags,
                                             const char *text, size_t len, char **out);
/* For streaming: how many bytes of text[0, len) are content whatever is generated next (they stop
 * before what is or may become a call); never more than the content prefix the parse finds later. */
SLM_API size_t slm_tool_calls_content_ready(const char *template_name, const char *text, size_t len);
/* Where a call in format's markers starts in text[0, len) (or a proper prefix of its marker ends the
 * text): the end of reasoning that a prompt opened and the answer never closed; len when none. */
SLM_API size_t slm_tool_call_start(const char *format, const char *text, size_t len);
/* The marker texts the parsers of format (a format or built-in template name; any other: none)
 * read, which a vocabulary may hold as control tokens that detokenising drops: its call markers
 * (e.g. "[TOOL_CALLS]", "<|tool_call|>", gpt-oss's "<|channel|>", "<|message|>") and the reasoning
 * tags ("<think>", "</think>"; Mistral's "[THINK]", "[/THINK]"). A NULL-terminated static list. A server keeps these tokens' text in
 * the answer it parses (docs/serve.md "Tools"). */
SLM_API const char *const *slm_tool_format_markers(const char *format);
/* For streaming a call in the formats whose arguments are JSON text (all but "lfm2" and
 * "qwen-xml", whose calls come whole at the end) as it is generated: true once the first call's
 * name is whole, with span[0], span[1] its offset and length in text and span[2], span[3] those
 * of its arguments written so far (a prefix of the arguments
 * slm_tool_calls_parse returns for the complete call; length 0 before they start). */
SLM_API bool slm_tool_call_partial(const char *template_name, const char *text, size_t len, size_t span[4]);
SLM_API void slm_free(void *ptr);

/* ---------------------------------------------------------------------------------------------
 * Sessions: one instance of a model's states plus its position. One thread at a time. */
typedef struct slm_session slm_session;

/* Dtype of a session's KV states (attention keys and values). Its own enum, not slm_dtype, so that
 * 0 is the default: slm_dtype's 0 is f32. SLM_KV_Q8_0 and SLM_KV_Q4_0 are ggml's block types
 * (llama.cpp's `-ctk/-ctv q8_0|q4_0`): each block of 32 values written into the cache is rotated
 * by the 32 x 32 Walsh-Hadamard matrix and quantised with ggml's reference rounding, and attention
 * reads the blocks directly (docs/architecture.md
 * "KV cache types"); they need a head dimension that is a multiple of 32 (else
 * slm_session_create and slm_plan_create fail with SLM_ERR_UNSUPPORTED saying so). */
typedef enum slm_kv_type {
    SLM_KV_DEFAULT = 0,
    SLM_KV_F16 = 1,
    SLM_KV_F32 = 2,
    SLM_KV_Q8_0 = 3, /* 34 bytes per 32 values: 8.5 bits */
    SLM_KV_Q4_0 = 4  /* 18 bytes per 32 values: 4.5 bits */
} slm_kv_type;

typedef struct slm_session_params {
    size_t size;          /* sizeof(slm_session_params) */
    int32_t n_ctx;        /* 0 = slm_model_n_ctx_default */
    slm_kv_type kv_type;  /* K and V states: SLM_KV_DEFAULT (0) = SLM_KV_F16; kv_type_k/_v override */
    int32_t n_threads;    /* 0 = model default */
    slm_abort_fn abort_fn;
    void *abort_user_data;
    /* Checkpoints of the conv and recurrent states for exact rollback (hybrid models only; KV
     * states simply truncate). Taken every checkpoint_interval tokens and at the end of every
     * multi-token prefill; 0 = default (128 or 256, larger for larger states: LFM2-350M every
     * 128 tokens, Qwen3.5-0.8B every 256), -1 = none (rollback replays from 0). A prefill is split
     * into calls at checkpoint positions, so short intervals cost prefill speed. */
    int32_t checkpoint_interval;
    /* In-memory budget for checkpoints in MiB; 0 = default (256). Over budget, checkpoints are
     * thinned (position 0 is always kept — it is the zero state — and the rest stay spread out),
     * or moved to checkpoint_dir when it is set. */
    int32_t checkpoint_budget_mib;
    const char *checkpoint_dir; /* optional folder for spilled checkpoints; must exist */
    /* CPU kernel tier: NULL, "" or "auto" = the best this CPU has; "ref" = the scalar reference
     * kernels only; "generic", "neon", "i8mm", "avx2", "avxvnni", "avx512" or "amx" = exactly that tier. A tier the
     * build or the CPU lacks fails with SLM_ERR_UNSUPPORTED (never replaced by another), any other
     * value with SLM_ERR_INVALID_ARG. The library reads no environment variable for this. */
    const char *kernels;
    bool no_repack; /* keep quantised weights in their file layout only (no repacked copies) */
    /* Also compile the Program's "embed" function (final-norm hidden states of every token), which
     * slm_session_embed runs; off by default (it adds a function to compile). */
    bool embeddings;
    /* Keep the final-norm hidden state of every position the session processes, which a
     * multi-token-prediction drafter reads (slm_spec_params.mtp): a Qwen3.5 model with its MTP
     * block only (SLM_ERR_UNSUPPORTED otherwise); n_ctx * n_embd floats. Logits are unchanged. */
    bool mtp;
    uint8_t reserved[5]; /* unused: keeps the fields below past the end of the struct before them */
    /* The K states' and the V states' type each; SLM_KV_DEFAULT (0) = kv_type's. */
    slm_kv_type kv_type_k;
    slm_kv_type kv_type_v;
} slm_session_params;

SLM_API slm_session_params slm_session_params_default(void);
SLM_API slm_status slm_session_create(const slm_model *model, const slm_session_params *params, slm_session **out,
                                      char *err, size_t err_cap);
SLM_API void slm_session_destroy(slm_session *s);
/* Message of the last failed call on s; borrowed until the next call on s. "" after success. */
SLM_API const char *slm_session_errmsg(const slm_session *s);

/* Processes n tokens starting at the current position. *logits (n_vocab floats, borrowed until the
 * next call on s) are those of the last token. Token ids out of range or n beyond the remaining
 * context fail with the session unchanged. */
SLM_API slm_status slm_session_prefill(slm_session *s, const int32_t *tokens, size_t n, const float **logits);
/* One token; same contract as prefill with n = 1, using the decode function. */
SLM_API slm_status slm_session_decode(slm_session *s, int32_t token, const float **logits);
/* One decode step for n sessions at once: sessions[i] takes tokens[i], and afterwards every session
 * is exactly as if slm_session_decode(sessions[i], tokens[i]) had been called (logits bit for bit,
 * states, history, checkpoints; a pending verify is ended). Each weight is read once for all n:
 * the column-local steps of the plan (matmuls, norms, elementwise, embedding, head) run once over
 * one column per session, the steps on states or positions (attention, RoPE, conv, DeltaNet) per
 * session. The sessions may sit at different positions but must run the same model (the same
 * slm_model), context size, K and V cache types and kernel tier, each at most once; sessions[0]
 * holds the batch's activation memory. logits may be NULL, else it receives n pointers (logits[i]: n_vocab
 * floats, borrowed until the next call on sessions[i]). Thread-safety: no other call may run on
 * any of the sessions meanwhile. On failure (a refused batch, a token id out of range or a full
 * context in any session, the abort callback of any session, out of memory) no session changes,
 * the message goes to err (optional, err_cap bytes) and to every session's errmsg, and logits[i]
 * are NULL. */
SLM_API slm_status slm_session_decode_batch(slm_session *const *sessions, const int32_t *tokens, size_t n,
                                            const float **logits, char *err, size_t err_cap);
/* Embeddings: feeds tokens[0, n) at the current position exactly as prefill does (states, history
 * and checkpoints advance; logits are unavailable until the next prefill or decode) but runs the
 * Program's "embed" function, whose output is the hidden state of every token after the final norm
 * (what the LM head would read). Those n vectors of slm_model_n_embd floats are pooled (pooling;
 * SLM_POOLING_MODEL: the model's) and, with normalize, scaled to unit L2 norm (a zero vector stays
 * zero). out receives n_embd floats, or n * n_embd (token-major) for SLM_POOLING_NONE; cap is its
 * size in floats and *n_out (optional) the floats written. The pooling sees only these n tokens,
 * but their hidden states see the whole history: to embed a text on its own, call it at position 0
 * (slm_session_reset). Needs a session created with slm_session_params.embeddings
 * (SLM_ERR_UNSUPPORTED otherwise). n = 0, ids out of range, n beyond the remaining context, a
 * pooling that is none of NONE/MEAN/CLS/LAST (the model's RANK included) or cap too small fail with
 * the session unchanged; so does a failure during the pass. */
SLM_API slm_status slm_session_embed(slm_session *s, const int32_t *tokens, size_t n, slm_pooling pooling,
                                     bool normalize, float *out, size_t cap, size_t *n_out);
/* Number of tokens processed so far (the position of the next token). */
SLM_API int32_t slm_session_pos(const slm_session *s);
SLM_API int32_t slm_session_n_ctx(const slm_session *s);
SLM_API const slm_model *slm_session_model(const slm_session *s);
/* The CPU kernels the session runs: "ref", "generic", "neon", "i8mm", "avx2", "avxvnni", "avx512" or "amx" (the
 * tier chosen from the CPU and slm_session_params.kernels when the session was created). Static
 * storage. */
SLM_API const char *slm_session_kernels(const slm_session *s);
/* Tokens processed so far (borrowed until the next call on s). */
SLM_API const int32_t *slm_session_history(const slm_session *s, size_t *n);
/* Forgets everything: position 0, states zeroed, checkpoints dropped. */
SLM_API void slm_session_reset(slm_session *s);

/* Rolls the session back to position pos in [0, slm_session_pos]: KV states truncate; conv and
 * recurrent states are restored from the nearest checkpoint at or before pos and the tokens in
 * between are replayed from the history, bit-exactly. Logits are unavailable until the next call.
 * On failure (out of memory, abort during the replay) the session is exactly as it was. */
SLM_API slm_status slm_session_rollback(slm_session *s, int32_t pos);
/* Prefix reuse: makes the session's history equal tokens[0, n) computing as little as possible —
 * it finds the longest common prefix with the history, rolls back to it (to n - 1 when tokens is
 * the whole history, so logits exist) and prefills the rest. *logits as for prefill; *n_reused
 * (optional) receives the number of tokens not recomputed. On failure the session's state is as it
 * was (checkpoints beyond the common prefix may have been dropped). */
SLM_API slm_status slm_session_sync(slm_session *s, const int32_t *tokens, size_t n, const float **logits,
                                    size_t *n_reused);

/* Speculative decoding. Verify feeds k proposed tokens in one pass (one Program call when k fits
 * the program's largest call, else as few as it allows) and sets *logits to k rows of n_vocab
 * floats, row i the logits after tokens[i] — bit-identical to decoding the tokens one by one;
 * borrowed until the next call on s. The session then stands at pos + k, and the next call may be
 * slm_session_accept. Bad ids, k = 0 or k beyond the remaining context fail with the session
 * unchanged; so does a failure during the pass. */
SLM_API slm_status slm_session_verify(slm_session *s, const int32_t *tokens, size_t k, const float **logits);
/* Keeps the first n_keep of the k tokens of the verify that was the last call on s: the session
 * is then exactly as if only those had been decoded one by one (KV rows past them dropped; conv
 * and recurrent states rebuilt from the states before the verify and the verify's own inputs,
 * without another pass over the weights, by the plan's accept steps (slm_plan_accept_step_at) — a
 * verify split into several calls, or a plan whose accept replays, replays the kept tokens
 * instead; the slm_spec driver counts those in slm_spec_stats.n_replays), and *logits (borrowed
 * until the next call; NULL when n_keep = 0 and the session had no logits before the verify) are
 * those after the last kept token. Fails with SLM_ERR_STATE when the last call was not a verify,
 * SLM_ERR_RANGE when n_keep > k; on any failure the session is as it was (and the verify may
 * still be accepted, unless a backend failed while rebuilding a state: then it keeps all k). */
SLM_API slm_status slm_session_accept(slm_session *s, size_t n_keep, const float **logits);

/* Prompt-lookup drafter: the continuation (at most n_max tokens, into draft) of the earlier
 * occurrence whose preceding tokens agree longest with the end of history[0, n_history) (matches
 * of 32 tokens or more count as equal; the most recent among equals). Returns the number of
 * tokens drafted, 0 when the last token occurs nowhere earlier. */
SLM_API size_t slm_draft_lookup(const int32_t *history, size_t n_history, int32_t *draft, size_t n_max);
/* A drafter: proposes at most n_max tokens that follow history[0, n_history) into draft; returns
 * how many. */
typedef size_t (*slm_draft_fn)(void *user_data, const int32_t *history, size_t n_history, int32_t *draft,
                               size_t n_max);

/* Speculative decoding driver over a target session, several tokens per weight pass when the
 * drafts are right. Greedy (no sampler): each step emits the tokens plain greedy decoding (argmax,
 * lowest id on ties) would. With a sampler: the standard speculative sampling rule — a draft token
 * x is kept with probability min(1, p(x)/q(x)) (p: the sampler's distribution over the target's
 * logits, q: over the draft model's, or a point mass for prompt lookup and drafters), the first
 * rejected one is replaced by a draw from norm(max(0, p - q)) — so the output has the
 * distribution of plain sampling with that sampler. Draft length adapts to the acceptance rate
 * unless fixed. With prompt lookup (no draft model, no draft_fn) it is the k that maximises
 * (1 + expected accepted tokens) / (cost of a pass of 1 + k tokens in decode steps), the
 * acceptance estimated per match length from the verify results so far and the costs measured
 * from the driver's own passes when greedy (1 + verify_cost * k until measured; always with a
 * sampler, so that a seeded run repeats): long drafts where the output
 * copies the context, none where drafting does not pay (docs/architecture.md, "Prompt lookup"). */
typedef struct slm_spec slm_spec;
typedef struct slm_spec_params {
    size_t size;             /* sizeof(slm_spec_params) */
    int32_t draft_max;       /* most tokens drafted per step, 1..64; 0 = the default, 8 */
    bool fixed;              /* always draft draft_max tokens (no adaptation) */
    slm_session *draft;      /* draft model session (same tokenizer as the target), or NULL */
    slm_draft_fn draft_fn;   /* drafter used when draft is NULL; NULL = slm_draft_lookup */
    void *draft_user_data;
    struct slm_sampler *sampler; /* speculative sampling with this sampler (borrowed), NULL = greedy */
    float verify_cost;       /* prompt lookup: a verify of 1 + k tokens is taken to cost 1 + verify_cost * k
                                decode steps until timed (greedy) or always (sampling), (0, 100];
                                0 = the default, 0.3 */
    /* Draft with the target model's own multi-token-prediction block (Qwen3.5; greedy drafts,
     * llama.cpp's draft-mtp): the target session must have been created with
     * slm_session_params.mtp; draft and draft_fn must be NULL. */
    bool mtp;
} slm_spec_params;
typedef struct slm_spec_stats {
    uint64_t n_steps;        /* verify passes */
    uint64_t n_drafted;      /* tokens proposed */
    uint64_t n_accepted;     /* proposed tokens the target agreed with */
    int32_t draft_len;       /* current draft length (prompt lookup: that of the last step) */
    uint64_t n_replays;      /* steps whose accept replayed the kept tokens instead of rebuilding the
                                states (statelm plan says why: "accept" of the plan) */
} slm_spec_stats;
SLM_API slm_spec_params slm_spec_params_default(void);
/* Creates a driver for target (and params->draft): both are borrowed and must outlive it; the
 * driver owns their positions from here on (the draft session is reset and follows the target's
 * history). Refused with SLM_ERR_INVALID_ARG and a message when the draft model's tokenizer
 * differs from the target's (vocabulary size or any token's text). */
SLM_API slm_status slm_spec_create(slm_session *target, const slm_spec_params *params, slm_spec **out, char *err,
                                   size_t err_cap);
SLM_API void slm_spec_destroy(slm_spec *sp);
/* One step: the target must hold logits (after prefill, decode, accept or a step). Writes 1 to
 * n_max tokens to tokens (*n_tokens of them): the token after the target's history (greedy, or
 * sampled — or the replacement of the previous step's rejected draft), then the draft tokens the
 * target kept; the target then stands after all of them with their last logits. On failure
 * *n_tokens = 0, the target is as it was, the message is
 * slm_spec_errmsg. */
SLM_API slm_status slm_spec_step(slm_spec *sp, size_t n_max, int32_t *tokens, size_t *n_tokens);
SLM_API void slm_spec_get_stats(const slm_spec *sp, slm_spec_stats *stats);
/* The tokens the last step drafted (before verification; the first *n_accepted of them were kept)
 * into out[0, min(count, cap)); returns count (0 before any step or when nothing was drafted). */
SLM_API size_t slm_spec_last_draft(const slm_spec *sp, int32_t *out, size_t cap, size_t *n_accepted);
/* Message of the last failed step; borrowed until the next call on sp. */
SLM_API const char *slm_spec_errmsg(const slm_spec *sp);

typedef struct slm_checkpoint_stats {
    int32_t n_in_memory;   /* stored checkpoints (position 0 is implicit and not counted) */
    int32_t n_on_disk;
    uint64_t bytes_in_memory;
    uint64_t bytes_on_disk;
    uint64_t bytes_each;   /* size of one checkpoint: all conv and recurrent states */
} slm_checkpoint_stats;
SLM_API void slm_session_checkpoint_stats(const slm_session *s, slm_checkpoint_stats *stats);
/* Positions of the stored checkpoints, ascending (borrowed until the next call on s). */
SLM_API const int32_t *slm_session_checkpoints(const slm_session *s, size_t *n);

/* ---------------------------------------------------------------------------------------------
 * Snapshots: an immutable in-memory copy of a session's whole state (every state, the position and
 * the token history). Independent of the session it came from; may be restored or forked from any
 * thread, also concurrently. */
typedef struct slm_snapshot slm_snapshot;

SLM_API slm_status slm_session_snapshot(slm_session *s, slm_snapshot **out);
/* Replaces s's state with the snapshot's. Refused (SLM_ERR_STATE, session unchanged) when the
 * snapshot comes from another model, another context size or another K or V cache type (the
 * message names both sides' types). Checkpoints of s
 * beyond the common prefix of the two histories are dropped. */
SLM_API slm_status slm_session_restore(slm_session *s, const slm_snapshot *snap);
/* A new session on the snapshot's model, with its context size and K and V cache types, in the
 * snapshot's state. params may set threads and checkpoint options (n_ctx, kv_type, kv_type_k and
 * kv_type_v are taken from snap). */
SLM_API slm_status slm_session_fork(const slm_snapshot *snap, const slm_session_params *params, slm_session **out,
                                    char *err, size_t err_cap);
SLM_API void slm_snapshot_destroy(slm_snapshot *snap);
SLM_API int32_t slm_snapshot_pos(const slm_snapshot *snap);
SLM_API uint64_t slm_snapshot_bytes(const slm_snapshot *snap);

/* Saves the session to a file: magic, format version (2), model fingerprint, context size, the K
 * and the V cache's dtype,
 * per-state name, dtype, shape and data (KV states up to the position), position, token history and
 * a checksum. The file is written to a fresh temporary file beside path (path.XXXXXX), flushed and
 * renamed over path: readers and concurrent savers see the old file or one whole new one, never a
 * mix. On failure path is untouched and no temporary file is left. A new file has mode 0600 (it
 * holds the prompt's tokens); a replaced file keeps its mode. */
SLM_API slm_status slm_session_save(slm_session *s, const char *path);
/* Loads a file written by slm_session_save. A missing, truncated, damaged (checksum), foreign-model,
 * other-context, other-KV-type, bad-magic or unknown-version file is refused with SLM_ERR_STATE (or
 * SLM_ERR_IO) and a message naming the reason (for the KV types: both sides'); the session is then
 * exactly as it was. Version 1 files (no V dtype: V states of the K dtype) load too. */
SLM_API slm_status slm_session_load(slm_session *s, const char *path);

/* 16-byte fingerprint of the model: hash of the architecture, hyper-parameters and every tensor's
 * name, type and shape (not the weights' values). */
SLM_API void slm_model_fingerprint(const slm_model *model, uint8_t out[16]);
/* The session's states (names, shapes, bytes) as allocated. */
SLM_API int32_t slm_session_n_states(const slm_session *s);
SLM_API slm_status slm_session_state(const slm_session *s, int32_t i, slm_state_info *info);

/* ---------------------------------------------------------------------------------------------
 * Sampler: owns its RNG; reproducible for a given seed. */
typedef struct slm_sampler slm_sampler;

/* A bias added to one token's logit before everything else (-INFINITY bans the token). */
typedef struct slm_logit_bias {
    int32_t token;
    float bias;
} slm_logit_bias;

/* slm_sampler_params_default() gives temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * repeat_penalty 1, repeat_last_n 64, seed 0, no presence or frequency penalty and no logit bias:
 * what a struct zeroed whole (size 0) gets. With size set, a field at 0 means what its comment
 * says: temperature, top_k, min_p, the presence and frequency penalties and n_logit_bias take 0 as
 * a setting (greedy, off, off, off, off, none), the others as their default.
 * The order applied: logit biases, then the penalties over the distinct tokens of the last
 * repeat_last_n of the history (repeat: a positive logit divided by repeat_penalty, a negative one
 * multiplied; then minus count * frequency_penalty + presence_penalty, count being the token's
 * occurrences in that window, as llama.cpp and OpenAI define them), then greedy at temperature 0,
 * else temperature, top-k, top-p, min-p and a draw. */
typedef struct slm_sampler_params {
    size_t size;           /* sizeof(slm_sampler_params) */
    float temperature;     /* >= 0; 0 = greedy */
    int32_t top_k;         /* >= 0; 0 = off */
    float top_p;           /* (0, 1], 1 = off; 0 = the default, 0.95 (FLT_MIN keeps the most probable token only) */
    float min_p;           /* [0, 1]; 0 = off */
    float repeat_penalty;  /* > 0, 1 = off; 0 = the default, 1 */
    int32_t repeat_last_n; /* >= 1: window of past tokens the penalties look at; 0 = the default, 64 */
    uint64_t seed;         /* 0 = the default, 0 */
    float presence_penalty;           /* finite; 0 = off */
    float frequency_penalty;          /* finite; 0 = off */
    const slm_logit_bias *logit_bias; /* (n_logit_bias), copied by slm_sampler_create */
    int32_t n_logit_bias;             /* >= 0; 0 = none */
} slm_sampler_params;

SLM_API slm_sampler_params slm_sampler_params_default(void);
SLM_API slm_status slm_sampler_create(const slm_sampler_params *params, slm_sampler **out);
SLM_API void slm_sampler_destroy(slm_sampler *s);
/* Picks a token from logits[0, n_vocab). history/n_history are earlier tokens for the penalties
 * (may be NULL/0). SLM_ERR_RANGE when a logit bias names a token >= n_vocab or every token is
 * banned (-INFINITY). */
SLM_API slm_status slm_sampler_sample(slm_sampler *s, const float *logits, int32_t n_vocab, const int32_t *history,
                                      size_t n_history, int32_t *token);
/* The distribution slm_sampler_sample draws from for these logits and history: probs (n_vocab
 * floats, caller's) gets each id's probability, 0 outside the kept candidates (one-hot on the
 * greedy id at temperature 0). Draws nothing. */
SLM_API slm_status slm_sampler_probs(slm_sampler *s, const float *logits, int32_t n_vocab, const int32_t *history,
                                     size_t n_history, float *probs);
/* A uniform draw in [0, 1) from the sampler's generator (0 for NULL). */
SLM_API double slm_sampler_uniform(slm_sampler *s);
/* Draws an index in [0, n) with probability weights[i] / sum(weights) from the sampler's
 * generator. SLM_ERR_RANGE for a negative or non-finite weight or a zero sum. */
SLM_API slm_status slm_sampler_draw(slm_sampler *s, const float *weights, int32_t n, int32_t *token);

/* ---------------------------------------------------------------------------------------------
 * Constrained decoding (docs/grammar.md). A grammar is a compiled GBNF grammar (llama.cpp's
 * format) or JSON Schema; immutable, shareable across threads. A grammar vocabulary is the byte trie
 * of a tokenizer's tokens, built once per tokenizer and shared (immutable) by every constraint on
 * it. A constraint is one generation's position in a grammar: it gives the mask of tokens whose
 * bytes keep the output a prefix of some string of the grammar (end-of-generation tokens only where
 * the grammar may end) and advances by accepted tokens; one thread at a time. Constructors take an
 * optional caller buffer err/err_cap for the message; on failure *out is NULL.
 * Memory: a grammar allocates, while it is compiled and for its life, through the hooks of the
 * slm_grammar_params given to the _with constructors (the others, slm_json_schema_to_gbnf and
 * slm_tool_call_grammar use malloc/free); a JSON Schema document is parsed by cJSON, whose blocks go
 * through cJSON's own hooks (cJSON_InitHooks). A vocabulary allocates through its tokenizer's
 * allocator (its model's slm_model_params hooks, or slm_tokenizer_load's), and a constraint, with
 * its matcher tables and cached masks, through its vocabulary's. A refused allocation that a call
 * needs gives SLM_ERR_NOMEM and leaves the objects as they were (slm_constraint_mask: reset to the
 * start); a mask that cannot be cached is only not cached. */
typedef struct slm_grammar slm_grammar;
typedef struct slm_grammar_vocab slm_grammar_vocab;
typedef struct slm_constraint slm_constraint;

typedef struct slm_grammar_params {
    size_t size;           /* sizeof(slm_grammar_params) */
    slm_alloc_fn alloc_fn; /* optional; with free_fn: every allocation of the grammar */
    slm_free_fn free_fn;
    void *alloc_user_data;
    unsigned schema_flags; /* SLM_SCHEMA_* (JSON Schema constructors only) */
} slm_grammar_params;

SLM_API slm_grammar_params slm_grammar_params_default(void);

/* GBNF text[0, len) with start rule root (NULL = "root"). A bad grammar is refused with
 * SLM_ERR_FORMAT (SLM_ERR_RANGE past a size cap) and "grammar LINE:COL: what is wrong". */
SLM_API slm_status slm_grammar_create(const char *text, size_t len, const char *root, slm_grammar **out, char *err,
                                      size_t err_cap);
/* As slm_grammar_create, allocating through params' hooks (params NULL = defaults). */
SLM_API slm_status slm_grammar_create_with(const char *text, size_t len, const char *root,
                                           const slm_grammar_params *params, slm_grammar **out, char *err,
                                           size_t err_cap);
/* A JSON Schema (JSON text[0, len)) converted to GBNF, then compiled. {"type": "object"} is
 * response_format json_object (any JSON object). Unsupported keywords are refused with
 * SLM_ERR_UNSUPPORTED naming the keyword and where it is (a JSON pointer); malformed schemas with
 * SLM_ERR_FORMAT. */
SLM_API slm_status slm_grammar_from_json_schema(const char *schema, size_t len, slm_grammar **out, char *err,
                                                size_t err_cap);
/* As slm_grammar_from_json_schema, with flags: SLM_SCHEMA_STRICT also refuses keywords outside the
 * JSON Schema vocabulary (drafts 4 to 2020-12), which are otherwise ignored as annotations. */
#define SLM_SCHEMA_STRICT 1u
SLM_API slm_status slm_grammar_from_json_schema_ex(const char *schema, size_t len, unsigned flags, slm_grammar **out,
                                                   char *err, size_t err_cap);
/* As slm_grammar_from_json_schema with params' flags (schema_flags), allocating through its hooks. */
SLM_API slm_status slm_grammar_from_json_schema_with(const char *schema, size_t len, const slm_grammar_params *params,
                                                     slm_grammar **out, char *err, size_t err_cap);
/* The GBNF that slm_grammar_from_json_schema compiles, into buf (NUL-terminated when it fits);
 * *n_out receives the length without the NUL; SLM_ERR_RANGE when cap <= that length. */
SLM_API slm_status slm_json_schema_to_gbnf(const char *schema, size_t len, char *buf, size_t cap, size_t *n_out,
                                           char *err, size_t err_cap);
SLM_API void slm_grammar_destroy(slm_grammar *g);
/* The grammar of one tool call in template_name's format (docs/serve.md "Tools"): of the tool
 * named name (NULL: any of tools_json, an OpenAI "tools" array), its arguments valid for the tool's
 * "parameters" JSON Schema. SLM_ERR_UNSUPPORTED for a template without a call format ("gemma"), for
 * schema keywords the converter refuses and (lfm2) property names that are not Python identifiers;
 * SLM_ERR_INVALID_ARG for bad tools or an unknown name; the reason in err. */
SLM_API slm_status slm_tool_call_grammar(const char *template_name, const char *tools_json, const char *name,
                                         slm_grammar **out, char *err, size_t err_cap);

/* Tokens in the trie: every token with non-empty bytes (a text token's bytes never hold 0xFF);
 * control, unknown and unused tokens under a mark that only a grammar's token reference matches
 * (docs/grammar.md "Token references"); end-of-generation tokens (slm_tokenizer_is_eog) are handled
 * apart. The tokenizer must outlive the vocabulary. */
SLM_API slm_status slm_grammar_vocab_create(const slm_tokenizer *tok, slm_grammar_vocab **out);
SLM_API void slm_grammar_vocab_destroy(slm_grammar_vocab *v);

/* g and v are borrowed and must outlive the constraint. The constraint starts at the beginning. */
SLM_API slm_status slm_constraint_create(const slm_grammar *g, const slm_grammar_vocab *v, slm_constraint **out);
SLM_API void slm_constraint_destroy(slm_constraint *c);
/* Writes the allowed tokens as bits: token i is allowed when mask[i / 32] >> (i % 32) & 1, for i in
 * [0, n_vocab) (ids past the tokenizer's vocabulary are never allowed). SLM_ERR_NOMEM when the
 * matcher's tables could not grow (the constraint is then reset to its start). */
SLM_API slm_status slm_constraint_mask(slm_constraint *c, uint32_t *mask, int32_t n_vocab);
/* Advances by token: SLM_ERR_INVALID_ARG (state unchanged, message on c) when the mask would not
 * allow it. An end-of-generation token is accepted only where the grammar may end. */
SLM_API slm_status slm_constraint_accept(slm_constraint *c, int32_t token);
/* True when the grammar may end here; slm_constraint_done: nothing but the end may follow. */
SLM_API bool slm_constraint_can_end(const slm_constraint *c);
SLM_API bool slm_constraint_done(const slm_constraint *c);
/* Back to the beginning (the caches of masks seen so far are kept). */
SLM_API void slm_constraint_reset(slm_constraint *c);
/* Last error message on c (borrowed until the next call on c). */
SLM_API const char *slm_constraint_errmsg(const slm_constraint *c);
/* Cache statistics: masks computed by walking the trie, masks served from the cache. */
SLM_API void slm_constraint_stats(const slm_constraint *c, uint64_t *n_walked, uint64_t *n_cached);
/* Attaches c to the sampler (borrowed; NULL detaches): slm_sampler_sample and slm_sampler_probs
 * then draw only among the tokens c allows (SLM_ERR_STATE when it allows none). The sampler does
 * not advance c: call slm_constraint_accept with each token kept. */
SLM_API slm_status slm_sampler_set_constraint(slm_sampler *s, slm_constraint *c);

/* ---------------------------------------------------------------------------------------------
 * Compute plans: a model's Program compiled for a target (docs/architecture.md compile/). Creating a plan
 * checks the Program against the target's rules (findings, before anything is rewritten),
 * legalises it (rewrites, each recorded), places every node on a device (a reason for every node
 * off the target's device) and estimates bytes moved and FLOPs per node. Targets: "cpu", "cuda",
 * "ane" (rules from the field reports; not executable here: simulate it on the CPU).
 * Shapes are in ggml order (ne[0] innermost). A plan borrows its model: destroy the plan first.
 * One thread at a time per plan; every string a plan returns is borrowed until the plan is
 * destroyed (or, for errmsg, until the next call on it). */
typedef struct slm_plan slm_plan;

typedef struct slm_plan_params {
    size_t size;          /* sizeof(slm_plan_params) */
    const char *target;   /* NULL = "cpu" */
    int32_t n_ctx;        /* 0 = slm_model_n_ctx_default */
    slm_kv_type kv_type;  /* K and V states: SLM_KV_DEFAULT (0) = SLM_KV_F16; kv_type_k/_v override */
    int32_t n_prefill;    /* tokens of the prefill call the cost estimates assume; 0 = min(128, n_ctx) */
    const char *kernels;  /* CPU kernel tier the plan is for, as slm_session_params.kernels */
    bool embeddings;      /* also the "embed" function, as slm_session_params.embeddings */
    uint8_t reserved[7];  /* unused: keeps the fields below past the end of the struct before them */
    slm_kv_type kv_type_k; /* the K states' type; SLM_KV_DEFAULT (0) = kv_type's */
    slm_kv_type kv_type_v; /* the V states' type; SLM_KV_DEFAULT (0) = kv_type's */
} slm_plan_params;

SLM_API slm_plan_params slm_plan_params_default(void);
/* Number of targets and their names ("cpu", "cuda", "ane"); NULL out of range. Static storage. */
SLM_API int32_t slm_n_targets(void);
SLM_API const char *slm_target_name(int32_t i);

/* Builds the plan of model for params->target. Unknown target: SLM_ERR_INVALID_ARG naming the
 * known ones. On failure *out is NULL and err holds a message. */
SLM_API slm_status slm_plan_create(const slm_model *model, const slm_plan_params *params, slm_plan **out, char *err,
                                   size_t err_cap);
SLM_API void slm_plan_destroy(slm_plan *plan);
SLM_API const char *slm_plan_errmsg(const slm_plan *plan);
SLM_API const char *slm_plan_target(const slm_plan *plan);
/* The target's preferred device ("cpu", "cuda", "ane") and the device nodes fall back to. */
SLM_API const char *slm_plan_device(const slm_plan *plan);
SLM_API const char *slm_plan_fallback_device(const slm_plan *plan);
SLM_API bool slm_plan_executable(const slm_plan *plan);
SLM_API int32_t slm_plan_n_ctx(const slm_plan *plan);

/* What a target does with a node or state that breaks a rule. */
typedef enum slm_plan_effect {
    SLM_PLAN_OK = 0,
    SLM_PLAN_FALLBACK = 1, /* runs on another device (on the real target: silently) */
    SLM_PLAN_REJECT = 2    /* compilation for the target fails */
} slm_plan_effect;
SLM_API const char *slm_plan_effect_name(slm_plan_effect effect); /* "ok", "fallback", "reject" */

/* One broken rule, found before legalisation, on a node (function != NULL) or a state. */
typedef struct slm_plan_finding {
    const char *rule;       /* e.g. "ane.write.full_extent", "op.fallback" */
    const char *rule_text;  /* the rule in words */
    const char *source;     /* where the rule is known from */
    slm_plan_effect effect;
    const char *function;   /* "prefill", "decode"; NULL for state findings */
    int32_t node;           /* position in the function; -1 for state findings */
    int32_t layer;          /* -1 if none */
    const char *op;         /* "STATE_WRITE", ... */
    const char *state;      /* NULL when not about a state */
    const char *detail;     /* what exactly breaks it */
    const char *fix;        /* the rewrite statelm applies ("none: ..." when there is none) */
    bool fixed;             /* the legalised program keeps the rule */
} slm_plan_finding;
SLM_API int32_t slm_plan_n_findings(const slm_plan *plan);
SLM_API slm_status slm_plan_finding_at(const slm_plan *plan, int32_t i, slm_plan_finding *out);
/* Findings on the legalised program (rules it still breaks, nodes it still runs elsewhere). */
SLM_API int32_t slm_plan_n_residual(const slm_plan *plan);
SLM_API slm_status slm_plan_residual_at(const slm_plan *plan, int32_t i, slm_plan_finding *out);

/* One rewrite legalisation applied, in order. */
typedef struct slm_plan_rewrite {
    const char *pass;       /* "cast", "align", "merge", "static_window", "pad" */
    const char *function;   /* NULL for state-level rewrites */
    const char *state;
    const char *detail;
    const char *warning;    /* "" unless the rewrite changes numbers (precision) */
} slm_plan_rewrite;
SLM_API int32_t slm_plan_n_rewrites(const slm_plan *plan);
SLM_API slm_status slm_plan_rewrite_at(const slm_plan *plan, int32_t i, slm_plan_rewrite *out);

/* The compute plan of the legalised program, per function: the nodes a session executes, in
 * order (a session of this plan runs exactly these; a fused node stands for several IR nodes). */
SLM_API int32_t slm_plan_n_functions(const slm_plan *plan);
SLM_API const char *slm_plan_function_name(const slm_plan *plan, int32_t fn);
/* Tokens per call the costs of fn assume (prefill: n_prefill; decode: 1). */
SLM_API int32_t slm_plan_function_tokens(const slm_plan *plan, int32_t fn);
/* Bytes of the activation arena of a call of fn over slm_plan_function_tokens tokens. */
SLM_API uint64_t slm_plan_function_arena_bytes(const slm_plan *plan, int32_t fn);
/* The kernel tier the plan was compiled for ("avx2", "ref", ...; "" for a target not run here). */
SLM_API const char *slm_plan_kernels(const slm_plan *plan);
SLM_API int32_t slm_plan_n_nodes(const slm_plan *plan, int32_t fn);
typedef struct slm_plan_node {
    const char *op;         /* IR op, or "MATMUL_GROUP" / "CONV_STEP" for a fused node */
    const char *name;       /* output tensor name of its first IR node, e.g. "blk.3.q" */
    int32_t layer;
    const char *shapes;     /* "(1024, n) <- (1024, 3072), (1024, n)": output(s) <- inputs, ggml order
                             * (a fused node: its first IR node's) */
    const char *dtype;      /* weight dtype (EMBED, MATMUL), state dtype (state ops), else "f32" */
    const char *device;
    const char *reason;     /* "" on the target's device */
    double bytes;           /* estimated bytes moved per call: weights + activations + state */
    double flops;
    double cost_share;      /* of the function's estimated cost, in [0, 1] */
    const char *pass;       /* the fusion pass that made it ("direct_write", "conv_step",
                             * "matmul_group"), NULL for a plain node */
    int32_t n_ir_nodes;     /* IR nodes it runs: positions in the function of the legalised program */
    const int32_t *ir_nodes;
    const char *kernel;     /* what the backend runs ("avx2 q4_0 x 8-bit activations, 16-row tiles",
                             * "view"); "" when the plan was not compiled for a backend */
    const char *output;     /* where its output lives: "arena", "state" (the back buffer of
                             * output_state), "view", "none" */
    const char *output_state;
    int64_t arena_offset;   /* byte offset of its output in the arena of a call over
                             * slm_plan_function_tokens tokens, -1 when not in the arena */
    double measured_us;     /* median microseconds per call (slm_plan_profile), -1 when not measured */
    double measured_share;  /* of the function's measured time, -1 when not measured */
    bool batched;           /* slm_session_decode_batch runs it once over one column per session (a
                             * column-local node on no state and no position); else once per session */
} slm_plan_node;
SLM_API slm_status slm_plan_node_at(const slm_plan *plan, int32_t fn, int32_t i, slm_plan_node *out);
/* Totals of fn on one device; i in [0, slm_plan_n_devices(plan, fn)). */
typedef struct slm_plan_device_total {
    const char *device;
    int32_t n_nodes;
    double bytes, flops;
    double cost_share;
} slm_plan_device_total;
SLM_API int32_t slm_plan_n_devices(const slm_plan *plan, int32_t fn);
SLM_API slm_status slm_plan_device_total_at(const slm_plan *plan, int32_t fn, int32_t i, slm_plan_device_total *out);

/* The states of the legalised program and every write into them. */
typedef struct slm_plan_state {
    const char *name;
    slm_state_role role;
    int32_t layer;
    int32_t n_dims;
    int64_t ne[4];          /* logical shape (as the model declares it) */
    int64_t alloc_ne[4];    /* allocated shape (after alignment and padding) */
    slm_dtype dtype;        /* after legalisation */
    slm_dtype orig_dtype;
    uint64_t size_bytes;    /* allocated bytes of one buffer */
    int32_t n_writes;
    int32_t n_buffers;      /* 2 for double-buffered (conv, recurrent) states, else 1 */
} slm_plan_state;
SLM_API int32_t slm_plan_n_states(const slm_plan *plan);
SLM_API slm_status slm_plan_state_at(const slm_plan *plan, int32_t i, slm_plan_state *out);
typedef struct slm_plan_write {
    const char *function;
    int32_t node;           /* position in the function */
    const char *window;     /* "[0,512) x [0,4096)": begin/end per axis, ggml order */
    const char *rules;      /* the target's write rules it satisfies, e.g. "ane.write.full_extent, ..." */
} slm_plan_write;
SLM_API slm_status slm_plan_state_write_at(const slm_plan *plan, int32_t state, int32_t k, slm_plan_write *out);

/* The accept plan: how slm_session_accept, keeping n of the k tokens of a verify that ran as one
 * call of the "verify" function, brings each conv and recurrent state to its value after the n
 * tokens — one step per such state, run in this order by the session's executor, from the states
 * before the verify and the verify's own activations, without another pass over the weights — or
 * why it replays the kept tokens instead (a "replay" step: then every state replays). A verify
 * of more than slm_plan_max_call_tokens tokens (when not 0) takes several calls and replays too.
 * KV states need no step. Replays are counted (slm_spec_stats.n_replays). */
typedef struct slm_plan_accept_step {
    const char *state;
    const char *how;        /* "conv_window": the last K - 1 columns of (state before ++ x[:, :n]);
                             * "recurrence": the node re-run over the n kept columns of its inputs;
                             * "replay": not rebuilt */
    int32_t node;           /* position in the verify function of the node whose operands it reads, -1 for "replay" */
    const char *detail;     /* what it computes (and the kernel), or why the state replays */
} slm_plan_accept_step;
SLM_API int32_t slm_plan_n_accept_steps(const slm_plan *plan);
SLM_API slm_status slm_plan_accept_step_at(const slm_plan *plan, int32_t i, slm_plan_accept_step *out);
/* Most tokens one Program call takes (sliding-window KV rings), 0 = any. */
SLM_API int32_t slm_plan_max_call_tokens(const slm_plan *plan);

/* Simulates the plan on the CPU: the original and the legalised program each prefill prompt and
 * then generate n_steps greedy tokens (each fed back); compares token by token. *identical is true
 * when all match; else *first_diff is the first differing step (also when identical: -1).
 * n_threads 0 = the model's default. Needs n_prompt + n_steps <= n_ctx. */
SLM_API slm_status slm_plan_simulate(slm_plan *plan, const int32_t *prompt, size_t n_prompt, int32_t n_steps,
                                     int32_t n_threads, bool *identical, int32_t *first_diff);
/* After slm_plan_simulate for a target whose device computes below f32 (ane: f16), the third run:
 * the legalised program at the device's precision (every activation rounded to *compute_dtype after
 * the node producing it, every weight rounded to f16), fed the original's greedy tokens and compared
 * with the original over *n_steps steps: *max_abs_logit_diff is the largest logit difference,
 * *n_agree the steps whose greedy token matched. Outputs may be NULL. SLM_ERR_INVALID_ARG (outputs
 * zeroed) when the last simulation made no such run (f32 targets, or none simulated). */
SLM_API slm_status slm_plan_simulation_device(const slm_plan *plan, slm_dtype *compute_dtype,
                                              double *max_abs_logit_diff, int32_t *n_agree, int32_t *n_steps);

/* Runs the plan on this machine and measures every node (the target must be executable here):
 * a warm-up call of each function (it prepares the weights), then `reps` prefills of prompt from
 * position 0 (n_prompt >= 2) and n_decode greedy decode steps after the last one. Each node gets
 * the median of its times per call (slm_plan_node.measured_us) and its share of the function's
 * measured time; slm_plan_json then carries them. Needs n_prompt + n_decode + 1 <= n_ctx.
 * n_threads 0 = the model's default. A failed call leaves the plan's measurements as they were. */
SLM_API slm_status slm_plan_profile(slm_plan *plan, const int32_t *prompt, size_t n_prompt, int32_t n_decode,
                                    int32_t reps, int32_t n_threads);
/* Median wall microseconds per call of fn over the profile (kernels plus the executor between
 * them), -1 when not measured. */
SLM_API double slm_plan_function_measured_us(const slm_plan *plan, int32_t fn);

/* Creates a session that executes plan (compiled for model, on a target executable here). The
 * session keeps its own copy of what it runs; plan may be destroyed after. Refused with
 * SLM_ERR_INVALID_ARG (nothing created) when the plan was compiled for another model (by
 * fingerprint), when params name an n_ctx, KV types or kernels other than the plan's (0,
 * SLM_KV_DEFAULT and NULL name none: the plan's are taken; once kv_type, kv_type_k or kv_type_v
 * names a type, the K and V types they give, DEFAULT read as f16, must both be the plan's), or for a target not executable here
 * (SLM_ERR_UNSUPPORTED). params may be NULL. */
SLM_API slm_status slm_session_create_from_plan(const slm_model *model, const slm_plan *plan,
                                                const slm_session_params *params, slm_session **out, char *err,
                                                size_t err_cap);

/* The whole plan as JSON (src/compile/plan.schema.json describes it); check_only limits it to
 * the check (target, findings, clean). *out is NUL-terminated; caller frees with slm_free. */
SLM_API slm_status slm_plan_json(const slm_plan *plan, bool check_only, char **out);

/* ---- export ---------------------------------------------------------------------------------
 * Writes the legalised program of a plan for target "ane" as a Core ML package (src/export/
 * coreml.c): an ML Program for iOS 18 / macOS 15 (specification version 9) with two functions
 * sharing weights and states, "prefill" over the plan's n_prefill tokens and "decode" over one
 * (the default), every state of the plan as an f16 state input at its allocated shape. */
typedef struct slm_export_params {
    size_t size;             /* sizeof(slm_export_params) */
    const char *format;      /* "coreml" (default) */
    slm_dtype weights;       /* SLM_DTYPE_F16 (default), SLM_DTYPE_Q8_0 (int8) or SLM_DTYPE_Q4_0 (int4):
                              * 2-D weights in blocks of 32 (constexpr_blockwise_shift_scale); 0 (the
                              * id of f32, which export does not offer) = the default, f16 */
    const char *report_path; /* NULL, or where to write the export's compute plan as JSON (per MIL op:
                              * ANE-eligible or why not; states; op histogram) */
    bool dry_run;            /* check and lower everything, write nothing (statelm export --check-only) */
} slm_export_params;
SLM_API slm_export_params slm_export_params_default(void);
/* Whether this build can export to format (NULL = "coreml"); when not, *why (static storage, may
 * be NULL) says what the build lacked. */
SLM_API bool slm_export_available(const char *format, const char **why);
/* Exports plan to path (a folder, e.g. "model.mlpackage", that must not exist). The package is
 * written into a temporary folder beside path and renamed at the end: on failure nothing is left
 * behind and slm_plan_errmsg(plan) names the cause (a node with its op and rule when the program
 * holds something the target rejects or the exporter cannot express). SLM_ERR_UNSUPPORTED when
 * this build has no exporter (slm_export_available). */
SLM_API slm_status slm_plan_export(slm_plan *plan, const char *path, const slm_export_params *params);

/* ---- quantize -------------------------------------------------------------------------------
 * Writes a copy of a GGUF file with its weights quantised (src/convert/quantize.c, docs/quantize.md):
 * one tensor at a time, rows split over n_threads, with llama.cpp's reference rounding and, for the
 * mixes, llama-quantize's per-tensor rules (llama.cpp src/llama-quant.cpp llama_tensor_get_type). */
typedef struct slm_quantize_params {
    size_t size;                 /* sizeof(slm_quantize_params) */
    int32_t n_threads;           /* 0 = number of online CPUs */
    bool force;                  /* replace an existing output file */
    bool leave_output;           /* output.weight keeps its type (llama-quantize --leave-output-tensor) */
    bool pure;                   /* no mix rules: every quantisable tensor gets the type's base type */
    const char *token_embd_type; /* NULL, or a tensor type name ("q8_0", "f16") for token_embd.weight */
    const char *output_type;     /* NULL, or a tensor type name for output.weight */
    slm_log_fn log_fn;           /* optional: one SLM_LOG_INFO line per tensor */
    void *log_user_data;
    bool no_mtp;                 /* slm_convert: leave out a qwen35 checkpoint's MTP block (mtp.*), as
                                    convert_hf_to_gguf.py --no-mtp does; kept by default */
} slm_quantize_params;
SLM_API slm_quantize_params slm_quantize_params_default(void);
/* Quantises the GGUF at in_path to type (case-insensitive): "q4_0", "q4_1", "q5_0", "q5_1",
 * "q8_0", "f16", "bf16", "f32" (every quantisable tensor that type, except the mix's output and
 * embedding rules) or the mixes "q4_k_s", "q4_k_m" (= "q4_k"), "q5_k_s", "q5_k_m" (= "q5_k"),
 * "q6_k". The file appears at out_path whole or not at all (temporary file, fsync, rename); an
 * existing out_path is refused (SLM_ERR_INVALID_ARG) unless params->force. Sources of 2-D weights
 * must be F32, F16 or BF16 (or already the target type); quantised sources can only be
 * dequantised (type "f32", "f16", "bf16"). On failure err holds one line naming
 * the type, tensor, row or file at fault and nothing is left behind. params may be NULL. */
SLM_API slm_status slm_quantize(const char *in_path, const char *out_path, const char *type,
                                const slm_quantize_params *params, char *err, size_t err_cap);

/* ---- convert --------------------------------------------------------------------------------
 * Writes the GGUF that llama.cpp's convert_hf_to_gguf.py writes for a Hugging Face folder
 * (src/convert/hf.c, docs/convert.md): the folder is loaded as slm_model_load loads it; tensor
 * names, layouts, hyper-parameter keys, the tokenizer.ggml.* keys and the chat template follow the
 * converter. outtype (case-insensitive; NULL = "f16", the converter's default): "f32", "f16",
 * "bf16" (the converter's rules: 1-D tensors, norms and conv kernels stay F32), or any type of
 * slm_quantize, which writes the bytes slm_quantize would write from the f32 conversion, in the
 * same pass (params as for slm_quantize). Atomic output, --force and error reporting as
 * slm_quantize. slm_quantize given a folder calls this. */
SLM_API slm_status slm_convert(const char *hf_dir, const char *out_path, const char *outtype,
                               const slm_quantize_params *params, char *err, size_t err_cap);

#ifdef __cplusplus
}
#endif
#endif /* STATELM_H */
