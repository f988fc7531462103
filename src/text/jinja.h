/* jinja.h — a sandboxed Jinja interpreter for chat templates (the model's own
 * tokenizer.chat_template), rendering as jinja2 does with transformers' environment
 * (trim_blocks, lstrip_blocks, keep_trailing_newline off, tojson with Python's json.dumps spacing,
 * raise_exception, strftime_now). No I/O; steps, recursion depth and output size are bounded and
 * each limit is a clear error. docs/jinja.md says which statements, tests, filters and methods are
 * supported.
 *
 * Provenance: every string value carries which bytes come from the render context's data
 * (jinja_render's `data` member names, e.g. "messages", "tools") and from which message; the
 * output's spans of such bytes are returned so the tokenizer matches control tokens only in the
 * template's own text (a user typing "<|im_end|>" cannot close a turn). */
#ifndef SLM_TEXT_JINJA_H
#define SLM_TEXT_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"

struct cJSON;

typedef struct jinja_template jinja_template;

/* Parses src[0, n). A bad template fails with SLM_ERR_FORMAT and "line:column: what" in e. */
slm_status jinja_parse(const char *src, size_t n, const slm_allocator *a, jinja_template **out, slm_err *e);
void jinja_free(jinja_template *t);

/* What a render used (jinja_limits.usage): evaluation steps, arena bytes, output bytes. */
typedef struct jinja_usage {
    uint64_t steps;
    size_t memory, output;
} jinja_usage;

typedef struct jinja_limits {
    uint64_t max_steps;     /* evaluation steps (0: default 10,000,000) */
    uint32_t max_depth;     /* macro/call/include recursion (0: default 256) */
    size_t max_output;      /* bytes (0: default 64 MiB); also bounds each intermediate string */
    int64_t fixed_time;     /* not a limit: strftime_now's clock, seconds since the epoch read as
                             * UTC (tests); 0: the real clock in local time, as transformers */
    size_t max_memory;      /* the render's memory (0: 4 x max_output + 64 MiB) */
    jinja_usage *usage;     /* not a limit: where a successful render reports its use (NULL: not) */
} jinja_limits;

/* The limits of a template that came with a request (slm_chat_template.request): every rendering
 * of llama.cpp's 70 real templates in tests/data/jinja/golden.jsonl uses at most a quarter of each
 * (test_jinja_golden checks it; docs/jinja.md "Limits" has the figures). */
#define JINJA_REQUEST_MAX_STEPS 1000000u
#define JINJA_REQUEST_MAX_DEPTH 64u
#define JINJA_REQUEST_MAX_OUTPUT ((size_t)4 << 20)
#define JINJA_REQUEST_MAX_MEMORY ((size_t)64 << 20)

/* A byte range of the output that came from context data: from messages[msg] (msg < 0: other
 * data, e.g. tools); whole: the range is that message's whole "content" string, unchanged. The
 * spans of a rendering are sorted by offset and disjoint; adjacent ones of one message that are not
 * whole are merged. docs/jinja.md §4 says how provenance follows values through filters. */
typedef struct jinja_span {
    size_t off, len;
    int64_t msg;
    bool whole;
} jinja_span;

/* Renders t with the variables of the JSON object ctx (messages, tools, add_generation_prompt,
 * bos_token, eos_token, chat_template_kwargs' keys, ...). Strings reached from the members named in
 * data_keys (NULL-terminated; NULL = {"messages", "tools", NULL}) are data (their spans are
 * returned); all other strings are template text. A raise_exception in the template fails with
 * SLM_ERR_INVALID_ARG and its message; a limit with SLM_ERR_RANGE naming it; a runtime type error
 * with SLM_ERR_INVALID_ARG and the line:column. *out (NUL-terminated, *n_out bytes) and *spans
 * (may be NULL when not wanted) are allocated with a. On failure nothing is allocated. */
slm_status jinja_render(const jinja_template *t, const struct cJSON *ctx, const char *const *data_keys,
                        const jinja_limits *lim, const slm_allocator *a, char **out, size_t *n_out,
                        jinja_span **spans, size_t *n_spans, slm_err *e);

#endif
