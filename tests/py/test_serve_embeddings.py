#!/usr/bin/env python3
"""`statelm serve --embeddings` (issue 25 item 5) with the official `openai` client
(`client.embeddings.create`) against transformers' hidden states of the tiny models
(tests/data/tiny/<arch>/golden/hidden.f32 and embed.json, scripts/gen_embed_golden.py):

- qwen3 (default pooling: last, no pooling_type in the GGUF): the 43 golden ids as one token-id
  input (the client's default base64 encoding, and "float"), a batch of two id lists (the 11-id
  prefix's vector is row 10 of the golden: causal), the golden text as a string and a batch of
  strings (the tokenizer's ids: usage counts them), in one request each; llama-server's input
  shapes ({"prompt_string"}, {"content": [text parts]}, ids with strings among them) embed as the
  text they spell; usage.prompt_tokens and
  total_tokens are the token counts; the vectors have unit norm;
- --pooling mean on lfm2, cls on gemma3, none on qwen35 (one vector per token), last on llama;
- a GGUF whose <arch>.pooling_type is 1 (mean) is served with mean pooling, one whose pooling_type
  is 4 (rank) is refused at start naming it, unless --pooling is given;
- errors are 4xx with OpenAI codes: empty input, an empty string, too many inputs (naming the
  limit), an input longer than the context (context_length_exceeded), ids out of range,
  dimensions other than the model's, a bad encoding_format, inputs of none of llama-server's
  shapes, content parts other than text; without --embeddings
  the endpoint is 404 saying how to enable it; GET is 405;
- embedding requests leave the chat slots' cached state alone: turn 2 of a chat reuses turn 1
  (cached_tokens) although embeddings ran in between, and greedy answers are unchanged.

Tolerance 3e-3 relative (max|a-b| / max|b|): the server's KV states are f16, which rounds every
key and value to 11 significant bits (4.9e-4 relative); measured 4e-5 to 8e-4 over the five tiny
models and four poolings. A wrong pooling, a missing final norm or a skipped normalisation is off
by more than 0.1. Skipped (77) only when openai or numpy is missing.
Usage: test_serve_embeddings.py STATELM TESTS_DATA_DIR."""
import base64
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

try:
    import numpy as np
    import openai
except ImportError as exc:
    print(f"SKIPPED: {exc.name} is not importable (scripts/test.sh installs it into the test venv)")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
TOL = 3e-3
CTX = 64
import serve_harness  # noqa: E402 (after the openai and numpy checks)
from serve_harness import check, failures  # noqa: E402


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b))) if a.shape == b.shape else float("inf")


def Server(model, *args):
    return serve_harness.Server(statelm, model, "-c", str(CTX), *args, timeout=60)


def golden(arch):
    g = json.loads((data / "tiny" / arch / "golden" / "embed.json").read_text())
    ids = np.fromfile(data / "tiny" / arch / "golden" / "ids.i32", dtype="<i4").tolist()
    hidden = np.fromfile(data / "tiny" / arch / "golden" / "hidden.f32", dtype="<f4").reshape(len(ids), g["d_model"])
    return g, ids, hidden.astype(np.float64)


def unit(rows):
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def expect(what, got, want):
    err = rel_err(got, want)
    check(err <= TOL, f"{what}: relative error {err:.3g} > {TOL}")


