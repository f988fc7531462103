#!/usr/bin/env python3
"""Tool calls in `statelm serve` (issue 25 item 3, docs/serve.md "Tools") with the official openai
client, on the tiny qwen3 model served with --chat-template qwen3 (Hermes format), the tiny llama
model served with --chat-template llama3 (Llama 3 JSON format) and lfm2 (Python-style call list),
the tiny qwen3 model running Qwen3.5's real template (--chat-template-file, from llama.cpp's
models/templates in the cache: the XML call format) and, when fetched (scripts/fetch-models.sh), the
real SmolLM2-135M-Instruct served with --chat-template smollm2 (Hermes format). The tiny models'
stored templates and SmolLM2's own are ChatML without tools: run by default, they render no tools
and imply no call format, so these runs name a template that has one:

- tool_choice "required" and a named function at temperature 1 over several seeds: every answer
  has finish_reason "tool_calls" and one call (id "call_...", type function, a tool's name) whose
  arguments parse as JSON and validate (jsonschema) against that tool's parameters; content null;
- streamed, the same seed gives the same call: the first delta of a call carries its id, type and
  name, the arguments come in later deltas (in several pieces as they are generated, for the JSON
  formats), the last chunk's finish_reason is "tool_calls";
- tool_choice "auto" on an answer made a known text by llama-server's "grammar" field: content
  before/after the call and the call are split as the family's format says, streamed and not;
  without tools the same text is all content;
- a round trip: the assistant message with the call and a role "tool" message are accepted and
  rendered (the prompt grows by them);
- tool_choice "none": the tools are not rendered (the prompt has the tokens of the request without
  tools) and the answer has no calls; "auto" renders them (a longer prompt);
- a request's own chat_template and chat_template_kwargs render (and a bad one is a 400);
- refusals (400, naming the problem): malformed tools, duplicate names, bad parameters, an
  unknown named function, "required" without tools, a parameter keyword the grammar cannot
  enforce, arguments that are not JSON, tools with the gemma template.
Usage: test_serve_tools.py STATELM TESTS_DATA_DIR."""
import json
import sys
from pathlib import Path

try:
    import jsonschema
    import openai
except ImportError as e:
    print(f"SKIPPED: {e.name} is not importable (scripts/test.sh installs it into the test venv)")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
import serve_harness  # noqa: E402 (after the openai check)
from serve_harness import check, failures  # noqa: E402
SMOLLM2 = Path.home() / ".cache" / "statelm" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 12},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                                        "exact": {"type": "boolean"}},
                       "required": ["a", "b"]}}},
]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def Server(model, *args):
    return serve_harness.Server(statelm, model, *args, timeout=300)


def valid_call(what, call, only=None):
    """A call object of a response: well-formed, of a tool, arguments valid for its schema."""
    tool = {t["function"]["name"]: t["function"] for t in TOOLS}.get(call.function.name)
    ok = check(call.type == "function" and call.id.startswith("call_") and len(call.id) > 10, f"{what}: {call}")
    ok &= check(tool is not None and (only is None or call.function.name == only), f"{what}: tool name {call}")
    try:
        args = json.loads(call.function.arguments)
        jsonschema.validate(args, tool["parameters"])
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        return check(False, f"{what}: arguments {call.function.arguments!r} are not valid: {e}")
    return ok


def forced_tests(label, s, seeds):
    most_pieces = 0
    for choice, only in (("required", None), ({"type": "function", "function": {"name": "add"}}, "add")):
        for seed in seeds:
            what = f"{label} tool_choice={choice} seed {seed}"
            r = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice=choice, seed=seed,
                                                 temperature=1, max_tokens=200)
            ch = r.choices[0]
            if not check(ch.finish_reason == "tool_calls" and ch.message.tool_calls and
                         len(ch.message.tool_calls) == 1, f"{what}: {ch}"):
                continue
            check(ch.message.content is None, f"{what}: content {ch.message.content!r}")
            valid_call(what, ch.message.tool_calls[0], only)
            # streamed: the same call in OpenAI's deltas
            stream = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice=choice,
                                                      seed=seed, temperature=1, max_tokens=200, stream=True)
            calls, finish, content, pieces = {}, None, "", 0
            for chunk in stream:
                c = chunk.choices[0]
                content += c.delta.content or ""
                for d in c.delta.tool_calls or []:
                    if d.index not in calls:
                        check(d.id and d.type == "function" and d.function.name, f"{what} stream: first delta {d}")
                        calls[d.index] = {"id": d.id, "name": d.function.name, "arguments": ""}
                    calls[d.index]["arguments"] += d.function.arguments or ""
                    pieces += bool(d.function.arguments)
                finish = c.finish_reason or finish
            want = ch.message.tool_calls[0]
            check(finish == "tool_calls" and content == "", f"{what} stream: finish {finish}, content {content!r}")
            check(list(calls) == [0] and calls[0]["name"] == want.function.name and
                  calls[0]["arguments"] == want.function.arguments,
                  f"{what} stream: {calls} differs from {want}")
            most_pieces = max(most_pieces, pieces)
    # the JSON formats stream a forced call's arguments as they are generated; lfm2 and Qwen's XML
    # calls send them whole
    whole = "lfm2" in label or "Qwen3.5" in label
    check(most_pieces > 1 if not whole else most_pieces == 1,
          f"{label}: arguments came in at most {most_pieces} pieces")


