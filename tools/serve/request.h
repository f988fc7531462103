/* request.h — one internal request type for every generating API of `statelm serve`, and the
 * three stages a body goes through before the engine sees it:
 *   map       one function per API (request.c: OpenAI chat and completions, llama.cpp's native
 *             /completion; messages.c: Anthropic Messages; responses.c: OpenAI Responses, whose
 *             previous_response_id is resolved against a stored record before validation): JSON
 *             -> sreq, checking only what the body alone can tell (types, ranges, shapes);
 *   validate  sreq_validate: what needs the server's limits and the model's vocabulary;
 *   render    render.c sreq_render: messages through the chat template, prompts through the
 *             tokenizer, the output constraint and tool grammar compiled -> sprompt.
 * No HTTP and no server state here: tests/unit/test_serve_requests.c drives all three without
 * sockets. Every error is a status (4xx/5xx), an error code and a message naming the field. */
#ifndef SLM_TOOLS_SERVE_REQUEST_H
#define SLM_TOOLS_SERVE_REQUEST_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve_tools.h"
#include "statelm.h"
#include "statelm_engine.h"

#define SREQ_MAX_N SLM_ENGINE_MAX_N
#define SREQ_MAX_STOPS SLM_ENGINE_MAX_STOPS
#define SREQ_MAX_TOP_LOGPROBS SLM_ENGINE_MAX_TOP_LOGPROBS
#define SREQ_MAX_JSON_DEPTH 32
#define SREQ_MAX_LOGIT_BIAS 1024

typedef enum serve_api {
    SAPI_CHAT,        /* POST /v1/chat/completions */
    SAPI_COMPLETIONS, /* POST /v1/completions */
    SAPI_COMPLETION,  /* POST /completion (llama.cpp's native shape) */
    SAPI_MESSAGES,    /* POST /v1/messages (Anthropic) */
    SAPI_RESPONSES,   /* POST /v1/responses (OpenAI Responses) */
} serve_api;

/* Whether an API's prompt is a list of messages rendered through the chat template. */
static inline bool serve_api_is_chat(serve_api a) { return a == SAPI_CHAT || a == SAPI_MESSAGES || a == SAPI_RESPONSES; }

typedef enum sreq_tool_mode { STOOL_AUTO, STOOL_NONE, STOOL_REQUIRED, STOOL_NAMED } sreq_tool_mode;

/* One message: roles are system, user, assistant, tool; content is text (text parts joined with
 * "\n", as llama-server joins them); tool_calls is an assistant's calls in OpenAI's JSON shape
 * [{"id","type":"function","function":{"name","arguments"}}] or NULL; tool_call_id the call a tool
 * message answers (or NULL); fields, a JSON object's text of the message's further members the
 * template sees (name, reasoning_content: slm_chat_tools.fields) or NULL; ids
 * (n_ids), when set, the ids the content was generated as (a stored Responses turn), which the
 * render uses for it. */
typedef struct sreq_msg {
    char *role, *content, *tool_calls, *tool_call_id, *fields;
    int32_t *ids;
    size_t n_ids;
} sreq_msg;

/* A logit bias on the tokens of a text (llama-server's logit_bias entries that are strings). */
typedef struct sreq_text_bias {
    char *text;
    float bias;
} sreq_text_bias;

