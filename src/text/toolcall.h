/* toolcall.h — tool calls in the chat formats (docs/serve.md "Tools"): the call format a template
 * implies (detected from its text), JSON printed as Jinja's tojson writes it (Python's json.dumps,
 * for tool renderings), checks of an OpenAI "tools" array, parsing a model's answer into calls,
 * content and reasoning, and the parts of a call that may be streamed while it is generated.
 *
 * Formats (names as tc_format_name gives them):
 *  - TC_HERMES "hermes" (Hermes, Qwen2.5, Qwen3, Granite 4, SmolLM3, the built-ins "chatml",
 *    "smollm2", "qwen3"): <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks;
 *  - TC_QWEN_XML "qwen-xml" (Qwen3.5, Qwen3-Coder, Nemotron 3): <tool_call><function=NAME>
 *    <parameter=ARG>value</parameter>...</function></tool_call>, a value typed by the tool's schema
 *    (a string parameter keeps the text, others read as JSON); the first <tool_call> may be missing;
 *  - TC_LFM2 "lfm2" (LFM2, LFM2.5): a Python-style list [f(a=1), g()] between <|tool_call_start|>
 *    and <|tool_call_end|> (control tokens, so the list may also come bare at the answer's start);
 *  - TC_LLAMA3 "llama3": the whole answer one JSON object {"name": ..., "parameters": {...}}
 *    (optionally after <|python_tag|>);
 *  - TC_MISTRAL "mistral" (Mistral Nemo): [TOOL_CALLS] then a JSON list of call objects (the list
 *    may come bare at the answer's start, the marker being a control token);
 *  - TC_MISTRAL_ARGS "mistral-args" (Mistral Small 3.2, Ministral 3, Devstral): per call
 *    [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...} ([CALL_ID] optional; bare NAME{...} as the whole answer);
 *  - TC_GRANITE "granite" (Granite 3.x): <|tool_call|> then a JSON list of call objects (bare list
 *    at the start too);
 *  - TC_HARMONY "gpt-oss": harmony messages <|channel|>C [to=functions.NAME] [<|constrain|>json]
 *    <|message|>BODY ended by <|end|>, <|call|>, <|return|> or the next <|start|>; a message to
 *    functions.NAME is a call with BODY its arguments, the analysis channel is reasoning, final
 *    and commentary are content;
 *  - TC_NONE: no calls (the whole answer is content). */
#ifndef SLM_TEXT_TOOLCALL_H
#define SLM_TEXT_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct cJSON;

typedef enum tc_format {
    TC_NONE = 0,
    TC_HERMES,
    TC_LFM2,
    TC_LLAMA3,
    TC_QWEN_XML,
    TC_MISTRAL,
    TC_MISTRAL_ARGS,
    TC_GRANITE,
    TC_HARMONY,
    TC_N_FORMATS
} tc_format;

/* The format of a built-in template name ("chatml", "qwen3", "lfm2", ...) or a format name (see
 * above); TC_NONE for NULL or an unknown name. */
tc_format tc_format_of(const char *name);
/* The format's name; NULL for TC_NONE. */
const char *tc_format_name(tc_format f);
/* The call format a Jinja chat template implies, from the markers its text writes (not from a
 * family name): TC_NONE when it renders no tool calls, or src is NULL. */
tc_format tc_format_detect(const char *template_src);
/* The think tags of f's reasoning: "<think>"/"</think>", "[THINK]"/"[/THINK]" for Mistral's. */
void tc_think_tags(tc_format f, const char **open, const char **close);

/* v as Python's json.dumps(v, ensure_ascii=False, indent=indent) writes it (indent < 0: none, the
 * ", " and ": " separators; else "," at line ends). Numbers: integral values below 2^53 as
 * integers, others as Python's float repr (so 1.0 prints 1: the JSON tree keeps no literal form).
 * malloc'd; NULL when out of memory. */
char *tc_pyjson(const struct cJSON *v, int indent);

