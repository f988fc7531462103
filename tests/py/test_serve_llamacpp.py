#!/usr/bin/env python3
"""llama-server's request shapes and utility endpoints in `statelm serve` (issue 37 items 3 and 6,
docs/serve.md), on the tiny qwen3 model served with --chat-template chatml:

- the paths without /v1 (/chat/completions, /models, /embeddings) answer as the /v1 ones, and
  /completions as llama-server's /completion; the openai client with a base URL lacking /v1 works;
- X-Api-Key is accepted as the key (Anthropic's header), a wrong one is 401;
- message content as a list of text parts equals the parts joined with "\\n" (same greedy answer);
  an image_url part is refused, named;
- assistant prefill: a trailing assistant message is continued: the greedy answer equals that of
  /completion on the prompt /apply-template returns, and /apply-template's text is ChatML written
  out by hand with the prefill appended;
- /completion (llama.cpp's native shape): content, stop, tokens_predicted/evaluated, stop_type
  limit/eos, timings, completion_probabilities with n_probs (top entries sorted, the chosen token
  first at temperature 0), return_tokens; streamed: objects with stop false then one with stop
  true and timings, no [DONE]; the streamed text equals the whole answer;
- /tokenize with and without pieces: the pieces' bytes (string or byte list) spell the content;
  add_special adds BOS; /detokenize gives the content back;
- reasoning_format per request: none keeps a <think> part in the content, the default splits it;
- timings in chat answers; a context overflow's error carries n_prompt_tokens and n_ctx;
- /props: total_slots, n_ctx, the sampling defaults, the chat template;
- the template variables date_string and datetime are today's date in llama.cpp's formats (written
  with Python's strftime), a chat_template_kwargs key of the same name wins;
- GET /slots: one entry per slot (id, n_ctx, is_processing false when idle);
- "verbose": __verbose holds the answer in /completion's shape, its prompt the text /apply-template
  gives; continue_final_message and add_generation_prompt as llama-server checks them;
- /metrics: llama-server's llamacpp:* lines (HELP, TYPE), Process-Start-Time-Unix; the prompt,
  cached and predicted counters move by the sums of the requests' timings; a 1-token answer's
  predicted_per_second is 0 (its token came from the prefill);
- bad input: a 4xx with a message on each new endpoint.
Usage: test_serve_llamacpp.py STATELM TESTS_DATA_DIR."""
import datetime
import json
import re
import sys
import time
from pathlib import Path

try:
    import openai
except ImportError as e:
    print(f"SKIPPED: {e.name} is not importable (scripts/test.sh installs it into the test venv)")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
import serve_harness  # noqa: E402 (after the openai check)
from serve_harness import check, failures  # noqa: E402

MODEL = data / "tiny" / "qwen3" / "qwen3-f32.gguf"
srv = serve_harness.Server(statelm, MODEL, "--chat-template", "chatml", "-c", "256", "--parallel", "2",
                           "--api-key", "x", "--seed", "7", key="x", timeout=120)


def post(path, body, **kw):
    status, _, text = srv.request("POST", path, body, **kw)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def greedy(extra):
    return {"temperature": 0, "max_tokens": 12, **extra}