def round_trip_tests(label, s):
    r = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required", seed=1,
                                         temperature=1, max_tokens=200)
    msg = r.choices[0].message
    if not check(msg.tool_calls, f"{label} round trip: no call {r}"):
        return
    call = msg.tool_calls[0]
    history = ASK + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                     {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'}]
    r2 = s.api.chat.completions.create(model="m", messages=history, tools=TOOLS, max_tokens=8, temperature=0)
    check(r2.choices[0].finish_reason in ("stop", "length", "tool_calls"), f"{label} round trip: {r2}")
    check(r2.usage.prompt_tokens > r.usage.prompt_tokens + 10,
          f"{label} round trip: prompt {r2.usage.prompt_tokens} tokens, not beyond {r.usage.prompt_tokens}")
    # none: tools not rendered; auto: rendered
    plain = s.api.chat.completions.create(model="m", messages=ASK, max_tokens=4, temperature=0)
    none = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="none", max_tokens=4,
                                            temperature=0)
    auto = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="auto", max_tokens=4,
                                            temperature=0)
    check(none.usage.prompt_tokens == plain.usage.prompt_tokens and not none.choices[0].message.tool_calls and
          none.choices[0].message.content == plain.choices[0].message.content,
          f"{label} tool_choice none: {none} vs {plain}")
    check(auto.usage.prompt_tokens > plain.usage.prompt_tokens + 50, f"{label} auto: tools not rendered {auto.usage}")


# tool_choice "auto" on an answer that llama-server's "grammar" field makes exactly this text
AUTO = {"tiny qwen3": ('Let me check.\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
                       "Let me check."),
        "tiny llama --chat-template llama3": ('{"name": "add", "parameters": {"a": 1, "b": 2}}', None),
        "tiny llama --chat-template lfm2": ("[add(a=1, b=2)] Done.", "Done.")}


def auto_tests(label, s):
    text, want_content = AUTO[label]
    gbnf = "root ::= " + json.dumps(text)
    r = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=200, temperature=1,
                                         extra_body={"grammar": gbnf})
    m = r.choices[0].message
    check(r.choices[0].finish_reason == "tool_calls" and m.content == want_content and len(m.tool_calls) == 1 and
          m.tool_calls[0].function.name == "add" and json.loads(m.tool_calls[0].function.arguments) == {"a": 1, "b": 2},
          f"{label} auto: {r}")
    stream = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=200, temperature=1,
                                              extra_body={"grammar": gbnf}, stream=True)
    content, args, names, finish = "", "", [], None
    for chunk in stream:
        d = chunk.choices[0].delta
        content += d.content or ""
        for c in d.tool_calls or []:
            names += [c.function.name] if c.function.name else []
            args += c.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    check(content == (want_content or "") and names == ["add"] and json.loads(args) == {"a": 1, "b": 2} and
          finish == "tool_calls", f"{label} auto streamed: {content!r} {names} {args!r} {finish}")
    # without tools the same text is content
    r = s.api.chat.completions.create(model="m", messages=ASK, max_tokens=200, extra_body={"grammar": gbnf})
    check(r.choices[0].message.content == text and not r.choices[0].message.tool_calls, f"{label} no tools: {r}")


def expect_400(s, what, needle, **kw):
    try:
        s.api.chat.completions.create(model="m", max_tokens=4, **{"messages": ASK, **kw})
    except openai.BadRequestError as e:
        check(needle in str(e), f"{what}: 400 without {needle!r}: {e}")
        return
    check(False, f"{what}: accepted")


def template_request_tests(s):
    """A request's own chat_template (Jinja text) and chat_template_kwargs, as llama-server takes them."""
    t = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
         "<|im_start|>assistant\n{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
         "{% endif %}")
    on = s.api.chat.completions.create(model="m", messages=ASK, max_tokens=2, temperature=0,
                                       extra_body={"chat_template": t})
    off = s.api.chat.completions.create(model="m", messages=ASK, max_tokens=2, temperature=0,
                                        extra_body={"chat_template": t, "chat_template_kwargs": {"enable_thinking": False}})
    check(off.usage.prompt_tokens > on.usage.prompt_tokens, f"chat_template_kwargs: {off.usage} vs {on.usage}")
    expect_400(s, "chat_template that does not parse", "1:", extra_body={"chat_template": "{{ x ]] }}"})
    expect_400(s, "chat_template that raises", "no tools here",
               extra_body={"chat_template": "{{ raise_exception('no tools here') }}"})
    expect_400(s, "chat_template_kwargs reserved", "'messages'", extra_body={"chat_template_kwargs": {"messages": []}})
    expect_400(s, "chat_template_kwargs not an object", "must be an object", extra_body={"chat_template_kwargs": [1]})