def default_pooling_test():
    g, ids, hidden = golden("qwen3")
    s = Server(data / "tiny" / "qwen3" / "qwen3-f32.gguf", "--embeddings")
    try:
        c = s.api
        r = c.embeddings.create(model="any-name", input=ids)  # the client asks for base64 and decodes it
        expect("qwen3 ids, base64", r.data[0].embedding, g["pooled"]["l2"]["last"])
        check(abs(np.linalg.norm(r.data[0].embedding) - 1) < 1e-5, "qwen3: the vector is not unit-norm")
        check((r.usage.prompt_tokens, r.usage.total_tokens) == (43, 43), f"qwen3 ids: usage {r.usage}")
        check(r.object == "list" and r.data[0].object == "embedding" and r.data[0].index == 0, f"qwen3: shape {r}")
        check(r.model == "qwen3-f32.gguf", f"qwen3: model {r.model}")
        f = c.embeddings.create(model="x", input=ids, encoding_format="float")
        as_f32 = np.array(f.data[0].embedding, dtype=np.float32)  # "float" prints 9 digits: float32 exactly
        check(np.array_equal(as_f32, np.array(r.data[0].embedding, dtype=np.float32)),
              "qwen3: float and base64 encodings differ")
        raw = s.post({"input": ids, "encoding_format": "base64"}, "/v1/embeddings")[1]["data"][0]["embedding"]
        check(np.array_equal(np.frombuffer(base64.b64decode(raw), dtype="<f4"), as_f32),
              "qwen3: base64 is not the float32 little-endian bytes of the float answer")
        r = c.embeddings.create(model="x", input=[ids[:11], ids], encoding_format="float")
        check([d.index for d in r.data] == [0, 1], f"qwen3 batch: indices {[d.index for d in r.data]}")
        expect("qwen3 batch of ids [0]: row 10", r.data[0].embedding, unit(hidden[10]))
        expect("qwen3 batch of ids [1]", r.data[1].embedding, g["pooled"]["l2"]["last"])
        check((r.usage.prompt_tokens, r.usage.total_tokens) == (54, 54), f"qwen3 batch: usage {r.usage}")
        r = c.embeddings.create(model="x", input=g["text"])
        expect("qwen3 text", r.data[0].embedding, g["text_pooled"]["l2"]["last"])
        check(r.usage.prompt_tokens == len(g["text_ids"]), f"qwen3 text: usage {r.usage}, want {len(g['text_ids'])}")
        r = c.embeddings.create(model="x", input=[g["text"], "Hello", g["text"]])
        expect("qwen3 batch of strings [0]", r.data[0].embedding, g["text_pooled"]["l2"]["last"])
        check(list(r.data[2].embedding) == list(r.data[0].embedding), "qwen3 batch of strings: equal inputs, different vectors")
        check(r.data[1].embedding != r.data[0].embedding, "qwen3 batch of strings: different inputs, equal vectors")
        # llama-server's input shapes: {"prompt_string"}, {"content": [text parts]} (joined as they are),
        # a list of ids with strings among them (one input: here the text's ids and an empty string)
        half = len(g["text"]) // 2
        shapes = [{"prompt_string": g["text"]},
                  {"content": [{"type": "text", "text": g["text"][:half]}, {"type": "text", "text": g["text"][half:]}]},
                  [*g["text_ids"], ""]]
        for shape in shapes:
            st, body = s.post({"input": shape, "encoding_format": "float"}, "/v1/embeddings")
            check(st == 200 and len(body.get("data", [])) == 1, f"qwen3 {json.dumps(shape)[:50]}: {st} {body}")
            if st == 200:
                expect(f"qwen3 {json.dumps(shape)[:50]}", body["data"][0]["embedding"], g["text_pooled"]["l2"]["last"])
        st, body = s.post({"input": shapes, "encoding_format": "float"}, "/v1/embeddings")
        check(st == 200 and [d["index"] for d in body["data"]] == [0, 1, 2], f"qwen3 list of shapes: {st} {body}")
        models = json.loads(subprocess.run(["curl", "-s", s.url + "/v1/models"], capture_output=True).stdout)
        meta = models["data"][0]["meta"]
        check(meta.get("embeddings") is True and meta.get("pooling") == "last" and meta.get("n_embd") == 64,
              f"/v1/models meta {meta}")
        error_tests(s, ids)
    finally:
        s.stop("qwen3 --embeddings")


