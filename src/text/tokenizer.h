/* tokenizer.h — internal constructors of slm_tokenizer (public API in statelm.h) and the chat
 * template renderer. A tokenizer is built from GGUF metadata (tokenizer.ggml.*) or from a Hugging
 * Face tokenizer.json (+ tokenizer_config.json for added-token flags and the chat template).
 * Byte-level BPE (gpt2-style, pre-tokenizer splits with PCRE2 UTF+UCP) and SentencePiece-style
 * BPE with byte fallback. The tokenizer is immutable after construction and thread-safe. */
#ifndef SLM_TEXT_TOKENIZER_H
#define SLM_TEXT_TOKENIZER_H

#include "base/alloc.h"
#include "base/err.h"
#include "format/gguf.h"
#include "format/hfconfig.h"

/* Builds the tokenizer described by g's tokenizer.ggml.* keys. SLM_ERR_NOT_FOUND (no message) when
 * the file carries no tokenizer; SLM_ERR_FORMAT/UNSUPPORTED with a message naming the key
 * otherwise. */
slm_status tok_from_gguf(const gguf_file *g, const slm_allocator *a, slm_tokenizer **out, slm_err *e);
/* Builds it from c->tokenizer_json_path (and c->tok_config). SLM_ERR_NOT_FOUND when the folder has
 * no tokenizer.json. */
slm_status tok_from_hf(const hf_config *c, const slm_allocator *a, slm_tokenizer **out, slm_err *e);
void tok_destroy(slm_tokenizer *t);
/* True for ids that never stand for text in output: control, unknown and unused tokens. */
bool tok_is_control(const slm_tokenizer *t, int32_t id);
/* The raw bytes of id (slm_tokenizer_token_bytes without the copy); borrowed from t. */
const char *tok_bytes(const slm_tokenizer *t, int32_t id);
/* The allocator t was built with (its model's, or slm_tokenizer_load's params); borrowed from t. */
const slm_allocator *tok_allocator(const slm_tokenizer *t);

/* Chat templates of the ChatML-style families. Names: "chatml", "smollm2", "qwen3",
 * "qwen3-nothink", "lfm2", "llama3", "gemma". chat_detect picks one from a stored Jinja template string
 * (NULL if none fits). tok (may be NULL) supplies the BOS text for "lfm2", "llama3" and "gemma".
 * "gemma" fails with SLM_ERR_INVALID_ARG when roles do not alternate user/other after an optional
 * system message (the Jinja template raises there). */
const char *chat_detect(const char *stored_template);
/* Renders messages with the named template. *out is allocated with a (caller frees with al_free). */
slm_status chat_render(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                       bool add_generation_prompt, const slm_allocator *a, char **out, slm_err *e);
/* A byte range of the rendered text written from message msg: its role or (part of) its content;
 * whole: the span is the message's whole content, unchanged. */
typedef struct chat_span {
    size_t off, len, msg;
    bool whole;
} chat_span;
/* chat_render that also returns the spans of message text, in order (*spans allocated with a). */
slm_status chat_render_spans(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                             bool add_generation_prompt, const slm_allocator *a, char **out, chat_span **spans,
                             size_t *n_spans, slm_err *e);
/* Tools of a rendering (text/toolcall.h, docs/serve.md): tools, the OpenAI "tools" array (NULL
 * or empty: none); calls (NULL, or n_msgs entries): each assistant message's "tool_calls" array or
 * NULL. Bad tools or calls fail with SLM_ERR_INVALID_ARG naming them; "gemma" refuses tools with
 * SLM_ERR_UNSUPPORTED. */
struct cJSON;
typedef struct chat_tools {
    const struct cJSON *tools;
    const struct cJSON *const *calls;
    const char *const *tool_call_ids; /* NULL, or n_msgs entries: a tool message's tool_call_id or NULL */
    const struct cJSON *const *fields; /* NULL, or n_msgs entries: NULL or an object of further message members */
} chat_tools;
slm_status chat_render_tools_spans(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs,
                                   size_t n_msgs, const chat_tools *tools, bool add_generation_prompt,
                                   const slm_allocator *a, char **out, chat_span **spans, size_t *n_spans, slm_err *e);
/* Renders and tokenises in one pass over the whole text: special/control token text is matched
 * only in the template's own text, message text is plain text (slm_chat_tokenize). content_ids
 * (n_msgs, or NULL): a message whose entry has ids and whose content the template writes whole and
 * unchanged encodes that content as those ids. *ids allocated with a. */
slm_status chat_tokenize(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                         const slm_chat_ids *content_ids, bool add_generation_prompt, const slm_allocator *a,
                         int32_t **ids, size_t *n_ids, slm_err *e);
slm_status chat_tokenize_tools(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                               const chat_tools *tools, const slm_chat_ids *content_ids, bool add_generation_prompt,
                               const slm_allocator *a, int32_t **ids, size_t *n_ids, slm_err *e);

/* What renders a chat: a built-in of chat.c (name) or, when name is NULL, the Jinja template src
 * (chat_jinja.c), with kwargs (a JSON object, or NULL: chat_template_kwargs, e.g.
 * {"enable_thinking": false}) merged into its context. */
struct jinja_template;
typedef struct chat_tmpl {
    const char *name, *src;
    const struct cJSON *kwargs;
    const struct jinja_template *parsed; /* src already parsed (text/jinja.h), or NULL */
    bool request;                        /* src came with a request: the JINJA_REQUEST_* limits */
} chat_tmpl;
/* Whether name is one of chat.c's built-ins. */
bool chat_is_builtin(const char *name);
/* Renders with the Jinja template src, or parsed when not NULL (chat_jinja.c); spans (may be NULL)
 * as chat_render_spans.
 * A bad template fails with SLM_ERR_FORMAT and line:column, a raise_exception with
 * SLM_ERR_INVALID_ARG and its message. */
slm_status chat_render_jinja(const char *src, const struct jinja_template *parsed, const struct cJSON *kwargs,
                             bool request, const slm_tokenizer *tok,
                             const slm_chat_message *msgs, size_t n_msgs, const chat_tools *tools, bool gen,
                             const slm_allocator *a, char **out, chat_span **spans, size_t *n_spans, slm_err *e);
slm_status chat_render_tmpl(const chat_tmpl *t, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                            const chat_tools *tools, bool add_generation_prompt, const slm_allocator *a, char **out,
                            chat_span **spans, size_t *n_spans, slm_err *e);
slm_status chat_tokenize_tmpl(const chat_tmpl *t, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                              const chat_tools *tools, const slm_chat_ids *content_ids, bool add_generation_prompt,
                              const slm_allocator *a, int32_t **ids, size_t *n_ids, slm_err *e);

#endif