def refusal_tests(s):
    expect_400(s, "tools not a list", "'tools' must be a list", tools={"a": 1})
    expect_400(s, "tool type", "tools[0] must be", tools=[{"type": "retrieval"}])
    expect_400(s, "tool name", "tools[1].function.name", tools=[TOOLS[0], {"type": "function",
                                                                            "function": {"name": "bad name"}}])
    expect_400(s, "duplicate", "both named 'add'", tools=[TOOLS[1], TOOLS[1]])
    expect_400(s, "parameters type", "'type' must be \"object\"",
               tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}])
    expect_400(s, "unknown named", "no tool is named 'nope'", tools=TOOLS,
               tool_choice={"type": "function", "function": {"name": "nope"}})
    expect_400(s, "required without tools", "needs a non-empty 'tools'", tool_choice="required")
    expect_400(s, "bad tool_choice", "'tool_choice' must be", tools=TOOLS, tool_choice="sometimes")
    expect_400(s, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean", tools=TOOLS,
               extra_body={"parallel_tool_calls": "yes"})
    expect_400(s, "keyword", "keyword 'not'", tool_choice="required",
               tools=[{"type": "function", "function": {"name": "f", "parameters": {
                   "type": "object", "properties": {"x": {"type": "string", "not": {"const": "a"}}}}}}])
    expect_400(s, "required and response_format", "cannot be combined", tools=TOOLS, tool_choice="required",
               response_format={"type": "json_object"})
    bad_args = ASK + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{not json"}}]}]
    expect_400(s, "arguments not JSON", "arguments is not a JSON object", messages=bad_args, tools=TOOLS)
    expect_400(s, "tool_calls on a user message", "'tool_calls' must be a list, on an assistant message",
               messages=[{"role": "user", "content": "x", "tool_calls": []}])
    expect_400(s, "role", "is not system, user, assistant or tool", messages=[{"role": "robot", "content": "x"}])


TINY_LLAMA = data / "tiny" / "llama" / "llama-f32.gguf"
QWEN35 = Path.home() / ".cache" / "statelm" / "llamacpp-ref" / "templates" / "Qwen3.5-4B.jinja"
for label, model, args, seeds in (("tiny qwen3", data / "tiny" / "qwen3" / "qwen3-f32.gguf", ["--chat-template", "qwen3"], range(6)),
                                  ("tiny llama --chat-template llama3", TINY_LLAMA, ["--chat-template", "llama3"], range(4)),
                                  ("tiny llama --chat-template lfm2", TINY_LLAMA, ["--chat-template", "lfm2"], range(4))):
    s = Server(model, *args, "-c", "4096")
    try:
        forced_tests(label, s, seeds)
        round_trip_tests(label, s)
        auto_tests(label, s)
        if label == "tiny qwen3":
            refusal_tests(s)
            template_request_tests(s)
    finally:
        s.stop()

# Qwen3.5's own template (XML calls; its generation prompt opens a think block, so a forced call
# ends the reasoning the prompt opened): forced and round-trip tests through the real template
if QWEN35.exists():
    s = Server(data / "tiny" / "qwen3" / "qwen3-f32.gguf", "--chat-template-file", str(QWEN35), "-c", "4096")
    try:
        forced_tests("tiny qwen3 + Qwen3.5 template", s, range(4))
        round_trip_tests("tiny qwen3 + Qwen3.5 template", s)
    finally:
        s.stop()
else:
    print(f"note: {QWEN35} absent (scripts/fetch-models.sh): the Qwen3.5 template part did not run")

gemma = Server(TINY_LLAMA, "--chat-template", "gemma")
try:
    expect_400(gemma, "gemma tools", "has no tool support", tools=TOOLS)
    r = gemma.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="none", max_tokens=2)
    check(r.choices[0].finish_reason in ("stop", "length"), f"gemma tool_choice none: {r}")
finally:
    gemma.stop()

if SMOLLM2.exists():
    s = Server(SMOLLM2, "--chat-template", "smollm2")
    try:
        forced_tests("SmolLM2", s, range(5))
        round_trip_tests("SmolLM2", s)
    finally:
        s.stop()
else:
    print(f"note: {SMOLLM2} absent (scripts/fetch-models.sh): the real-model part did not run")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