/* An LFM2 call as the model writes it: name(k=v, ...) with each argument value a Python literal
 * (strings double-quoted with JSON's escapes, True/False/None, lists, dicts). malloc'd or NULL. */
char *tc_pycall(const char *name, const struct cJSON *args);

/* Checks an OpenAI "tools" array: each {"type": "function", "function": {"name": [A-Za-z0-9_.-]{1,64},
 * optional string "description", optional "parameters": a JSON Schema object whose "type", when
 * given, is "object"}}, names distinct. SLM_ERR_INVALID_ARG naming the entry and field otherwise. */
slm_status tc_check_tools(const struct cJSON *tools, slm_err *e);

/* The function object ("function" member) of the tool named name, or NULL. */
const struct cJSON *tc_find_tool(const struct cJSON *tools, const char *name);

/* One parsed call: arguments is JSON text of an object: the model's own text of it in the JSON
 * formats (when it wrote an object, not a string holding one), else compact JSON; id the model's
 * call id where the format has one (Mistral), else NULL. */
typedef struct tc_call {
    char *name, *arguments, *id;
} tc_call;

/* A parsed answer: the calls, and the content: the text before the first call with trailing white
 * space removed, followed by the text after the last call with leading white space removed. With
 * no calls (none written, or one malformed), content is the whole text. */
typedef struct tc_result {
    tc_call *calls;
    size_t n_calls;
    char *content;
    char *reasoning; /* NULL when the answer has none */
} tc_result;

/* Parses text[0, n) in format f (the text ends at a NUL byte before n, as the content is a C string). SLM_OK (calls or none) or SLM_ERR_NOMEM; r is then empty. */
slm_status tc_parse(tc_format f, const char *text, size_t n, tc_result *r);

/* What tc_parse_opts also does: tools (an OpenAI "tools" array or NULL) type the values of
 * TC_QWEN_XML; with reasoning, the answer's leading think block (tc_think_tags) is split off into
 * r->reasoning first (harmony's analysis channel always is); think_open: the prompt ended inside
 * a think block (tc_prompt_thinks), so the answer starts as reasoning, which ends at the close tag
 * or, without one, at the first call. */
typedef struct tc_opts {
    const struct cJSON *tools;
    bool reasoning, think_open;
} tc_opts;
slm_status tc_parse_opts(tc_format f, const tc_opts *o, const char *text, size_t n, tc_result *r);

/* Where in text[0, n) a call of format f starts (its opening marker, or a proper prefix of it that
 * ends the text); n when nothing there is or may become a call's marker. Bare forms are not
 * looked for. */
size_t tc_call_start(tc_format f, const char *text, size_t n);

/* Whether a rendered prompt ends inside an open think block of format f (its last open tag, then
 * only white space): the model's answer starts as reasoning. */
bool tc_prompt_thinks(tc_format f, const char *prompt, size_t n);
void tc_result_free(tc_result *r);

/* For streaming a call of the formats whose arguments are JSON text (all but TC_LFM2 and
 * TC_QWEN_XML, whose calls come whole at the end) while it is generated: in
 * text[0, n), the first call's name (text[name_off, +name_len), once its string is complete) and
 * its arguments written so far (text[args_off, +args_len): whole UTF-8 characters, never past the
 * object's end; args_done once it is complete). These bytes are a prefix of the arguments tc_parse
 * returns for the complete call. false while no call's name has come; args_len 0 before the
 * arguments object has started. */
typedef struct tc_partial {
    size_t name_off, name_len, args_off, args_len;
    bool args_done;
} tc_partial;
bool tc_partial_call(tc_format f, const char *text, size_t n, tc_partial *p);

/* For streaming: the length of the prefix of text[0, n) that is content whatever follows: it stops
 * before a call's start (or what may still become one) and before trailing white space. It never
 * exceeds the content prefix that tc_parse of a longer text returns. */
size_t tc_content_ready(tc_format f, const char *text, size_t n);

#endif
