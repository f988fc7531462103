"""The llama-cpp-python surface beyond plain text: logprobs of create_completion and
create_chat_completion, response_format, tools / tool_choice, create_embedding / embed.

Expected values come from outside the code under test:
- logprobs: numpy's log_softmax of the logits a fresh Session returns when the same tokens are
  replayed (the completions' logprobs are computed in C by Logits.logprobs);
- tool calls and JSON answers: json.loads, then `jsonschema` against the tool's parameters schema
  or the response_format schema; the dicts validate with the openai package's pydantic types;
- embeddings: transformers' final-norm hidden states of the tiny qwen3
  (tests/data/tiny/qwen3/golden, scripts/gen_embed_golden.py) and `statelm serve --embeddings`'s
  /v1/embeddings answer for the same texts.
Chat, tools and JSON run on SmolLM2-135M-Instruct (skipped when absent from the cache) with its
built-in "smollm2" template, whose tool-call format is hermes (<tool_call>{json}</tool_call>);
SmolLM2's own stored Jinja template writes no tools."""
import json
import os
import re
import subprocess
import threading
import urllib.request

import numpy as np
import pytest

import statelm
from conftest import DATA, tiny_path

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                       "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "description": "Adds two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"], "additionalProperties": False}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris right now?"}]


def log_softmax(row):
    x = np.asarray(row, dtype=np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def replay(model, prompt_ids, ids):
    """log_softmax rows of the logits before each of ids, from a fresh session (numpy)."""
    with statelm.Session(model) as s:
        rows = [log_softmax(np.array(s.prefill(prompt_ids)))]
        for t in ids[:-1]:
            rows.append(log_softmax(np.array(s.decode(t))))
    return rows


def top_ids(row, n):
    """The n most probable ids, the lower id first on ties."""
    return sorted(range(len(row)), key=lambda i: (-row[i], i))[:n]


def test_completion_logprobs_equal_numpy_log_softmax(models):
    from openai.types import Completion
    m = models["llama"]
    prompt = [1, 89, 95]
    r = m.create_completion(prompt, max_tokens=8, temperature=0, logprobs=3)
    Completion.model_validate(r)
    ids = [t.id for t in m.generate(prompt, 8)]
    lp = r["choices"][0]["logprobs"]
    assert len(lp["token_logprobs"]) == len(ids) == r["usage"]["completion_tokens"]
    text = lambda i: m.token_bytes(i).decode("utf-8", "replace")  # noqa: E731
    offset = len(m.detokenize(prompt))
    for k, (tok, row) in enumerate(zip(ids, replay(m, prompt, ids))):
        assert lp["tokens"][k] == text(tok)
        assert abs(lp["token_logprobs"][k] - row[tok]) < 1e-9
        want = {text(i): row[i] for i in top_ids(row, 3)}
        want[text(tok)] = row[tok]
        assert lp["top_logprobs"][k].keys() == want.keys()
        assert all(abs(lp["top_logprobs"][k][t] - v) < 1e-9 for t, v in want.items())
        assert lp["text_offset"][k] == offset
        offset += len(text(tok))
    # streamed: one token's logprobs per chunk, the same values
    chunks = list(m.create_completion(prompt, max_tokens=8, temperature=0, logprobs=3, stream=True))
    streamed = [v for c in chunks if c["choices"][0]["logprobs"] for v in c["choices"][0]["logprobs"]["token_logprobs"]]
    assert streamed == lp["token_logprobs"]
    assert r["choices"][0]["text"] == m.detokenize(ids)
    with pytest.raises(statelm.UnsupportedError, match="echo"):
        m.create_completion(prompt, max_tokens=2, logprobs=1, echo=True)
    with pytest.raises(ValueError):
        m.create_completion(prompt, max_tokens=2, logprobs=-1)


def test_logits_logprobs_method(models):
    m = models["qwen3"]
    with statelm.Session(m, n_ctx=32) as s:
        logits = s.prefill([1, 89, 95])
        row = log_softmax(np.array(logits))
        lp, top = logits.logprobs(7, 5)
        assert abs(lp - row[7]) < 1e-12
        assert [i for i, _ in top] == top_ids(row, 5)
        assert all(abs(v - row[i]) < 1e-12 for i, v in top)
        assert logits.logprobs(7)[1] == []
        with pytest.raises(statelm.RangeError):
            logits.logprobs(m.n_vocab)
        s.decode(3)
        with pytest.raises(statelm.StateError, match="stale"):
            logits.logprobs(7)


def test_chat_logprobs_equal_numpy(smollm2):
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    msgs = [{"role": "user", "content": "Name a fruit."}]
    r = smollm2.create_chat_completion(msgs, max_tokens=10, temperature=0, logprobs=True, top_logprobs=4)
    ChatCompletion.model_validate(r)
    content = r["choices"][0]["logprobs"]["content"]
    prompt = smollm2.chat_template(msgs, tokenize=True)
    ids = [t.id for t in smollm2.generate(prompt, 10)]
    assert len(content) == len(ids)
    for e, tok, row in zip(content, ids, replay(smollm2, prompt, ids)):
        assert e["bytes"] == list(smollm2.token_bytes(tok)) and e["token"] == bytes(e["bytes"]).decode("utf-8", "replace")
        assert abs(e["logprob"] - row[tok]) < 1e-9
        assert [bytes(t["bytes"]) for t in e["top_logprobs"]] == [smollm2.token_bytes(i) for i in top_ids(row, 4)]
        assert all(abs(t["logprob"] - row[i]) < 1e-9 for t, i in zip(e["top_logprobs"], top_ids(row, 4)))
    chunks = list(smollm2.create_chat_completion(msgs, max_tokens=10, temperature=0, logprobs=True, stream=True))
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    got = [e["logprob"] for c in chunks if c["choices"][0]["logprobs"] for e in c["choices"][0]["logprobs"]["content"]]
    assert got == [e["logprob"] for e in content]
    assert r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    none = smollm2.create_chat_completion(msgs, max_tokens=2, temperature=0, logprobs=True)
    assert all(e["top_logprobs"] == [] for e in none["choices"][0]["logprobs"]["content"])
    with pytest.raises(ValueError, match="logprobs"):
        smollm2.create_chat_completion(msgs, max_tokens=2, top_logprobs=2)


def calls_of(reply):
    from openai.types.chat import ChatCompletion
    ChatCompletion.model_validate(reply)
    return reply["choices"][0]["message"].get("tool_calls") or []


def check_call(call):
    jsonschema = pytest.importorskip("jsonschema")
    assert call["type"] == "function" and re.fullmatch(r"call_\w+", call["id"])
    args = json.loads(call["function"]["arguments"])
    jsonschema.validate(args, SCHEMAS[call["function"]["name"]])
    return call["function"]["name"], args


def test_tool_choice_required_and_named(smollm2):
    r = smollm2.create_chat_completion(ASK, tools=TOOLS, tool_choice="required", template="smollm2", max_tokens=80,
                                       temperature=0)
    calls = calls_of(r)
    assert len(calls) == 1 and r["choices"][0]["finish_reason"] == "tool_calls"
    assert r["choices"][0]["message"]["content"] is None
    name, args = check_call(calls[0])
    assert name == "get_weather" and args["city"] == "Paris"
    for seed in (1, 2):  # sampled, still a valid call of the named tool
        r = smollm2.create_chat_completion([{"role": "user", "content": "What is 2 plus 3?"}], tools=TOOLS,
                                           tool_choice={"type": "function", "function": {"name": "add"}},
                                           template="smollm2", max_tokens=80, temperature=1.0, seed=seed)
        calls = calls_of(r)
        assert len(calls) == 1 and check_call(calls[0])[0] == "add"
    # the legacy functions / function_call names
    r = smollm2.create_chat_completion(ASK, functions=[t["function"] for t in TOOLS], function_call={"name": "add"},
                                       template="smollm2", max_tokens=80, temperature=0)
    assert check_call(calls_of(r)[0])[0] == "add"


def test_tool_call_streaming_equals_whole(smollm2):
    from openai.types.chat import ChatCompletionChunk
    kw = dict(tools=TOOLS, tool_choice="required", template="smollm2", max_tokens=80, temperature=0)
    whole = calls_of(smollm2.create_chat_completion(ASK, **kw))
    chunks = list(smollm2.create_chat_completion(ASK, stream=True, **kw))
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    deltas = [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert [d["index"] for d in deltas] == [0]
    assert deltas[0]["function"] == whole[0]["function"]
    assert not "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


def test_tool_choice_auto_and_a_conversation(smollm2):
    r = smollm2.create_chat_completion(ASK, tools=TOOLS, template="smollm2", max_tokens=60, temperature=0)
    for call in calls_of(r):  # the model may answer or call: either way the shapes hold
        check_call(call)
    if not calls_of(r):
        assert isinstance(r["choices"][0]["message"]["content"], str) and r["choices"][0]["finish_reason"] != "tool_calls"
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                             "arguments": '{"city": "Paris", "unit": "celsius"}'}}
    chat = ASK + [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees, sunny"}]
    text = smollm2.chat_template(chat, template="smollm2", tools=TOOLS)
    assert '"name": "get_weather"' in text and "18 degrees, sunny" in text and '"add"' in text
    r = smollm2.create_chat_completion(chat, tools=TOOLS, template="smollm2", max_tokens=30, temperature=0)
    calls_of(r)
    assert r["usage"]["prompt_tokens"] == len(smollm2.chat_template(chat, template="smollm2", tools=TOOLS,
                                                                    tokenize=True))
    # tool_choice "none": the tools are not rendered
    r = smollm2.create_chat_completion(ASK, tools=TOOLS, tool_choice="none", template="smollm2", max_tokens=4)
    assert r["usage"]["prompt_tokens"] == len(smollm2.chat_template(ASK, template="smollm2", tokenize=True))


def test_tool_errors(smollm2):
    with pytest.raises(statelm.UnsupportedError, match="no tool calls"):
        smollm2.create_chat_completion(ASK, tools=TOOLS, tool_choice="required", max_tokens=4)  # SmolLM2's own
    assert smollm2.tool_format() is None and smollm2.tool_format(template="smollm2") == "hermes"
    with pytest.raises(statelm.InvalidArgumentError, match="name"):
        smollm2.create_chat_completion(ASK, tools=[{"type": "function", "function": {}}], template="smollm2")
    with pytest.raises(statelm.InvalidArgumentError):
        smollm2.create_chat_completion(ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}},
                                       template="smollm2")
    with pytest.raises(ValueError, match="needs a non-empty tools"):
        smollm2.create_chat_completion(ASK, tool_choice="required")
    with pytest.raises(ValueError, match="one of"):
        smollm2.create_chat_completion(ASK, tools=TOOLS, tool_choice="required", template="smollm2",
                                       response_format={"type": "json_object"})
    with pytest.raises(statelm.UnsupportedError, match="image_url"):
        smollm2.create_chat_completion([{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:,"}}]}])


def test_content_parts_render_as_text(smollm2):
    parts = [{"role": "user", "content": [{"type": "text", "text": "What is the weather "},
                                          {"type": "text", "text": "in Paris right now?"}]}]
    a = smollm2.create_chat_completion(parts, max_tokens=6, temperature=0)
    b = smollm2.create_chat_completion(ASK, max_tokens=6, temperature=0)
    assert a["usage"] == b["usage"] and a["choices"][0]["message"] == b["choices"][0]["message"]


def test_response_format(smollm2):
    jsonschema = pytest.importorskip("jsonschema")
    from openai.types.chat import ChatCompletion
    msgs = [{"role": "user", "content": "Give a JSON object with a cat's name and age."}]
    r = smollm2.create_chat_completion(msgs, response_format={"type": "json_object"}, max_tokens=120, temperature=0)
    ChatCompletion.model_validate(r)
    assert r["choices"][0]["finish_reason"] == "stop"
    assert isinstance(json.loads(r["choices"][0]["message"]["content"]), dict)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 24},
                                               "legs": {"type": "integer", "minimum": 0, "maximum": 8},
                                               "colors": {"type": "array", "items": {"type": "string", "maxLength": 12},
                                                          "maxItems": 3}},
              "required": ["name", "legs", "colors"], "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "cat", "schema": schema, "strict": True}}
    for seed in (None, 7):
        kw = dict(temperature=0) if seed is None else dict(temperature=1.0, seed=seed)
        r = smollm2.create_chat_completion(msgs, response_format=rf, max_tokens=160, **kw)
        assert r["choices"][0]["finish_reason"] == "stop"
        jsonschema.validate(json.loads(r["choices"][0]["message"]["content"]), schema)
    chunks = smollm2.create_chat_completion(msgs, response_format=rf, max_tokens=160, temperature=0, stream=True)
    jsonschema.validate(json.loads("".join(c["choices"][0]["delta"].get("content", "") for c in chunks)), schema)
    # llama-server's json_object with a schema; llama-cpp-python's grammar= (GBNF)
    r = smollm2.create_chat_completion(msgs, response_format={"type": "json_object", "schema": schema}, max_tokens=160,
                                       temperature=0)
    jsonschema.validate(json.loads(r["choices"][0]["message"]["content"]), schema)
    r = smollm2.create_chat_completion(msgs, grammar='root ::= "meow" ("!" | "?")', max_tokens=10)
    assert re.fullmatch(r"meow[!?]", r["choices"][0]["message"]["content"])
    c = smollm2.create_completion("A cat says", grammar=statelm.Grammar('root ::= " meow" | " purr"'), max_tokens=6)
    assert c["choices"][0]["text"] in (" meow", " purr") and c["choices"][0]["finish_reason"] == "stop"
    with pytest.raises(ValueError, match="response_format"):
        smollm2.create_chat_completion(msgs, response_format={"type": "yaml"})
    with pytest.raises(statelm.StatelmError):
        smollm2.create_chat_completion(msgs, response_format={"type": "json_schema", "json_schema": {
            "schema": {"type": "object", "properties": {"a": {"$ref": "http://example.com/x"}}}}})


# ---- embeddings

def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def test_embeddings_equal_transformers_hidden_states():
    """The tiny qwen3 (no pooling_type: last): transformers' final-norm hidden states. 3e-3
    relative: the session's KV is f16 (tests/py/test_serve_embeddings.py measures the same)."""
    g = json.loads((DATA / "tiny" / "qwen3" / "golden" / "embed.json").read_text())
    ids = np.fromfile(DATA / "tiny" / "qwen3" / "golden" / "ids.i32", dtype="<i4").tolist()
    hidden = np.fromfile(DATA / "tiny" / "qwen3" / "golden" / "hidden.f32", dtype="<f4").reshape(len(ids), -1)
    with statelm.Model(tiny_path("qwen3")) as m:
        r = m.create_embedding(g["text"])
        assert set(r) == {"object", "data", "model", "usage"} and r["object"] == "list" and r["model"] == m.path
        assert r["data"][0]["object"] == "embedding" and r["data"][0]["index"] == 0
        assert r["usage"] == {"prompt_tokens": len(g["text_ids"]), "total_tokens": len(g["text_ids"])}
        assert rel_err(r["data"][0]["embedding"], g["text_pooled"]["l2"]["last"]) < 3e-3
        assert abs(np.linalg.norm(r["data"][0]["embedding"]) - 1) < 1e-5
        assert rel_err(m.embed(g["text"]), g["text_pooled"]["raw"]["last"]) < 3e-3  # normalize=False by default
        two, n = m.embed([g["text"], "Hello"], normalize=True, return_count=True)
        assert len(two) == 2 and two[0] == r["data"][0]["embedding"] and n == len(g["text_ids"]) + len(m.tokenize("Hello"))
        with statelm.Session(m, embeddings=True, n_ctx=64) as s:
            rows = s.embed(ids, pooling="none", normalize=False)
            assert len(rows) == len(ids) and rel_err(rows, hidden) < 3e-3
            s.reset()
            assert rel_err(s.embed(ids, pooling="mean", normalize=False), g["pooled"]["raw"]["mean"]) < 3e-3
            with pytest.raises(statelm.InvalidArgumentError, match="pooling"):
                s.embed(ids, pooling="max")
        with statelm.Session(m, n_ctx=64) as s:
            with pytest.raises(statelm.UnsupportedError):
                s.embed(ids)


class Serve:
    """`statelm serve -m MODEL --port 0 ARGS` while the with-block runs."""

    def __init__(self, cli, model, *args):
        self.p = subprocess.Popen([cli, "serve", "-m", model, "--port", "0", "-t", "1", *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = []
        t = threading.Thread(target=lambda: line.append(self.p.stdout.readline()), daemon=True)
        t.start()
        t.join(60)
        m = re.search(rb"http://(127\.0\.0\.1|\[::1\]):(\d+)", line[0]) if line else None
        if not m:
            self.p.kill()
            pytest.fail("statelm serve did not start")
        self.url = f"http://{m.group(1).decode()}:{m.group(2).decode()}"

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.p.terminate()
        self.p.wait(30)


@pytest.mark.parametrize("which", ["qwen3", "smollm2"])
def test_embeddings_equal_the_servers(request, statelm_cli, which):
    model = request.getfixturevalue("smollm2") if which == "smollm2" else request.getfixturevalue("models")["qwen3"]
    texts = ["The quick brown fox jumps over the lazy dog.", "Hello", "<|im_start|>user"]
    mine = model.create_embedding(texts)
    with Serve(statelm_cli, os.fspath(model.path), "--embeddings", "-c", "256") as srv:
        theirs = srv.post("/v1/embeddings", {"input": texts, "encoding_format": "float"})
    assert mine["usage"] == theirs["usage"]
    for a, b in zip(mine["data"], theirs["data"]):
        assert a["index"] == b["index"] and rel_err(a["embedding"], b["embedding"]) < 1e-5