def error_tests(s, ids):
    long = [ids[i % len(ids)] for i in range(CTX + 1)]
    cases = [
        ({"input": []}, 400, "invalid_value", "empty list"),
        ({"input": ""}, 400, "invalid_value", "input is empty"),
        ({"input": [[1, 2], []]}, 400, "invalid_value", "input[1] is empty"),
        ({"input": ["a"] * 2049}, 400, "invalid_value", "limit is 2048"),
        ({"input": long}, 400, "context_length_exceeded", f"{CTX + 1} tokens"),
        ({"input": [[1], long]}, 400, "context_length_exceeded", "input[1]"),
        ({"input": [1, 2, 320]}, 400, "invalid_value", "input[2] is not a token id in [0, 320)"),
        ({"input": [[1, -1]]}, 400, "invalid_value", "input[0][1] is not a token id"),
        ({"input": [1.5]}, 400, "invalid_value", "input[0] is not a token id"),
        ({"input": ["a", {"x": 1}]}, 400, "invalid_type", "input[1] must be a string"),
        ({"input": {"content": "a"}}, 400, "invalid_type", "input.content must be a list"),
        ({"input": [{"content": [{"type": "unknown"}]}]}, 400, "invalid_value", "input[0].content[0] must be"),
        ({"input": {"content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}}, 400, "invalid_value",
         "'image_url' part"),
        ({"input": [1, "a", 2.5]}, 400, "invalid_value", "input[2] is not a token id"),
        ({"input": 7}, 400, "invalid_type", "'input' must be"),
        ({}, 400, "missing_required_parameter", "'input' must be"),
        ({"input": "a", "dimensions": 32}, 400, "invalid_value", "'dimensions' must be 64"),
        ({"input": "a", "encoding_format": "int8"}, 400, "invalid_value", "encoding_format"),
        ({"input": "a", "model": 3}, 400, "invalid_type", "'model' must be a string or null"),
    ]
    for body, want_status, want_code, want_msg in cases:
        status, reply = s.post(body, "/v1/embeddings")
        err = reply.get("error", {})
        check(status == want_status and err.get("code") == want_code and want_msg in err.get("message", ""),
              f"{json.dumps(body)[:60]}: {status} {err}; want {want_status} {want_code} '{want_msg}'")
    status, reply = s.post({"input": "a", "dimensions": 64}, "/v1/embeddings")
    check(status == 200, f"dimensions equal to the model's: {status} {reply}")
    status, reply = s.post(None, "/v1/embeddings", method="GET")
    check(status == 405 and reply["error"]["code"] == "method_not_allowed", f"GET /v1/embeddings: {status} {reply}")
    try:
        s.api.embeddings.create(model="x", input=[])
        check(False, "openai client: empty input raised nothing")
    except openai.BadRequestError as e:
        check(e.code == "invalid_value", f"openai client: empty input gave {e}")


def pooling_tests():
    for arch, pooling in (("lfm2", "mean"), ("gemma3", "cls"), ("llama", "last"), ("qwen35", "none")):
        g, ids, hidden = golden(arch)
        s = Server(data / "tiny" / arch / f"{arch}-f32.gguf", "--embeddings", "--pooling", pooling)
        try:
            if pooling == "none":
                r = s.api.embeddings.create(model="x", input=[ids[:5], ids], encoding_format="float")
                expect(f"{arch} none [0]", r.data[0].embedding, unit(hidden[:5]))
                expect(f"{arch} none [1]", r.data[1].embedding, unit(hidden))
                check(r.usage.prompt_tokens == 48, f"{arch} none: usage {r.usage}")
            else:
                r = s.api.embeddings.create(model="x", input=ids)
                expect(f"{arch} {pooling}", r.data[0].embedding, g["pooled"]["l2"][pooling])
                r = s.api.embeddings.create(model="x", input=g["text"])
                expect(f"{arch} {pooling} text", r.data[0].embedding, g["text_pooled"]["l2"][pooling])
                check(r.usage.total_tokens == len(g["text_ids"]), f"{arch} text: usage {r.usage}")
        finally:
            s.stop(f"{arch} --pooling {pooling}")


def gguf_pooling_type_test():
    try:
        import gguf
        from gguf_edit import copy_gguf
    except ImportError:
        check(False, "gguf_pooling_type_test needs the gguf package (scripts/requirements-test.txt)")
        return
    g, ids, _ = golden("qwen35")
    src = data / "tiny" / "qwen35" / "qwen35-f32.gguf"
    with tempfile.TemporaryDirectory() as tmp:
        mean, rank = Path(tmp) / "mean.gguf", Path(tmp) / "rank.gguf"
        copy_gguf(src, mean, add=[("qwen35.pooling_type", 1, gguf.GGUFValueType.UINT32)])
        copy_gguf(src, rank, add=[("qwen35.pooling_type", 4, gguf.GGUFValueType.UINT32)])
        s = Server(mean, "--embeddings")
        try:
            r = s.api.embeddings.create(model="x", input=ids)
            expect("qwen35 pooling_type 1", r.data[0].embedding, g["pooled"]["l2"]["mean"])
        finally:
            s.stop("qwen35 pooling_type 1")
        p = subprocess.run([statelm, "serve", "-m", str(rank), "--port", "0", "--embeddings"], capture_output=True,
                           timeout=60)
        check(p.returncode != 0 and b"pooling_type is 4 (rank)" in p.stderr and b"--pooling" in p.stderr,
              f"pooling_type 4: status {p.returncode}, stderr {p.stderr[-300:]!r}")
        s = Server(rank, "--embeddings", "--pooling", "cls")
        try:
            r = s.api.embeddings.create(model="x", input=ids)
            expect("qwen35 pooling_type 4, --pooling cls", r.data[0].embedding, g["pooled"]["l2"]["cls"])
        finally:
            s.stop("qwen35 pooling_type 4 --pooling cls")


def disabled_test():
    s = Server(data / "tiny" / "llama" / "llama-f32.gguf")
    try:
        status, reply = s.post({"input": "a"}, "/v1/embeddings")
        check(status == 404 and reply["error"]["code"] == "embeddings_disabled" and "--embeddings" in
              reply["error"]["message"], f"without --embeddings: {status} {reply}")
    finally:
        s.stop("llama without --embeddings")
    p = subprocess.run([statelm, "serve", "-m", str(data / "tiny" / "llama" / "llama-f32.gguf"), "--pooling", "mean"],
                       capture_output=True, timeout=60)
    check(p.returncode == 2 and b"--pooling needs --embeddings" in p.stderr, f"--pooling alone: {p.stderr!r}")
    p = subprocess.run([statelm, "serve", "-m", "x", "--embeddings", "--pooling", "rank"], capture_output=True,
                       timeout=60)
    check(p.returncode == 2 and b"--pooling rank" in p.stderr, f"--pooling rank: {p.stderr!r}")


def slots_untouched_test():
    """Chat turn 2 reuses turn 1's cached state although embedding requests (on the same and on
    other threads) ran in between; the answers equal those of a server that embedded nothing."""
    model = data / "tiny" / "qwen35" / "qwen35-f32.gguf"
    _, ids, _ = golden("qwen35")
    msgs = [{"role": "user", "content": "Hi there!"}]

    def conversation(s, embed):
        c = s.api
        a1 = c.chat.completions.create(model="x", messages=msgs, max_tokens=6, temperature=0)
        if embed:
            threads = [threading.Thread(target=lambda: c.embeddings.create(model="x", input=[ids, ids[:20]]))
                       for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        turn2 = msgs + [{"role": "assistant", "content": a1.choices[0].message.content},
                        {"role": "user", "content": "And?"}]
        a2 = c.chat.completions.create(model="x", messages=turn2, max_tokens=6, temperature=0)
        return a1.choices[0].message.content, a2.choices[0].message.content, a2.usage.prompt_tokens_details.cached_tokens

    s = Server(model, "--embeddings", "--parallel", "1")
    try:
        with_embed = conversation(s, True)
    finally:
        s.stop("qwen35 chat + embeddings")
    s = Server(model, "--parallel", "1")
    try:
        without = conversation(s, False)
    finally:
        s.stop("qwen35 chat only")
    check(with_embed == without, f"chat with embeddings in between {with_embed} != without {without}")
    check(with_embed[2] > 0, f"turn 2 reused nothing after the embeddings: {with_embed}")


default_pooling_test()
pooling_tests()
gguf_pooling_type_test()
disabled_test()
slots_untouched_test()
if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
