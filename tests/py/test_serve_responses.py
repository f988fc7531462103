#!/usr/bin/env python3
"""The OpenAI Responses API of `statelm serve` (issue 37 item 2, docs/serve.md "Responses") with
the official openai SDK's client.responses, on SmolLM2-135M-Instruct with the built-in smollm2
template (its own Jinja template writes no tools) (scripts/fetch-models.sh; SKIPPED without it):

- responses.create: the raw JSON validates as the SDK's own openai.types.responses.Response; the
  greedy output equals /v1/chat/completions' answer to the same messages (instructions = system);
- a 4-turn conversation by previous_response_id: each turn's greedy answer equals a chat
  completion of the whole transcript (the stored conversation is the transcript), and each turn
  prefills only its new input (input_tokens - cached_tokens <= what the previous turn did not
  hold: the new turn's tokens and the last, unfed, generated token); the prefill figures are
  printed;
- store false keeps nothing (retrieve and previous_response_id: 404); GET returns the stored
  response; DELETE forgets it (then 404);
- streaming: every event validates as ResponseStreamEvent, sequence_number counts from 0, the
  deltas spell the final output_text, the last event is response.completed/incomplete;
- tools: tool_choice required gives one function_call whose arguments validate (jsonschema); its
  function_call_output continues the stored conversation; an output answering no call is 400;
  streamed, function_call_arguments.delta carries the arguments;
- text.format json_schema: the output parses and validates;
- /v1/responses/input_tokens equals usage.input_tokens;
- two servers on one --state-dir: turn 2 sent to the other server continues the stored response
  with the same greedy answer as the first server gives; a delete on one is seen by the other;
- bad input: an unknown item type, an image part, a server tool, an unknown previous id, a
  malformed id: 4xx with a message;
- Gemma 3 270M with the gemma template (the GGUF holds none; the built-in
  renders as Gemma 3's own): a response validates and equals the chat answer, a
  second turn by previous_response_id equals the chat answer to the transcript and reuses the
  stored state, the SDK's typed stream spells the output.
Usage: test_serve_responses.py STATELM TESTS_DATA_DIR."""
import json
import os
import sys
import tempfile
from pathlib import Path

try:
    import jsonschema
    import openai
    import pydantic
except ImportError as e:
    print(f"SKIPPED: {e.name} is not importable (scripts/test.sh installs it into the test venv)")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
import serve_harness  # noqa: E402
from serve_harness import check, failures  # noqa: E402

SMOLLM2 = serve_harness.cached_model("SmolLM2-135M-Instruct.Q4_1.gguf")
from openai.types.responses import Response, ResponseStreamEvent  # noqa: E402

WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                          "required": ["city"], "additionalProperties": False}}
G = {"temperature": 0, "max_output_tokens": 16}
state = tempfile.mkdtemp(prefix="statelm-responses-")
a = serve_harness.Server(statelm, SMOLLM2, "--chat-template", "smollm2", "--state-dir", state, "--parallel", "2", timeout=300)
b = None
api = a.api
event_adapter = pydantic.TypeAdapter(ResponseStreamEvent)


def chat(msgs, n=16):
    return api.chat.completions.create(model="m", messages=msgs, max_tokens=n, temperature=0).choices[0].message.content