/* A generating request, whatever API it came in. Owns every pointer (sreq_free). */
typedef struct sreq {
    serve_api api;
    /* prompt: messages (chat APIs) or text / token ids (completion APIs) */
    sreq_msg *msgs;
    size_t n_msgs;
    char *prompt_text;  /* completion APIs: the prompt as text, or NULL */
    int32_t *prompt_ids; /* completion APIs: the prompt as ids (n_prompt_ids), or NULL */
    size_t n_prompt_ids;
    /* sampling: the server's defaults overwritten by the fields given; logit_bias owned */
    slm_sampler_params sp;
    sreq_text_bias *bias_text; /* (n_bias_text) biases on the tokens of texts, resolved by render */
    int32_t n_bias_text;
    bool seed_given;
    int32_t n;          /* choices, 1..SREQ_MAX_N */
    int32_t max_tokens; /* 0: the server's limit */
    bool logprobs;
    int32_t top_logprobs;
    bool stream, include_usage, ignore_eos;
    bool verbose; /* llama-server's "verbose": a chat or completions answer also carries "__verbose", the
                   * answer in /completion's shape */
    bool no_gen_prompt; /* "add_generation_prompt": false (and no trailing assistant message): rendered without it */
    char *stops[SREQ_MAX_STOPS];
    int32_t n_stops;
    /* output constraint: at most one of grammar (GBNF), schema (JSON Schema text) */
    char *grammar, *schema;
    /* tools: OpenAI "tools" JSON array text (NULL: none), the choice, the named tool */
    char *tools;
    sreq_tool_mode tool_mode;
    char *tool_name;
    /* reasoning_format of this request: 0 the server's (--reasoning-format), 1 none (a <think> part
     * stays in the content), 2 deepseek (split into reasoning) */
    int32_t reasoning_format;
    /* thinking budget (thinking_budget_tokens, reasoning_budget_tokens, reasoning_budget,
     * reasoning_effort; Anthropic's thinking.budget_tokens; Responses' reasoning.effort): after
     * think_budget tokens inside the answer's think block the server writes the close tag */
    bool has_think_budget;
    int32_t think_budget;
    /* id_slot (llama-server's): the slot to run on */
    bool has_id_slot;
    int32_t id_slot;
    /* the chat template: the request's "chat_template" (Jinja text) and "chat_template_kwargs" (JSON
     * object text), NULL: the server's */
    char *chat_template, *chat_template_kwargs;
    /* llama.cpp's native /completion */
    bool cache_prompt;  /* accepted; statelm always reuses prefixes (--no-prefix-reuse turns it off) */
    bool return_tokens; /* "tokens" in the answer */
    char *response_fields; /* JSON array text of the answer's fields to keep ("a/b": nested), or NULL */
    /* OpenAI Responses */
    char *previous_id;     /* previous_response_id, or NULL */
    bool store;            /* keep the response (default true) */
    bool has_instructions; /* msgs[0] is the request's instructions (not part of the stored conversation) */
    size_t n_input_from;   /* msgs[n_input_from...] are this request's input (after a resolved history) */
    char *echo;            /* JSON object text of the request fields the response object repeats */
} sreq;

/* An error: HTTP status, error code (static; NULL: the status's own), message; for a context
 * overflow also the prompt's and the context's sizes (llama-server's n_prompt_tokens, n_ctx). */
typedef struct sreq_err {
    unsigned status;
    const char *code;
    char msg[512];
    int32_t n_prompt_tokens, n_ctx;
} sreq_err;

/* What validation needs of the server and model. */
typedef struct sreq_limits {
    int32_t max_tokens; /* --max-tokens */
    int32_t n_vocab;
} sreq_limits;

