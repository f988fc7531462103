/* serve_tools.h — tool calls in `statelm serve` (docs/serve.md "Tools"): the request's "tools" and
 * "tool_choice", messages with role "tool" and assistant "tool_calls", and the calls parsed out of
 * answers into OpenAI "tool_calls" (whole responses and stream deltas). openai.c calls these hooks;
 * the formats themselves are the library's (slm_chat_tokenize_tools, slm_tool_calls_parse,
 * slm_tool_call_grammar). */
#ifndef SLM_CLI_SERVE_TOOLS_H
#define SLM_CLI_SERVE_TOOLS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "statelm.h"

typedef struct tool_req {
    char *tools; /* JSON text of the request's non-empty "tools" when tool_choice is not "none", or NULL */
    bool parse;  /* answers are parsed for calls (gpt-oss's: always, for their channels) */
    bool forced; /* tool_choice "required" or named: the answer is one call, streamed as it is generated */
} tool_req;

/* What a streamed choice has sent of its call: the delta with id, type and name, and how many
 * bytes of the arguments. */
typedef struct tool_stream {
    bool head_sent;
    size_t args_sent;
} tool_stream;

/* Sets t up for the OpenAI "tools" array text tools (non-empty; tool_choice not "none") and
 * template tmpl; forced (tool_choice "required", or name for a named function): *grammar gets the
 * forced-call grammar (NULL otherwise). false with msg naming what is wrong. */
bool tools_setup(const char *tools, bool forced, const char *name, const char *tmpl, tool_req *t, slm_grammar **grammar,
                 char *msg, size_t cap);
void tools_req_free(tool_req *t);

/* Whole response: sets "content" (null when empty and there are calls), "tool_calls" and, where the
 * format has its own (gpt-oss's analysis channel), "reasoning_content" of the OpenAI message m from
 * the answer content text; returns true when it has calls. */
bool tools_message_json(const tool_req *t, const char *tmpl, const char *text, const char *job_id, int choice,
                        cJSON *m);

/* Streaming: how many bytes of the answer content text[0, n) may be sent as content now. */
size_t tools_content_ready(const tool_req *t, const char *tmpl, const char *text, size_t n);

/* Streaming a forced call while it is generated (text[0, n): the answer content so far): the deltas
 * of what is new since ts (the id, type and name once the name is whole, then each new piece of
 * the arguments), as a cJSON array of delta objects (empty when nothing is new; NULL when out of
 * memory); ts is advanced. */
cJSON *tools_progress_deltas(const tool_req *t, const char *tmpl, const char *text, size_t n, tool_stream *ts,
                             const char *job_id, int choice);

/* Streaming, at the end of a choice: the deltas still to send after sent bytes of content and what
 * ts records of the call went out (a format's own reasoning, gpt-oss's analysis channel, when no
 * content went out yet; the rest of the content, then per call one delta with its id, type and
 * name and one with the rest of its arguments), as a cJSON array of delta objects;
 * *has_calls tells whether there are calls. NULL when out of memory. */
cJSON *tools_final_deltas(const tool_req *t, const char *tmpl, const char *text, size_t n, size_t sent,
                          const tool_stream *ts, const char *job_id, int choice, bool *has_calls);

#endif