try:
    # ---- one response ----
    s, raw = a.post({"model": "m", "input": "Name a fruit.", "instructions": "Answer briefly.", **G}, "/v1/responses")
    check(s == 200, f"/v1/responses: {s} {raw}")
    try:
        Response.model_validate(raw)
    except pydantic.ValidationError as e:
        check(False, f"not an openai Response: {e}")
    r = api.responses.create(model="m", input="Name a fruit.", instructions="Answer briefly.", **G)
    check(r.output_text == chat([{"role": "system", "content": "Answer briefly."},
                                 {"role": "user", "content": "Name a fruit."}]), "output = the chat answer")
    s, it = a.post({"model": "m", "input": "Name a fruit.", "instructions": "Answer briefly."}, "/v1/responses/input_tokens")
    check(s == 200 and it["input_tokens"] == r.usage.input_tokens, f"input_tokens {it} vs {r.usage}")

    # ---- a 4-turn conversation ----
    asks = ["What is the capital of France?", "And of Germany?", "Which is larger?", "Thank you."]
    transcript, prev, prev_usage = [], None, None
    for k, q in enumerate(asks):
        t = api.responses.create(model="m", input=q, previous_response_id=prev, **G)
        transcript.append({"role": "user", "content": q})
        check(t.output_text == chat(transcript), f"turn {k + 1} = a chat completion of the whole transcript")
        transcript.append({"role": "assistant", "content": t.output_text})
        u = t.usage
        prefilled = u.input_tokens - u.input_tokens_details.cached_tokens
        if prev_usage:
            new = u.input_tokens - (prev_usage.input_tokens + prev_usage.output_tokens) + 1
            check(prefilled <= new, f"turn {k + 1} prefilled {prefilled} tokens, new input {new}")
            print(f"turn {k + 1}: prompt {u.input_tokens} tokens, prefilled {prefilled} "
                  f"({100.0 * prefilled / u.input_tokens:.1f}% of re-sending the transcript)")
        prev, prev_usage = t.id, u

    # ---- store, get, delete ----
    g = api.responses.retrieve(prev)
    check(g.id == prev and g.output_text == transcript[-1]["content"], "GET returns the stored response")
    api.responses.delete(prev)
    for what, call in [("retrieve", lambda: api.responses.retrieve(prev)),
                       ("delete", lambda: api.responses.delete(prev)),
                       ("continue", lambda: api.responses.create(model="m", input="x", previous_response_id=prev, **G))]:
        try:
            call()
            check(False, f"{what} after delete succeeded")
        except openai.NotFoundError:
            pass
    ns = api.responses.create(model="m", input="hi", store=False, **G)
    try:
        api.responses.retrieve(ns.id)
        check(False, "store false was kept")
    except openai.NotFoundError:
        pass

    # ---- streaming ----
    body = {"model": "m", "input": "Tell me about the sea.", **G}
    plain = api.responses.create(**body)
    status, _, sse = a.request("POST", "/v1/responses", {**body, "stream": True})
    evs = []
    for chunk in sse.decode().split("\n\n"):
        lines = dict(x.split(": ", 1) for x in chunk.split("\n") if ": " in x)
        if "data" in lines:
            ev = json.loads(lines["data"])
            check(lines.get("event") == ev["type"], "event name = data type")
            try:
                event_adapter.validate_python(ev)
            except pydantic.ValidationError as e:
                check(False, f"not a ResponseStreamEvent: {ev['type']}: {str(e)[:400]}")
            evs.append(ev)
    check([e["sequence_number"] for e in evs] == list(range(len(evs))), "sequence numbers 0, 1, ...")
    check(evs[0]["type"] == "response.created" and evs[-1]["type"] in ("response.completed", "response.incomplete"),
          f"first and last events: {[e['type'] for e in evs]}")
    text = "".join(e["delta"] for e in evs if e["type"] == "response.output_text.delta")
    check(text == plain.output_text == Response.model_validate(evs[-1]["response"]).output_text,
          f"streamed text {text!r} vs {plain.output_text!r}")
    short = {"model": "m", "input": "Yes or no?", "temperature": 0, "max_output_tokens": 32,  # ends: response.completed
             "text": {"format": {"type": "json_schema", "name": "yn", "schema": {"enum": ["yes", "no"]}}}}
    with api.responses.stream(**short) as st:
        final = st.get_final_response()
    check(final.status == "completed" and final.output_text == api.responses.create(**short).output_text,
          f"the SDK's stream helper: {final.output_text!r}")

    # ---- tools ----
    t1 = api.responses.create(model="m", input="What is the weather in Paris?", tools=[WEATHER], tool_choice="required",
                              temperature=0, max_output_tokens=64)
    calls = [o for o in t1.output if o.type == "function_call"]
    check(len(calls) == 1 and calls[0].name == "get_weather", f"tool_choice required: {t1.output}")
    if calls:
        try:
            jsonschema.validate(json.loads(calls[0].arguments), WEATHER["parameters"])
        except (ValueError, jsonschema.ValidationError) as e:
            check(False, f"arguments do not validate: {e}")
        t2 = api.responses.create(model="m", previous_response_id=t1.id, tools=[WEATHER], **G,
                                  input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "Sunny"}])
        check(t2.status in ("completed", "incomplete") and t2.usage.input_tokens_details.cached_tokens > 0,
              f"a function_call_output continues the stored call: {t2.usage}")
    try:
        api.responses.create(model="m", previous_response_id=t1.id, **G,
                             input=[{"type": "function_call_output", "call_id": "call_nope", "output": "x"}])
        check(False, "an output answering no call was accepted")
    except openai.BadRequestError as e:
        check("answers no function_call" in str(e), f"{e}")
    status, _, sse = a.request("POST", "/v1/responses", {"model": "m", "input": "Weather in Rome?", "tools": [WEATHER],
                                                         "tool_choice": "required", "temperature": 0, "stream": True,
                                                         "max_output_tokens": 64})
    evs = [json.loads(x[6:]) for x in sse.decode().split("\n") if x.startswith("data: ")]
    args = "".join(e["delta"] for e in evs if e["type"] == "response.function_call_arguments.delta")
    done = [e for e in evs if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"]
    check(len(done) == 1 and done[0]["item"]["arguments"] == args and json.loads(args).get("city"),
          f"streamed function call: {args!r}")

    # ---- text.format ----
    schema = {"type": "object", "properties": {"fruit": {"type": "string", "maxLength": 12}}, "required": ["fruit"],
              "additionalProperties": False}
    j = api.responses.create(model="m", input="Name a fruit as JSON.", temperature=0, max_output_tokens=40,
                             text={"format": {"type": "json_schema", "name": "fruit", "schema": schema}})
    try:
        jsonschema.validate(json.loads(j.output_text), schema)
    except (ValueError, jsonschema.ValidationError) as e:
        check(False, f"json_schema output: {j.output_text!r}: {e}")

    # ---- two servers on one --state-dir ----
    b = serve_harness.Server(statelm, SMOLLM2, "--chat-template", "smollm2", "--state-dir", state, "--parallel", "2", timeout=300)
    r1 = api.responses.create(model="m", input="What is the capital of Italy?", **G)
    on_b = b.api.responses.create(model="m", input="And its population?", previous_response_id=r1.id, **G)
    on_a = api.responses.create(model="m", input="And its population?", previous_response_id=r1.id, **G)
    check(on_b.output_text == on_a.output_text, f"the other server continues: {on_b.output_text!r} vs {on_a.output_text!r}")
    check(b.api.responses.retrieve(r1.id).output_text == r1.output_text, "the other server reads the stored response")
    b.api.responses.delete(r1.id)
    try:
        api.responses.retrieve(r1.id)
        check(False, "a response deleted on the other server is still served")
    except openai.NotFoundError:
        pass
    check(not [f for f in os.listdir(state) if f.endswith(".tmp")], "no temporary files left")

    # ---- bad input ----
    for body, status_want, what in [
        ({"input": [{"type": "computer_call", "id": "x"}]}, 400, "item type 'computer_call'"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}]}, 400, "'input_image'"),
        ({"input": "x", "tools": [{"type": "web_search"}]}, 400, "tool type 'web_search'"),
        ({"input": "x", "previous_response_id": "resp_" + "0" * 32}, 404, "no such response"),
        ({"input": "x", "previous_response_id": "../../etc/passwd"}, 404, "no such response"),
        ({"input": []}, 400, "'input'"),
        ({"input": "x", "text": {"format": {"type": "yaml"}}}, 400, "text.format type 'yaml'"),
        ({"input": [{"role": "wizard", "content": "x"}]}, 400, "role 'wizard'"),
    ]:
        s, e = a.post({"model": "m", **body}, "/v1/responses")
        check(s == status_want and what in e.get("error", {}).get("message", ""), f"{body}: {s} {e}")
    s, e = a.post(None, "/v1/responses/nonsense", method="GET")
    check(s == 404, f"GET a malformed id: {s}")
