/* toolcall.h — tool calls in the chat formats (docs/serve.md "Tools"): the family call format of a
 * template, JSON printed as Jinja's tojson writes it (Python's json.dumps, for tool renderings),
 * checks of an OpenAI "tools" array, parsing a model's answer into calls, and the parts of a call
 * that may be streamed while it is generated.
 *
 * Formats: TC_HERMES ("chatml", "smollm2", "qwen3", "qwen3-nothink"): <tool_call>{"name": ...,
 * "arguments": {...}}</tool_call> blocks; TC_LFM2: a Python-style list [f(a=1), g()] between
 * <|tool_call_start|> and <|tool_call_end|> (those are control tokens, so the list may also come
 * bare, at the start of the answer); TC_LLAMA3: the whole answer one JSON object {"name": ...,
 * "parameters": {...}} (optionally after <|python_tag|>); TC_NONE ("gemma": Gemma 3's template
 * has no tool support). */
#ifndef SLM_TEXT_TOOLCALL_H
#define SLM_TEXT_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct cJSON;

typedef enum tc_format { TC_NONE = 0, TC_HERMES, TC_LFM2, TC_LLAMA3 } tc_format;

tc_format tc_format_of(const char *template_name);

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
 * formats (when it wrote an object, not a string holding one), else compact JSON. */
typedef struct tc_call {
    char *name, *arguments;
} tc_call;

/* A parsed answer: the calls, and the content: the text before the first call with trailing white
 * space removed, followed by the text after the last call with leading white space removed. With
 * no calls (none written, or one malformed), content is the whole text. */
typedef struct tc_result {
    tc_call *calls;
    size_t n_calls;
    char *content;
} tc_result;

/* Parses text[0, n) in format f (the text ends at a NUL byte before n, as the content is a C string). SLM_OK (calls or none) or SLM_ERR_NOMEM; r is then empty. */
slm_status tc_parse(tc_format f, const char *text, size_t n, tc_result *r);
void tc_result_free(tc_result *r);

/* For streaming a call of the JSON formats (TC_HERMES, TC_LLAMA3) while it is generated: in
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
