/* toolcall_impl.h — what the tool-call parsers of toolcall.c (JSON, Hermes, LFM2, Llama 3) and
 * toolcall_fmt.c (Qwen XML, Mistral, Granite, gpt-oss harmony, reasoning) share: a growable
 * string, JSON scanning of possibly incomplete text, and adding a parsed call to a result. */
#ifndef SLM_TEXT_TOOLCALL_IMPL_H
#define SLM_TEXT_TOOLCALL_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "text/toolcall.h"

struct cJSON;

#define HERMES_OPEN "<tool_call>"
#define HERMES_CLOSE "</tool_call>"
#define LFM2_OPEN "<|tool_call_start|>"
#define LFM2_CLOSE "<|tool_call_end|>"
#define PYTHON_TAG "<|python_tag|>"


bool tc_ws(char c);
/* The first occurrence of pat in s[0, n), or NULL. */
const char *tc_find(const char *s, size_t n, const char *pat);
/* Whether t[0, n) is a proper prefix of pat (n < strlen(pat)). */
bool tc_prefix_of(const char *t, size_t n, const char *pat);
/* Where text[0, n) may start pat: the first full occurrence, else the start of a proper prefix of
 * pat that ends the text; n when neither. */
size_t tc_marker_at(const char *t, size_t n, const char *pat);

/* Adds a call with arguments args (an object; taken over) to r, written as raw[0, n_raw) when raw
 * is given (the model's own text of the object) or else as compact JSON. false when out of memory. */
bool tc_add_call(tc_result *r, const char *name, size_t name_len, struct cJSON *args, const char *raw, size_t n_raw);
/* A call object {"name": non-empty string, <args_key or "arguments">: object or string holding
 * one}; the arguments (detached, caller owns) and the name, or NULL when v is not one. */
struct cJSON *tc_call_parts(struct cJSON *v, const char *args_key, const char **name);
/* The end of the JSON value at s (before end), or NULL when the text ends inside it. */
const char *tc_skip_value(const char *s, const char *end);
/* In the JSON object text s[0, end) (possibly incomplete), the value of the top-level member key:
 * *v0 its start, *v1 its end (NULL while the text ends inside it). false when it has not come. */
bool tc_member_span(const char *s, const char *end, const char *key, const char **v0, const char **v1);
/* Parses one JSON call object at s[0, n); *used: bytes consumed. false when there is none. */
bool tc_json_call(const char *s, size_t n, const char *args_key, tc_result *r, size_t *used, bool *oom);
/* Sets the partial span p for the call object text at s (its "name" and args_key members), t the
 * answer text p's offsets count from; false while the name is not whole. */
bool tc_object_partial(const char *t, const char *s, const char *end, const char *args_key, tc_partial *p);
/* p's arguments: the object at a0 (complete at a1, or cut at end; a cut UTF-8 character left out). */
void tc_args_span(const char *t, const char *a0, const char *a1, const char *end, tc_partial *p);
void tc_drop_calls(tc_result *r);

/* The formats of toolcall_fmt.c: calls in t[0, n) go to r, *c0 and *c1 where the first starts and the
 * last ends; false (r without calls) when there is no well-formed call. */
bool tc_find_calls_fmt(tc_format f, const struct cJSON *tools, const char *t, size_t n, tc_result *r, size_t *c0,
                       size_t *c1, bool *oom);
size_t tc_content_ready_fmt(tc_format f, const char *t, size_t n);
bool tc_partial_call_fmt(tc_format f, const char *t, size_t n, tc_partial *p);
/* gpt-oss harmony: the whole parse (calls, content of the final/commentary channels, reasoning of
 * the analysis channel). */
slm_status tc_parse_harmony(const char *t, size_t n, tc_result *r);

#endif
