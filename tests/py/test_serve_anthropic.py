#!/usr/bin/env python3
"""The Anthropic Messages API of `statelm serve` (issue 37 item 1, docs/serve.md "Anthropic
Messages") with the official `anthropic` SDK, on SmolLM2-135M-Instruct with the built-in smollm2
template (its own Jinja template writes no tools) (scripts/fetch-models.sh; SKIPPED without it):

- messages.create: the raw JSON validates as the SDK's own anthropic.types.Message; system as a
  string and as text blocks; text blocks; greedy answers equal the OpenAI endpoint's for the same
  conversation (same prompt, same engine);
- usage: input_tokens + cache_read_input_tokens = /v1/messages/count_tokens's input_tokens;
- stop_sequences: a word of the greedy answer ends it before that word: stop_reason
  "stop_sequence", stop_sequence the word; max_tokens: stop_reason "max_tokens";
- assistant prefill: a trailing assistant message is continued;
- streaming through the SDK: every raw event validates as RawMessageStreamEvent, the sequence is
  message_start, ping, content_block_start/delta.../stop, message_delta, message_stop; the streamed
  text equals the non-streamed answer; get_final_message() works;
- tools: tool_choice any and tool (named): stop_reason "tool_use", one tool_use block whose input
  validates (jsonschema) against the tool's input_schema; streamed, input_json_delta pieces
  rebuild the input; a round trip with tool_use and tool_result (and a thinking block in the
  history) is accepted; tool_choice none gives text;
- errors (the SDK's exception classes, Anthropic's error body {"type": "error", "error": {type,
  message}}): a tool_result answering no tool_use, an image block, an unknown block type, a server
  tool type, missing max_tokens, empty messages, a wrong key (401), X-Api-Key accepted;
- Gemma 3 270M with the gemma template (the GGUF holds none; the built-in
  renders as Gemma 3's own): messages.create validates and equals the chat answer,
  count_tokens, the SDK's stream, a history with a thinking block; tools refused (400: the
  template has no tool support).
Usage: test_serve_anthropic.py STATELM TESTS_DATA_DIR."""
import json
import sys
from pathlib import Path

try:
    import anthropic
    import jsonschema
    import openai  # noqa: F401 (serve_harness)
    import pydantic
except ImportError as e:
    print(f"SKIPPED: {e.name} is not importable (scripts/test.sh installs it into the test venv)")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
import serve_harness  # noqa: E402
from serve_harness import check, failures  # noqa: E402

SMOLLM2 = serve_harness.cached_model("SmolLM2-135M-Instruct.Q4_1.gguf")