try:
    # ---- paths without /v1, the openai client on them ----
    ask = greedy({"messages": [{"role": "user", "content": "hello there"}]})
    s1, a1 = post("/v1/chat/completions", ask)
    s2, a2 = post("/chat/completions", ask)
    check(s1 == 200 and s2 == 200, f"chat with and without /v1: {s1} {s2}")
    check(a1["choices"][0]["message"] == a2["choices"][0]["message"], "/chat/completions answers as /v1/chat/completions")
    check("timings" in a1 and a1["timings"]["predicted_n"] == a1["usage"]["completion_tokens"],
          f"chat answer timings: {a1.get('timings')}")
    s, m = srv.request("GET", "/models")[0], srv.post(None, "/models", method="GET")[1]
    check(s == 200 and m["data"][0]["id"] == srv.model, f"/models: {m}")
    s, nc = post("/completions", {"prompt": "a b", "n_predict": 2})
    check(s == 200 and nc.get("stop") is True and "content" in nc, f"/completions is llama-server's native shape: {s} {nc}")
    s, e = post("/embeddings", {"input": "x"})
    check(s == 404 and e["error"]["code"] == "embeddings_disabled", f"/embeddings without --embeddings: {s} {e}")
    bare = openai.OpenAI(base_url=srv.url, api_key=srv.key, max_retries=0, timeout=120)
    r = bare.chat.completions.create(model="m", **ask)
    check(r.choices[0].message.content == a1["choices"][0]["message"]["content"], "openai client without /v1")

    # ---- X-Api-Key ----
    s, _, _ = srv.request("GET", "/v1/models", key=None, headers={"X-Api-Key": srv.key})
    check(s == 200, f"X-Api-Key accepted: {s}")
    s, _, _ = srv.request("GET", "/v1/models", key=None, headers={"X-Api-Key": "wrong"})
    check(s == 401, f"a wrong X-Api-Key: {s}")

    # ---- content parts ----
    parts = greedy({"messages": [{"role": "user", "content": [{"type": "text", "text": "hello"},
                                                               {"type": "text", "text": "there"}]}]})
    joined = greedy({"messages": [{"role": "user", "content": "hello\nthere"}]})
    sp, ap = post("/v1/chat/completions", parts)
    sj, aj = post("/v1/chat/completions", joined)
    check(sp == 200 and ap["choices"][0]["message"] == aj["choices"][0]["message"] and
          ap["usage"]["prompt_tokens"] == aj["usage"]["prompt_tokens"], "text parts = parts joined with a newline")
    s, e = post("/v1/chat/completions", greedy({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": "data:,"}}]}]}))
    check(s == 400 and "image_url" in e["error"]["message"], f"an image_url part refused by name: {s} {e}")

    # ---- assistant prefill ----
    conv = [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "The colour is"}]
    s, t = post("/apply-template", {"messages": conv})
    want = "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\nThe colour is"
    check(s == 200 and t.get("prompt") == want, f"/apply-template with a prefill: {t}")
    s, t2 = post("/apply-template", {"messages": conv[:1]})
    check(s == 200 and t2.get("prompt") == "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n",
          f"/apply-template: {t2}")
    s, pc = post("/v1/chat/completions", greedy({"messages": conv}))
    s2, nc = post("/completion", {"prompt": want, "n_predict": 12, "temperature": 0})
    check(s == 200 and s2 == 200 and pc["choices"][0]["message"]["content"] == nc["content"],
          f"a prefilled chat continues the text: {pc['choices'][0]['message']} vs {nc.get('content')!r}")

    # ---- reasoning_format per request (the server's default: deepseek) ----
    think = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 30, "temperature": 0,
             "grammar": 'root ::= "<think>" "ab" "</think>" "cd"'}
    s, d = post("/v1/chat/completions", think)
    s2, n = post("/v1/chat/completions", {**think, "reasoning_format": "none"})
    check(s == 200 and d["choices"][0]["message"].get("reasoning_content") == "ab" and
          d["choices"][0]["message"]["content"] == "cd", f"deepseek split: {d}")
    check(s2 == 200 and n["choices"][0]["message"]["content"] == "<think>ab</think>cd" and
          "reasoning_content" not in n["choices"][0]["message"], f"reasoning_format none: {n}")
    s, e = post("/v1/chat/completions", {**think, "reasoning_format": "sometimes"})
    check(s == 400 and "'reasoning_format'" in e["error"]["message"], f"a bad reasoning_format: {s} {e}")

    # ---- /completion ----
    s, c = post("/completion", {"prompt": "one two three", "n_predict": 5, "temperature": 0, "n_probs": 3,
                                "return_tokens": True, "ignore_eos": True})
    check(s == 200, f"/completion: {s} {c}")
    check(c["stop"] is True and c["tokens_predicted"] == 5 and c["stop_type"] == "limit" and
          c["tokens_evaluated"] > 0 and len(c["tokens"]) == 5 and "timings" in c, f"/completion fields: {c}")
    probs = c["completion_probabilities"]
    check(len(probs) == 5 and all(len(p["top_logprobs"]) == 3 for p in probs), "n_probs: 3 alternatives per token")
    check(all(p["id"] == p["top_logprobs"][0]["id"] and
              [t["logprob"] for t in p["top_logprobs"]] == sorted((t["logprob"] for t in p["top_logprobs"]), reverse=True)
              for p in probs), "greedy: the chosen token heads its alternatives, sorted")
    check([p["id"] for p in probs] == c["tokens"], "completion_probabilities ids = tokens")
    spelled = b"".join(bytes(p["bytes"]) for p in probs).decode("utf-8", "replace")
    check(spelled == c["content"], f"the tokens' bytes spell the content: {spelled!r} vs {c['content']!r}")
    body = srv.curl({"prompt": "one two three", "n_predict": 5, "temperature": 0, "stream": True,
                     "ignore_eos": True}, path="/completion").decode()
    events = [json.loads(x[6:]) for x in body.split("\n\n") if x.startswith("data: ")]
    check("[DONE]" not in body, "/completion streams end without [DONE]")
    check(events and events[-1]["stop"] is True and "timings" in events[-1] and
          all(e["stop"] is False for e in events[:-1]), f"stream: stop false then true: {body[-300:]}")
    check("".join(e["content"] for e in events) == c["content"], "streamed text = the whole answer")
    check(c["generation_settings"]["n_predict"] == 5 and c["generation_settings"]["n_probs"] == 3 and
          isinstance(c["prompt"], str) and c["prompt"].endswith("one two three"), f"generation_settings, prompt: {c}")
    s, rf = post("/completion", {"prompt": {"prompt_string": "one two three"}, "n_predict": 5, "temperature": 0,
                                 "ignore_eos": True, "response_fields": ["content", "generation_settings/n_predict"]})
    check(s == 200 and rf == {"content": c["content"], "generation_settings/n_predict": 5}, f"response_fields: {rf}")
    # --seed: requests without a seed sample alike
    hot = {"prompt": "one two", "n_predict": 8, "temperature": 1.0, "ignore_eos": True}
    check(post("/completion", hot)[1]["content"] == post("/completion", hot)[1]["content"], "--seed: the same sample")
    # a text logit_bias bans the text's tokens (llama-server's list form and text keys)
    s, plain = post("/completion", {"prompt": "one two three", "n_predict": 6, "temperature": 0, "ignore_eos": True,
                                    "return_tokens": True})
    first = plain["tokens"][0]
    s, piece = post("/detokenize", {"tokens": [first]})
    for lb in ([[piece["content"], False]], {piece["content"]: -100}, [[first, -100]]):
        s, b = post("/completion", {"prompt": "one two three", "n_predict": 6, "temperature": 0, "ignore_eos": True,
                                    "return_tokens": True, "logit_bias": lb})
        check(s == 200 and first not in b["tokens"], f"logit_bias {lb}: {s} {b.get('tokens')}")
    s, c0 = post("/completion", {"prompt": "one", "n_predict": -1, "temperature": 0, "stop": ["\n"]})
    check(s == 200 and c0["stop_type"] in ("eos", "word", "limit"), f"n_predict -1: {s}")

    # ---- /tokenize, /detokenize ----
    text = "Hello world, unicode 媽 and emoji 🤗"
    s, tk = post("/tokenize", {"content": text})
    check(s == 200 and all(isinstance(i, int) for i in tk["tokens"]), f"/tokenize: {tk}")
    s, tp = post("/tokenize", {"content": text, "with_pieces": True})
    spelled = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in tp["tokens"])
    check(s == 200 and [p["id"] for p in tp["tokens"]] == tk["tokens"] and spelled == text.encode(),
          f"with_pieces: ids equal, pieces spell the text: {spelled!r}")
    s, dt = post("/detokenize", {"tokens": tk["tokens"]})
    check(s == 200 and dt["content"] == text, f"/detokenize: {dt}")
    s, tb = post("/tokenize", {"content": "Hi", "add_special": True})
    props = srv.post(None, "/props", method="GET")[1]
    check(s == 200, f"add_special: {tb}")

    # ---- /props ----
    check(props["total_slots"] == 2 and props["default_generation_settings"]["n_ctx"] == 256 and
          abs(props["default_generation_settings"]["params"]["temperature"] - 0.8) < 1e-6 and
          props["chat_template_name"] == "chatml", f"/props: {props}")

    # ---- context overflow ----
    s, e = post("/v1/completions", {"prompt": "word " * 400, "max_tokens": 2})
    err = e.get("error", {}) if isinstance(e, dict) else {}
    check(s == 400 and err.get("code") == "context_length_exceeded" and err.get("n_ctx") == 256 and
          err.get("n_prompt_tokens", 0) > 256, f"context overflow fields: {s} {e}")

    # ---- "verbose": __verbose, /completion's answer, its prompt the text /apply-template gives ----
    msgs = [{"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}]
    s, v = post("/chat/completions", greedy({"messages": msgs, "verbose": True, "max_tokens": 2}))
    s2, at = post("/apply-template", {"messages": msgs})
    check(s == 200 and s2 == 200 and v.get("__verbose", {}).get("prompt") == at["prompt"] and
          v["__verbose"]["content"] == v["choices"][0]["message"]["content"], f"__verbose: {s} {v.get('__verbose')}")
    s, v = post("/chat/completions", greedy({"messages": msgs, "verbose": False, "max_tokens": 2}))
    check(s == 200 and "__verbose" not in v, f"verbose false: {v.keys()}")
    # continue_final_message needs add_generation_prompt false; add_generation_prompt false renders without it
    pre = msgs + [{"role": "assistant", "content": "The"}]
    s, a = post("/apply-template", {"messages": pre, "add_generation_prompt": False, "continue_final_message": True})
    check(s == 200 and a["prompt"].endswith("<|im_start|>assistant\nThe"), f"continue_final_message: {s} {a}")
    s, a = post("/chat/completions", greedy({"messages": pre, "continue_final_message": True}))
    check(s == 400 and "cannot both be true" in a["error"]["message"], f"continue_final_message alone: {s} {a}")
    s, a = post("/apply-template", {"messages": msgs, "add_generation_prompt": False})
    check(s == 200 and a["prompt"].endswith("What is the best book<|im_end|>\n"), f"add_generation_prompt false: {a}")

    # a stream's usage chunk carries the timings
    raw = srv.curl(greedy({"messages": msgs, "stream": True, "stream_options": {"include_usage": True}}))
    evs = [json.loads(l[6:]) for l in raw.decode().splitlines() if l.startswith("data: {")]
    last = evs[-1] if evs else {}
    check(last.get("choices") == [] and last.get("timings", {}).get("predicted_n") == last.get("usage", {}).get(
        "completion_tokens"), f"usage chunk timings: {last}")

    # ---- llama.cpp's template variables date_string and datetime: today, under chat_template_kwargs ----
    one = [{"role": "user", "content": "x"}]
    tmpl = "{{ date_string }}|{{ datetime }}"
    today = datetime.date.today()
    s, a = post("/apply-template", {"messages": one, "chat_template": tmpl})
    check(s == 200 and a["prompt"] in (f"{d.strftime('%d %b %Y')}|{d.strftime('%b %d %Y')}"
                                       for d in (today, today + datetime.timedelta(days=1))),
          f"date_string, datetime: {s} {a}")
    s, a = post("/apply-template", {"messages": one, "chat_template": tmpl, "chat_template_kwargs": {"date_string": "D"}})
    check(s == 200 and a["prompt"].startswith("D|"), f"date_string from chat_template_kwargs: {s} {a}")

    # ---- GET /slots: each slot's state (busy slots: test_engine's slm_engine_slots and py_test_serve_models) ----
    s, sl = srv.post(None, "/slots", method="GET")
    check(s == 200 and [x["id"] for x in sl] == [0, 1] and all(x["n_ctx"] == 256 and x["is_processing"] is False
                                                              for x in sl), f"GET /slots idle: {s} {sl}")

    # ---- llama-server's metrics: llamacpp:* counters move with the requests' timings ----
    def lc_metrics():
        st, hdr, body = srv.request("GET", "/metrics")
        text = body.decode()
        vals = {k: float(v) for k, v in re.findall(r"^llamacpp:(\w+) (\S+)$", text, re.M)}
        typed = set(re.findall(r"^# TYPE llamacpp:(\w+) (?:counter|gauge)$", text, re.M))
        helped = set(re.findall(r"^# HELP llamacpp:(\w+) ", text, re.M))
        check(st == 200 and set(vals) == typed == helped and len(vals) == 15, f"/metrics llamacpp lines: {sorted(vals)}")
        return vals, hdr
    m0, hdr = lc_metrics()
    started = float(hdr.get("Process-Start-Time-Unix", "nan"))
    check(0 < time.time() - started < 3600, f"Process-Start-Time-Unix: {hdr.get('Process-Start-Time-Unix')}")
    sums = {"prompt_n": 0, "cache_n": 0, "predicted_n": 0}
    for n_predict in (1, 5, 5):
        s, c = post("/completion", {"prompt": "one two three four", "n_predict": n_predict, "ignore_eos": True,
                                    "temperature": 0})
        for k in sums:
            sums[k] += c["timings"][k]
        if n_predict == 1:  # one token comes from the prefill: no decode step to time
            check(c["timings"]["predicted_per_second"] == 0, f"n_predict 1: timings {c['timings']}")
    m1, _ = lc_metrics()
    check(m1["prompt_tokens_total"] - m0["prompt_tokens_total"] == sums["prompt_n"] and
          m1["prompt_tokens_cached_total"] - m0["prompt_tokens_cached_total"] == sums["cache_n"] and sums["cache_n"] > 0 and
          m1["tokens_predicted_total"] - m0["tokens_predicted_total"] == sums["predicted_n"] == 11 and
          m1["n_decode_total"] - m0["n_decode_total"] >= 1 + 4 + 4 and m1["requests_processing"] == 0,
          f"llamacpp counters {m0} -> {m1}, timings {sums}")

    # ---- bad input ----
    for path, body, what in [
        ("/tokenize", {"content": 5}, "'content'"),
        ("/tokenize", {"content": "x", "with_pieces": "yes"}, "'with_pieces'"),
        ("/detokenize", {"tokens": [1, -1]}, "tokens[1]"),
        ("/detokenize", {"tokens": "x"}, "'tokens'"),
        ("/apply-template", {"messages": "x"}, "'messages'"),
        ("/completion", {"prompt": "x", "n_probs": 99}, "'n_probs'"),
        ("/completion", {"n_predict": 3}, "'prompt'"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "a"},
                                               {"role": "assistant", "content": "b"}]}, "two assistant messages"),
    ]:
        s, e = post(path, body)
        msg = e.get("error", {}).get("message", "") if isinstance(e, dict) else ""
        check(400 <= s < 500 and what in msg, f"{path} {body}: {s} {e}")
    s, _, _ = srv.request("POST", "/tokenize", raw=b"{not json")
    check(s == 400, f"/tokenize malformed JSON: {s}")
    s, _, _ = srv.request("GET", "/tokenize")
    check(s == 405, f"GET /tokenize: {s}")
finally:
    srv.stop()

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
