#!/usr/bin/env python3
"""Tool calls round-trip in each call format (issue 35, docs/serve.md "Tools"), with the official
openai client against `statelm serve` on the real SmolLM2-135M-Instruct running, per format, a real
template of that format (--chat-template-file, llama.cpp's models/templates in the cache):

- the model's call text in that format (llama.cpp's test vectors, tests/data/toolcall/roundtrip.json)
  made the answer by llama-server's "grammar" field, with tool_choice "auto": the response has
  finish_reason "tool_calls", content empty and the call llama.cpp's parser reads from that text
  (name, arguments, the id the model wrote); streamed, the deltas assemble the same call;
- that assistant message, sent back with a tool message answering the call (tool_call_id, name),
  renders (/apply-template) byte for byte as jinja2 renders the same conversation
  (scripts/gen-toolcall-roundtrip.py; the server's call id and date filled into the golden's marks);
- gpt-oss: llama.cpp's vectors of an analysis channel before a call, and before a final message in
  a request without tools, give their reasoning_content and content;
- forced calls (tool_choice "required", and a named function) over two seeds at temperature 1 (a
  sanitizer build: "required", one seed): one
  call of a tool, arguments that validate (jsonschema) against its parameters (gpt-oss: its harmony
  header through the grammar's token references, as text in SmolLM2's vocabulary).

Skips (exit 77) when the model, a template, or the openai / jsonschema packages are absent.
Usage: test_serve_toolcall_roundtrip.py STATELM TESTS_DATA_DIR."""
import json
import os
import sys
import time
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

cache = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache" / "statelm"))
SMOLLM2 = cache / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATES = cache / "llamacpp-ref" / "templates"
G = json.loads((data / "toolcall" / "roundtrip.json").read_text(encoding="utf-8"))
missing = [str(p) for p in [SMOLLM2] + [TEMPLATES / c["template"] for c in G["cases"]] if not p.exists()]
if missing:
    print(f"SKIPPED: {', '.join(missing)} absent (scripts/fetch-models.sh)")
    sys.exit(77)
# a sanitizer build runs ~10x slower: one forced call per format there, and a longer client timeout
SANITIZED = b"__asan_init" in Path(statelm).read_bytes()
FORCED = [("required", 1)] if SANITIZED else [
    (c, seed) for c in ("required", {"type": "function", "function": {"name": "special_function_with_opt"}})
    for seed in (1, 2)]
TOOLS = G["tools"]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": G["question"]}]


def expected_prompt(golden, call_id, t):
    """The golden rendering with the server's call id and its date at time t filled in."""
    out = golden.replace(G["id_mark"], call_id)
    parts = out.split(G["date_mark"])  # text, format, text, format, ...
    return "".join(time.strftime(p, time.localtime(t)) if i % 2 else p for i, p in enumerate(parts))


def call_matches(tc, want):
    return (tc.type == "function" and tc.function.name == want["name"] and
            json.loads(tc.function.arguments) == want["arguments"] and
            (tc.id == want["id"] if want["id"] else tc.id.startswith("call_")))


def roundtrip(case, s):
    label = f"{case['format']} ({case['template']})"
    gbnf = "root ::= " + json.dumps(case["text"])
    r = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=200, temperature=1,
                                      extra_body={"grammar": gbnf})
    m = r.choices[0].message
    want = case["calls"][0]
    if not check(r.choices[0].finish_reason == "tool_calls" and (m.content or "") == case["content"] and
                 m.tool_calls and len(m.tool_calls) == 1 and call_matches(m.tool_calls[0], want),
                 f"{label}: {case['text']!r} parsed as {m} ({r.choices[0].finish_reason})"):
        return
    # streamed: the deltas assemble the same call (its head once, its arguments in pieces)
    stream = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=200, temperature=1,
                                           extra_body={"grammar": gbnf}, stream=True)
    content, args, heads, finish = "", "", [], None
    for chunk in stream:
        d = chunk.choices[0].delta
        content += d.content or ""
        for c in d.tool_calls or []:
            heads += [(c.id, c.function.name)] if c.function.name else []
            args += c.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    check(content == case["content"] and len(heads) == 1 and heads[0][1] == want["name"] and
          json.loads(args or "null") == want["arguments"] and finish == "tool_calls",
          f"{label} streamed: {content!r} {heads} {args!r} {finish}")
    tc = m.tool_calls[0]
    back = ASK + [{"role": "assistant", "content": m.content,
                   "tool_calls": [{"id": tc.id, "type": "function",
                                   "function": {"name": tc.function.name, "arguments": tc.function.arguments}}]},
                  {"role": "tool", "tool_call_id": tc.id, "name": tc.function.name, "content": G["result"]}]
    t0 = time.time()
    status, body = s.post({"messages": back, "tools": TOOLS}, "/apply-template")
    t1 = time.time()
    got = body.get("prompt") if status == 200 else body
    check(got in (expected_prompt(case["prompt"], tc.id, t0), expected_prompt(case["prompt"], tc.id, t1)),
          f"{label}: round trip renders {got!r}, jinja2 {expected_prompt(case['prompt'], tc.id, t0)!r}")
    # the same conversation continues through chat completions (the tool message accepted, an answer comes)
    try:
        r = s.api.chat.completions.create(model="m", messages=back, tools=TOOLS, max_tokens=8)
        check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), f"{label}: continuing after the tool: {r}")
    except openai.APIError as ex:
        check(False, f"{label}: continuing after the tool: {ex}")