void sreq_free(sreq *r);
/* Sets e (status 400 unless given) and returns false; for one-line error returns. */
bool sreq_fail(sreq_err *e, unsigned status, const char *code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Parses body into a JSON object (nesting bounded by SREQ_MAX_JSON_DEPTH); NULL with e set. */
cJSON *sreq_parse_json(const char *body, size_t n_body, sreq_err *e);

/* The mappings: root -> *r (zeroed first; defaults: the server's sampling). false with e set;
 * r then holds what was read and is freed by sreq_free. */
bool sreq_from_chat(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e);
bool sreq_from_completions(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e);
bool sreq_from_completion(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e);
/* Anthropic Messages; for /v1/messages/count_tokens (counting) max_tokens may be absent. */
bool sreq_from_messages(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e);
bool sreq_from_messages_count(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e);
/* OpenAI Responses. Then, with previous_id set, sreq_responses_resolve with that response's stored
 * record (NULL: unknown id, 404); either way it checks that every function_call_output answers a
 * function_call of the assistant message before it. */
bool sreq_from_responses(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e);
bool sreq_responses_resolve(sreq *r, const char *record, sreq_err *e);

/* Whether the request continues its trailing assistant message (assistant prefill, as
 * llama-server: no generation prompt, the answer continues that text); one with tool calls is not. */
bool sreq_prefill(const sreq *r);
/* Checks r against the limits; false with e set. */
bool sreq_validate(const sreq *r, const sreq_limits *lim, sreq_err *e);

/* --- readers the mappings share (request.c) --- */
bool sreq_num(const cJSON *root, const char *name, double lo, double hi, bool integer, double *out, sreq_err *e);
bool sreq_read_sampling(const cJSON *root, sreq *r, sreq_err *e);
bool sreq_read_stops(const cJSON *f, const char *name, sreq *r, sreq_err *e);
bool sreq_read_bool(const cJSON *root, const char *name, bool *out, sreq_err *e);
/* "reasoning_format" (llama-server's per-request field): none, deepseek, auto (= deepseek). */
bool sreq_read_reasoning_format(const cJSON *root, sreq *r, sreq_err *e);
/* The thinking budget of a reasoning effort (none 0, minimal 128, low 1024, medium 4096; high,
 * xhigh: no budget); where names the field for the error ("'reasoning'.effort"). */
bool sreq_effort_budget(const char *effort, const char *where, sreq *r, sreq_err *e);
/* "thinking_budget_tokens" / "reasoning_budget_tokens" / "reasoning_budget" (-1: none),
 * "reasoning_effort", "id_slot" (-1: any). */
bool sreq_read_reasoning_control(const cJSON *root, sreq *r, sreq_err *e);
/* A content value (string, null, or a list of parts) as text; image parts refused by name.
 * where: "messages[3]" for messages. *out malloc'd ("" for null). */
bool sreq_read_content(const cJSON *c, const char *where, char **out, sreq_err *e);
/* Appends a message (content, tool_calls taken over, freed on failure). */
bool sreq_add_msg(sreq *r, const char *role, char *content, char *tool_calls, sreq_err *e);

/* --- render (render.c) --- */

/* ids a remembered completion was generated as, for an assistant message whose content is text
 * (true with *ids malloc'd); false when none. */
typedef bool (*sreq_ids_lookup_fn)(void *user, const char *text, size_t n, int32_t **ids, size_t *n_ids);

typedef struct sreq_model {
    const slm_model *m;
    const slm_tokenizer *tok;
    const char *tmpl;        /* a built-in template's name (--chat-template), or NULL: tmpl_text */
    const char *tmpl_text;   /* --chat-template-file's text, or NULL: the model's own template */
    const char *tmpl_kwargs; /* --chat-template-kwargs (JSON object text), or NULL */
    int32_t n_ctx, n_vocab;
    sreq_ids_lookup_fn lookup; /* NULL: none */
    void *lookup_user;
} sreq_model;

/* What the engine gets: the prompt's ids, the compiled constraint, the tool settings. */
typedef struct sprompt {
    int32_t *ids;
    size_t n_ids;
    slm_grammar *grammar;
    tool_req tools;
    bool prefill; /* a trailing assistant message is continued */
    const char *tool_fmt; /* the call format of the template that ran (slm_chat_tool_format; "none") */
    bool think_open;      /* the prompt ends inside an open think block: the answer opens as reasoning */
    /* thinking for the engine (tags "<think>", "</think>"; none with a grammar or a prefill):
     * think_in_prompt, and with the request's budget (think_budget >= 0) the close tag's ids */
    bool think_track, think_in_prompt;
    int32_t think_budget; /* -1: none */
    int32_t think_close_ids[SLM_ENGINE_MAX_THINK_CLOSE];
    int32_t n_think_close;
    slm_logit_bias *bias; /* (n_bias) the request's id biases and its text biases' tokens, when it has text biases */
    int32_t n_bias;
    /* (n_keep) control tokens whose text the answer keeps for the parsers: the reasoning tags, and
     * with tools the call format's markers (slm_tool_format_markers), those the vocabulary holds as
     * one control token */
    int32_t keep[SLM_ENGINE_MAX_KEEP];
    int32_t n_keep;
} sprompt;

bool sreq_render(const sreq *r, const sreq_model *mv, sprompt *out, sreq_err *e);
/* The chat messages rendered as text, as sreq_render would prefill them (llama-server's
 * /apply-template): *out malloc'd. */
bool sreq_render_text(const sreq *r, const sreq_model *mv, char **out, sreq_err *e);
void sprompt_free(sprompt *p);

#endif