finally:
    a.stop("server A")
    if b:
        b.stop("server B")
    for f in os.listdir(state):
        os.unlink(os.path.join(state, f))
    os.rmdir(state)

# ---- Gemma 3 270M with the built-in gemma template (its GGUF holds none): a response, a second turn, streaming ----
GEMMA3 = serve_harness.cached_model("gemma-3-270m.Q4_K_M.gguf")
g = serve_harness.Server(statelm, GEMMA3, "--chat-template", "gemma", timeout=300)
try:
    gapi = g.api
    s, raw = g.post({"model": "m", "input": "Name a fruit.", "instructions": "Answer briefly.", **G}, "/v1/responses")
    try:
        Response.model_validate(raw)
    except pydantic.ValidationError as e:
        check(False, f"gemma3: not an openai Response: {e}")
    g1 = gapi.responses.create(model="m", input="Name a fruit.", instructions="Answer briefly.", **G)
    msgs = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name a fruit."}]
    gchat = gapi.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0).choices[0].message.content
    check(s == 200 and g1.output_text == gchat and g1.output_text, f"gemma3: output {g1.output_text!r} vs chat {gchat!r}")
    # instructions are not carried over by previous_response_id (OpenAI's rule): a turn 1 without them
    g1 = gapi.responses.create(model="m", input="Name a fruit.", **G)
    g2 = gapi.responses.create(model="m", input="And a vegetable?", previous_response_id=g1.id, **G)
    msgs = [{"role": "user", "content": "Name a fruit."}, {"role": "assistant", "content": g1.output_text},
            {"role": "user", "content": "And a vegetable?"}]
    gchat2 = gapi.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0).choices[0].message.content
    check(g2.output_text == gchat2 and g2.usage.input_tokens_details.cached_tokens > 0,
          f"gemma3: turn 2 {g2.output_text!r} vs chat {gchat2!r}, usage {g2.usage}")
    gevs = list(gapi.responses.create(model="m", input="Tell me about the sea.", stream=True, **G))
    deltas = "".join(ev.delta for ev in gevs if ev.type == "response.output_text.delta")
    gplain = gapi.responses.create(model="m", input="Tell me about the sea.", **G)
    check(gevs[0].type == "response.created" and gevs[-1].type in ("response.completed", "response.incomplete") and
          deltas == gevs[-1].response.output_text == gplain.output_text,
          f"gemma3: streamed {deltas!r} vs {gplain.output_text!r} ({[e.type for e in gevs]})")
finally:
    g.stop("gemma3 server")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
