#!/usr/bin/env python3
"""Control tokens in `statelm serve`'s answers (docs/serve.md "Tools") and a request's own template's
limits (docs/jinja.md "Limits"), on a variant of the tiny qwen3 model whose vocabulary holds
Mistral's "[TOOL_CALLS]" and "[ARGS]" as control tokens (ids 3 and 4, renamed from
<|startoftext|> and <|pad|>), served with a small template in the mistral-args call format:

- the answer forced (logit_bias) to be the control token [TOOL_CALLS]: with tools its text is in the
  answer the call parser reads (no well-formed call follows, so it is the content, as the parser
  says); with tool_choice "none" (no call markers kept) and without tools it is dropped, as every
  other control token;
- a request whose chat_template loops is refused with a 400 naming the limit, within seconds.
Usage: test_serve_control_tokens.py STATELM TESTS_DATA_DIR."""
import json
import sys
import tempfile
import time
from pathlib import Path

try:
    import gguf
    import openai  # noqa: F401 (serve_harness uses it)
except ImportError as e:
    print(f"SKIPPED: {e.name} is not importable (scripts/test.sh installs it into the test venv)")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
import serve_harness  # noqa: E402 (after the openai check)
from gguf_edit import copy_gguf  # noqa: E402
from serve_harness import check, failures  # noqa: E402

SRC = data / "tiny" / "qwen3" / "qwen3-f32.gguf"
TEMPLATE = ("{% for m in messages %}[INST]{{ m.content }}[/INST]{% endfor %}"
            "{# calls: [TOOL_CALLS]name[ARGS]{...} #}")
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
ASK = [{"role": "user", "content": "Hi"}]

r = gguf.GGUFReader(str(SRC))
f = r.fields["tokenizer.ggml.tokens"]
tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
t = r.fields["tokenizer.ggml.token_type"]
types = [int(t.parts[i][0]) for i in t.data]
assert types[3] == types[4] == gguf.TokenType.CONTROL, "the tiny vocabulary changed: ids 3 and 4 are not control tokens"
tokens[3], tokens[4] = "[TOOL_CALLS]", "[ARGS]"

with tempfile.TemporaryDirectory() as tmp:
    model, tmpl = Path(tmp) / "mistral-vocab.gguf", Path(tmp) / "mistral.jinja"
    copy_gguf(SRC, model, drop=("tokenizer.ggml.tokens", "tokenizer.chat_template"),
              add=(("tokenizer.ggml.tokens", tokens, gguf.GGUFValueType.ARRAY),))
    tmpl.write_text(TEMPLATE)
    s = serve_harness.Server(statelm, model, "--chat-template-file", str(tmpl))
    try:
        bias = {"logit_bias": {"3": 100}}
        answer = {}
        for label, extra in (("tools", {"tools": TOOLS}), ("tool_choice none", {"tools": TOOLS, "tool_choice": "none"}),
                             ("no tools", {})):
            status, body = s.post({"messages": ASK, "max_tokens": 1, "temperature": 0, **bias, **extra},
                                  "/v1/chat/completions")
            check(status == 200, f"{label}: {status} {body}")
            answer[label] = body["choices"][0]["message"] if status == 200 else {}
        check(answer["tools"].get("content") == "[TOOL_CALLS]" and not answer["tools"].get("tool_calls"),
              f"with tools the call marker's text is kept for the parser: {answer['tools']}")
        for label in ("tool_choice none", "no tools"):
            check(answer[label].get("content") == "", f"{label}: a control token is not text: {answer[label]}")
        # a request's own template that loops: refused at a limit, quickly
        loop = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        t0 = time.time()
        status, body = s.post({"messages": ASK, "max_tokens": 1, "chat_template": loop}, "/v1/chat/completions")
        took = time.time() - t0
        check(status == 400 and "limit" in json.dumps(body) and took < 10,
              f"a looping chat_template: {status} after {took:.1f} s: {body}")
    finally:
        s.stop("control-token server")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