WEATHER = {"name": "get_weather", "description": "Current weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                            "required": ["city"], "additionalProperties": False}}
ASK = [{"role": "user", "content": "Say hello to the world."}]
GREEDY = {"temperature": 0}  # the SDK (2.x) has no sampling arguments: sent as extra body fields
srv = serve_harness.Server(statelm, SMOLLM2, "--chat-template", "smollm2", "--api-key", "k", "--parallel", "2", key="k", timeout=300)
client = anthropic.Anthropic(base_url=srv.url, api_key="k", max_retries=0, timeout=300)
msg_adapter = pydantic.TypeAdapter(anthropic.types.Message)
event_adapter = pydantic.TypeAdapter(anthropic.types.RawMessageStreamEvent)


def raw(body, path="/v1/messages", **kw):
    status, _, text = srv.request("POST", path, body, **kw)
    return status, json.loads(text)


def text_of(m):
    return "".join(b.text for b in m.content if b.type == "text")


try:
    # ---- a plain message ----
    body = {"model": "m", "max_tokens": 24, "messages": ASK}  # the SDK sends temperature in extra_body
    s, j = raw({**body, **GREEDY})
    check(s == 200, f"/v1/messages: {s} {j}")
    try:
        msg_adapter.validate_python(j)
    except pydantic.ValidationError as e:
        check(False, f"the answer is not an anthropic.types.Message: {e}")
    m = client.messages.create(**body, extra_body=GREEDY)
    check(m.type == "message" and m.role == "assistant" and m.stop_reason == "max_tokens" and
          m.usage.output_tokens == 24, f"messages.create: {m}")
    oai = srv.api.chat.completions.create(model="m", messages=ASK, max_tokens=24, temperature=0)
    check(text_of(m) == oai.choices[0].message.content, "the same greedy answer as /v1/chat/completions")
    s, ct = raw({"model": "m", "messages": ASK}, "/v1/messages/count_tokens")
    check(s == 200 and ct["input_tokens"] == m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0) ==
          oai.usage.prompt_tokens, f"count_tokens {ct} vs usage {m.usage}")
    ct2 = client.messages.count_tokens(model="m", messages=ASK, system="Be brief.")
    oai2 = srv.api.chat.completions.create(model="m", max_tokens=1, messages=[{"role": "system", "content": "Be brief."},
                                                                              *ASK])
    check(ct2.input_tokens == oai2.usage.prompt_tokens, f"count_tokens with a system prompt: {ct2} vs {oai2.usage}")

    # ---- system as a string and as blocks; text blocks ----
    a = client.messages.create(model="m", max_tokens=12, extra_body=GREEDY, system="You are a pirate.", messages=ASK)
    b = client.messages.create(model="m", max_tokens=12, extra_body=GREEDY,
                               system=[{"type": "text", "text": "You are a pirate."}],
                               messages=[{"role": "user", "content": [{"type": "text", "text": ASK[0]["content"]}]}])
    check(text_of(a) == text_of(b), "system string = system blocks; content string = one text block")

    # ---- stop sequences, prefill ----
    words = text_of(m).split()
    stop = words[len(words) // 2] if len(words) > 2 else words[-1]
    st = client.messages.create(**body, extra_body=GREEDY, stop_sequences=[stop])
    check(st.stop_reason == "stop_sequence" and st.stop_sequence == stop and stop not in text_of(st) and
          text_of(m).startswith(text_of(st)), f"stop_sequences [{stop!r}]: {st}")
    pre = client.messages.create(model="m", max_tokens=8, extra_body=GREEDY,
                                 messages=[{"role": "user", "content": "What is the capital of France?"},
                                           {"role": "assistant", "content": "The capital of France is"}])
    s, tpl = srv.post({"messages": [{"role": "user", "content": "What is the capital of France?"},
                                    {"role": "assistant", "content": "The capital of France is"}]}, "/apply-template")
    s2, nat = srv.post({"prompt": tpl["prompt"], "n_predict": 8, "temperature": 0}, "/completion")
    check(text_of(pre) == nat["content"], f"prefill continued: {text_of(pre)!r} vs {nat['content']!r}")

    # ---- streaming ----
    events = []
    with client.messages.stream(**body, extra_body=GREEDY) as stream:
        for ev in stream:
            events.append(ev)
        final = stream.get_final_message()
    status, _, sse = srv.request("POST", "/v1/messages", {**body, **GREEDY, "stream": True})
    raw_events = []
    for chunk in sse.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.split("\n") if ": " in line)
        if "data" in lines:
            ev = json.loads(lines["data"])
            check(lines.get("event") == ev["type"], f"event name = data type: {chunk}")
            try:
                if ev["type"] != "ping":  # the SDK skips pings: not in its event union
                    event_adapter.validate_python(ev)
            except pydantic.ValidationError as e:
                check(False, f"not a RawMessageStreamEvent: {ev}: {e}")
            raw_events.append(ev)
    types = [e["type"] for e in raw_events]
    check(types[:3] == ["message_start", "ping", "content_block_start"] and types[-3:] ==
          ["content_block_stop", "message_delta", "message_stop"] and
          set(types[3:-3]) == {"content_block_delta"}, f"event sequence: {types}")
    streamed = "".join(e["delta"]["text"] for e in raw_events if e["type"] == "content_block_delta")
    check(streamed == text_of(m) == text_of(final), f"streamed text = the answer: {streamed!r}")
    check(raw_events[-2]["delta"]["stop_reason"] == "max_tokens" and raw_events[-2]["usage"]["output_tokens"] == 24,
          f"message_delta: {raw_events[-2]}")

    # ---- tools ----
    for choice in ({"type": "any"}, {"type": "tool", "name": "get_weather"}):
        t = client.messages.create(model="m", max_tokens=64, extra_body=GREEDY, tools=[WEATHER], tool_choice=choice,
                                   messages=[{"role": "user", "content": "What is the weather in Paris?"}])
        uses = [b for b in t.content if b.type == "tool_use"]
        check(t.stop_reason == "tool_use" and len(uses) == 1 and uses[0].name == "get_weather" and
              uses[0].id.startswith("toolu_"), f"tool_choice {choice}: {t}")
        if uses:
            try:
                jsonschema.validate(uses[0].input, WEATHER["input_schema"])
            except jsonschema.ValidationError as e:
                check(False, f"tool input does not validate: {e}")
    status, _, sse = srv.request("POST", "/v1/messages", {
        "model": "m", "max_tokens": 64, "temperature": 0, "stream": True, "tools": [WEATHER],
        "tool_choice": {"type": "any"}, "messages": [{"role": "user", "content": "What is the weather in Paris?"}]})
    evs = [json.loads(line[6:]) for line in sse.decode().split("\n") if line.startswith("data: ")]
    start = [e for e in evs if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use"]
    pieces = "".join(e["delta"]["partial_json"] for e in evs if e["type"] == "content_block_delta" and
                     e["delta"]["type"] == "input_json_delta")
    check(len(start) == 1 and uses and json.loads(pieces) == uses[0].input and
          evs[-2]["delta"]["stop_reason"] == "tool_use", f"streamed tool_use: {evs}")
    if uses:
        r = client.messages.create(model="m", max_tokens=16, extra_body=GREEDY, tools=[WEATHER], messages=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "I should call the tool.", "signature": ""},
                                              {"type": "text", "text": "Let me check."},
                                              {"type": "tool_use", "id": uses[0].id, "name": "get_weather",
                                               "input": uses[0].input}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                          "content": [{"type": "text", "text": "Sunny, 21 C"}]},
                                         {"type": "text", "text": "Summarise it."}]}])
        check(r.type == "message" and r.usage.output_tokens > 0, f"a tool round trip: {r}")
    n = client.messages.create(model="m", max_tokens=8, extra_body=GREEDY, tools=[WEATHER], tool_choice={"type": "none"},
                               messages=ASK)
    check(n.stop_reason == "max_tokens" and all(b.type == "text" for b in n.content), f"tool_choice none: {n}")

    # ---- errors ----
    bad = [
        ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}]}]},
         "answers no tool_use"),
        ({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                                  "data": "AA=="}}]}]}, "'image' block"),
        ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, "block type 'video'"),
        ({"messages": ASK, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tool type"),
        ({"messages": ASK, "thinking": {"type": "sometimes"}}, "'thinking'"),
        ({"messages": []}, "non-empty list"),
        ({"messages": [{"role": "system", "content": "x"}]}, "role 'system'"),
        ({"messages": ASK, "tool_choice": {"type": "tool"}}, "needs a string 'name'"),
        ({"messages": ASK, "temperature": "hot"}, "'temperature'"),
    ]
    for extra, want in bad:
        try:
            client.messages.create(model="m", max_tokens=8, messages=extra.pop("messages"), extra_body=extra)
            check(False, f"accepted: {extra}")
        except anthropic.BadRequestError as e:
            check(e.body.get("type") == "error" and e.body["error"]["type"] == "invalid_request_error" and
                  want in e.body["error"]["message"], f"{extra}: {e.body}")
    s, j = raw({"model": "m", "messages": ASK})
    check(s == 400 and "'max_tokens' is required" in j["error"]["message"], f"missing max_tokens: {s} {j}")
    try:
        anthropic.Anthropic(base_url=srv.url, api_key="wrong", max_retries=0).messages.create(
            model="m", max_tokens=4, messages=ASK)
        check(False, "a wrong key was accepted")
    except anthropic.AuthenticationError as e:
        check(e.body["error"]["type"] == "authentication_error", f"401 body: {e.body}")
    s, _, _ = srv.request("POST", "/v1/messages", {"model": "m", "max_tokens": 2, "messages": ASK}, key=None,
                          headers={"X-Api-Key": "k"})
    check(s == 200, f"X-Api-Key: {s}")
finally:
    srv.stop()

# ---- Gemma 3 270M with the built-in gemma template (its GGUF holds none): messages, count_tokens and streaming validate ----
GEMMA3 = serve_harness.cached_model("gemma-3-270m.Q4_K_M.gguf")
gsrv = serve_harness.Server(statelm, GEMMA3, "--chat-template", "gemma", timeout=300)
gclient = anthropic.Anthropic(base_url=gsrv.url, api_key="none", max_retries=0, timeout=300)
try:
    body = {"model": "m", "max_tokens": 16, "system": "Answer briefly.", "messages": ASK}
    status, _, text = gsrv.request("POST", "/v1/messages", {**body, **GREEDY})
    j = json.loads(text)
    try:
        msg_adapter.validate_python(j)
    except pydantic.ValidationError as e:
        check(False, f"gemma3: the answer is not an anthropic.types.Message: {e}")
    gm = gclient.messages.create(**body, extra_body=GREEDY)
    goai = gsrv.api.chat.completions.create(model="m", max_tokens=16, temperature=0,
                                            messages=[{"role": "system", "content": "Answer briefly."}, *ASK])
    check(status == 200 and text_of(gm) == goai.choices[0].message.content and text_of(gm),
          f"gemma3: messages.create = the chat answer: {gm}")
    gct = gclient.messages.count_tokens(model="m", system="Answer briefly.", messages=ASK)
    check(gct.input_tokens == goai.usage.prompt_tokens, f"gemma3: count_tokens {gct} vs {goai.usage}")
    gev = []
    with gclient.messages.stream(**body, extra_body=GREEDY) as stream:
        for ev in stream:
            if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                gev.append(ev.delta.text)
        gfinal = stream.get_final_message()
    check("".join(gev) == text_of(gm) == text_of(gfinal), f"gemma3: streamed {''.join(gev)!r} vs {text_of(gm)!r}")
    gh = gclient.messages.create(model="m", max_tokens=8, extra_body=GREEDY, messages=[
        *ASK, {"role": "assistant", "content": [{"type": "thinking", "thinking": "Greet.", "signature": ""},
                                                {"type": "text", "text": "Hello, world!"}]},
        {"role": "user", "content": "Again."}])
    check(gh.type == "message" and gh.usage.output_tokens > 0, f"gemma3: a history with a thinking block: {gh}")
    try:  # Gemma 3's template writes no tools: refused with the reason, not rendered some other way
        gclient.messages.create(model="m", max_tokens=8, tools=[WEATHER], tool_choice={"type": "any"}, messages=ASK)
        check(False, "gemma3: tools were accepted")
    except anthropic.BadRequestError as e:
        check("no tool-call format" in e.body["error"]["message"], f"gemma3 tools: {e.body}")
finally:
    gsrv.stop()

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