def harmony_reasoning(s):
    """gpt-oss: llama.cpp's vector of an analysis channel then a call (tests/test-chat.cpp:6485) gives its
    reasoning_content and call, whole and streamed."""
    vectors = json.loads((data / "toolcall" / "llamacpp-vectors.json").read_text(encoding="utf-8"))["vectors"]
    v = next(x for x in vectors if x["source"] == "tests/test-chat.cpp:6485")
    want = v["expect"]
    gbnf = "root ::= " + json.dumps(v["input"])
    r = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=200, extra_body={"grammar": gbnf})
    m = r.choices[0].message
    got = getattr(m, "reasoning_content", None) or (m.model_extra or {}).get("reasoning_content")
    check(got == want["reasoning_content"] and len(m.tool_calls or []) == 1 and
          m.tool_calls[0].function.name == want["tool_calls"][0]["name"] and
          json.loads(m.tool_calls[0].function.arguments) == json.loads(want["tool_calls"][0]["arguments"]),
          f"gpt-oss analysis + call: {m}")
    stream = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=200,
                                           extra_body={"grammar": gbnf}, stream=True)
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in stream)
    check(reasoning == want["reasoning_content"], f"gpt-oss analysis streamed: {reasoning!r}")
    # without tools the answer is channels too (tests/test-chat.cpp:6434: analysis, then final)
    v = next(x for x in vectors if x["source"] == "tests/test-chat.cpp:6434")
    r = s.api.chat.completions.create(model="m", messages=ASK, max_tokens=200,
                                      extra_body={"grammar": "root ::= " + json.dumps(v["input"])})
    m = r.choices[0].message
    got = (m.model_extra or {}).get("reasoning_content")
    check(m.content == v["expect"]["content"] and got == v["expect"]["reasoning_content"] and not m.tool_calls,
          f"gpt-oss without tools: {m}")


def forced(case, s):
    label = f"{case['format']} ({case['template']})"
    for choice, seed in FORCED:
        try:
            r = s.api.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice=choice,
                                              max_tokens=120, temperature=1, seed=seed)
        except openai.APIError as ex:
            check(False, f"{label} forced {choice} seed {seed}: {ex}")
            continue
        calls = r.choices[0].message.tool_calls or []
        ok = check(r.choices[0].finish_reason == "tool_calls" and len(calls) == 1,
                   f"{label} forced {choice} seed {seed}: {r}")
        if not ok:
            continue
        fn = calls[0].function
        named = choice if isinstance(choice, str) else choice["function"]["name"]
        check(named == "required" or fn.name == named, f"{label} forced {choice}: called {fn.name}")
        try:
            jsonschema.validate(json.loads(fn.arguments), PARAMS[fn.name])
        except (KeyError, ValueError, jsonschema.ValidationError) as ex:
            check(False, f"{label} forced {choice} seed {seed}: {fn.name}({fn.arguments}) does not validate: {ex}")


for case in G["cases"]:
    s = serve_harness.Server(statelm, SMOLLM2, "--chat-template-file", str(TEMPLATES / case["template"]),
                             timeout=900 if SANITIZED else 120)
    try:
        roundtrip(case, s)
        forced(case, s)
        if case["format"] == "gpt-oss":
            harmony_reasoning(s)
    finally:
        s.stop(case["format"])
    print(f"{case['format']}: done", flush=True)

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print(f"ok: {len(G['cases'])} formats round-trip")
