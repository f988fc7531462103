#!/usr/bin/env python3
"""Several models in one `statelm serve` (issue 37 item 5, docs/serve.md "Several models"), on the
two real models of the cache, SmolLM2-135M-Instruct and Gemma 3 270M, served with --models-max 1:

- /v1/models (and /models) lists both with status.value: the first loaded at start, the other
  unloaded; after a request to the other, that one is loaded and the first unloaded;
- requests route by "model": /tokenize on each model gives that model's tokens, the pieces
  compared with the token texts gguf-py reads from each GGUF file (an independent reader; "\u2581"
  and byte-level BPE's "\u0120" read as a space), and
  the ids spell the text in that vocabulary; a request without "model" goes to the first model;
- alternating chat requests (greedy) across the two models, each load unloading the other:
  every answer equals the first answer of the same model, and names its model;
- a model with a request in flight is not unloaded: a long stream on one model while a request
  for the other arrives completes (finish_reason set), then the other answers;
- an unknown model is 404 model_not_found (OpenAI's error shape, and NotFoundError in the
  openai client; Anthropic's shape on /v1/messages); /models/load and /models/unload answer as
  llama-server's router ({"success": true}; 400 when already loaded / not loaded; 404 unknown);
- a stored response continued on the other model (previous_response_id) answers;
- --models-mib: below the two files' sizes together the other model unloads, above them both stay;
- --models-dir DIR: every *.gguf file in it, named by its stem (also reachable by its file name),
  loaded on first use; bad options (an unreadable folder, two models of one name, --draft-model
  with several models) stop the server with a message.
Skipped (77) when a model is absent from the cache. Usage: test_serve_models.py STATELM DATA."""
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

try:
    import gguf
    import openai
except ImportError as e:
    print(f"SKIPPED: {e.name} is not importable (scripts/test.sh installs it into the test venv)")
    sys.exit(77)

statelm = sys.argv[1]
cache = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache" / "statelm")) / "models"
SMOL, GEMMA = cache / "SmolLM2-135M-Instruct.Q4_1.gguf", cache / "gemma-3-270m.Q4_K_M.gguf"
for m in (SMOL, GEMMA):
    if not m.exists():
        print(f"SKIPPED: {m} is absent (scripts/fetch-models.sh fetches it)")
        sys.exit(77)

import serve_harness  # noqa: E402 (after the openai check)
from serve_harness import check, failures  # noqa: E402


def vocab(path):
    r = gguf.GGUFReader(str(path))
    f = r.fields["tokenizer.ggml.tokens"]
    return [bytes(f.parts[i]).decode("utf-8", errors="replace") for i in f.data]


def status_of(srv):
    st, _, body = srv.request("GET", "/v1/models")
    check(st == 200, f"/v1/models: {st} {body[:200]!r}")
    return {m["id"]: m["status"]["value"] for m in json.loads(body)["data"]}


A, B = SMOL.name, GEMMA.name
srv = serve_harness.Server(statelm, SMOL, "-m", str(GEMMA), "--models-max", "1", "--parallel", "1", "-c", "512",
                           "--seed", "3", key="x", timeout=300)
try:
    st, _, body = srv.request("GET", "/models")
    models = json.loads(body)
    check(st == 200 and models["object"] == "list" and [m["id"] for m in models["data"]] == [A, B] and
          all(m["object"] == "model" and "owned_by" in m for m in models["data"]), f"/models: {body[:400]!r}")
    check(status_of(srv) == {A: "loaded", B: "unloaded"}, f"at start: {status_of(srv)}")

    # routing: each model's /tokenize pieces are its own vocabulary's tokens (gguf-py)
    text = "Hello world, the model speaks"
    for path in (SMOL, GEMMA):
        v = vocab(path)
        st, _, body = srv.request("POST", "/tokenize", {"model": path.name, "content": text, "with_pieces": True})
        toks = json.loads(body).get("tokens", []) if st == 200 else []
        check(st == 200 and toks and all(0 <= t["id"] < len(v) and t["piece"] == v[t["id"]].replace("\u2581", " ").replace("\u0120", " ")
                                         for t in toks if isinstance(t["piece"], str) and "\ufffd" not in t["piece"]),
              f"/tokenize on {path.name}: {st} {body[:300]!r}")
        check("".join(t["piece"] for t in toks) in (text, " " + text), f"{path.name}: pieces do not spell the text: {toks}")
    check(status_of(srv) == {A: "unloaded", B: "loaded"}, f"after a request to {B}: {status_of(srv)}")
    st, _, body = srv.request("POST", "/tokenize", {"content": text})  # no model: the first
    ids_default = json.loads(body)["tokens"]
    st2, _, body2 = srv.request("POST", "/tokenize", {"model": A, "content": text})
    check(st == 200 and ids_default == json.loads(body2)["tokens"], f"no model: {body[:200]!r} vs {body2[:200]!r}")

    # alternating greedy chats, each unloading the other model
    client = srv.client()
    msgs = [{"role": "user", "content": "Name a color."}]
    first = {}
    for k, name in enumerate([A, B, A, B, A]):
        r = client.chat.completions.create(model=name, messages=msgs, max_tokens=12, temperature=0)
        ans = r.choices[0].message.content
        check(r.model == name and ans, f"turn {k} on {name}: model {r.model!r}, answer {ans!r}")
        first.setdefault(name, ans)
        check(ans == first[name], f"turn {k} on {name}: {ans!r} differs from its first answer {first[name]!r}")
        check(status_of(srv) == {A: "loaded" if name == A else "unloaded", B: "loaded" if name == B else "unloaded"},
              f"turn {k}: {status_of(srv)}")
    check(first[A] != first[B], f"both models gave the same answer {first[A]!r}: routing?")

    # a model with a request in flight is not unloaded under it
    done = {}

    def long_stream():
        chunks = list(client.chat.completions.create(model=A, messages=msgs, max_tokens=200, temperature=0,
                                                     stream=True, extra_body={"ignore_eos": True}))
        done["finish"] = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        done["text"] = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    t = threading.Thread(target=long_stream)
    t.start()
    r = client.chat.completions.create(model=B, messages=msgs, max_tokens=12, temperature=0)
    t.join(300)
    check(done.get("finish") == ["length"] and done.get("text", "").startswith(first[A][:10]),
          f"the stream on {A} while {B} was asked for: {done}")
    check(r.choices[0].message.content == first[B], f"{B} after waiting: {r.choices[0].message.content!r}")

    # unknown model: 404 model_not_found
    st, _, body = srv.request("POST", "/v1/chat/completions", {"model": "nope", "messages": msgs, "max_tokens": 2})
    err = json.loads(body).get("error", {})
    check(st == 404 and err.get("code") == "model_not_found" and "nope" in err.get("message", ""),
          f"unknown model: {st} {body[:300]!r}")
    try:
        client.chat.completions.create(model="nope", messages=msgs, max_tokens=2)
        check(False, "the openai client accepted an unknown model")
    except openai.NotFoundError as e:
        check(e.code == "model_not_found", f"openai NotFoundError code {e.code!r}")
    st, _, body = srv.request("POST", "/v1/messages", {"model": "nope", "max_tokens": 2, "messages": msgs})
    check(st == 404 and json.loads(body).get("type") == "error" and
          json.loads(body)["error"]["type"] == "not_found_error", f"/v1/messages unknown model: {st} {body[:300]!r}")

    # /models/load and /models/unload (llama-server's router)
    loaded = B if status_of(srv)[B] == "loaded" else A
    other = A if loaded == B else B
    for path, body_, want in [("/models/load", {"model": loaded}, 400), ("/models/unload", {"model": other}, 400),
                              ("/models/load", {"model": "nope"}, 404), ("/models/unload", {"model": "nope"}, 404),
                              ("/models/load", {}, 400)]:
        st, _, body = srv.request("POST", path, body_)
        check(st == want and "error" in json.loads(body), f"{path} {body_}: {st} {body[:200]!r}, want {want}")
    st, _, body = srv.request("POST", "/models/unload", {"model": loaded})
    check(st == 200 and json.loads(body) == {"success": True}, f"unload {loaded}: {st} {body!r}")
    check(status_of(srv) == {A: "unloaded", B: "unloaded"}, f"after unload: {status_of(srv)}")
    st, _, body = srv.request("POST", "/models/load", {"model": other})
    check(st == 200 and json.loads(body) == {"success": True}, f"load {other}: {st} {body!r}")
    check(status_of(srv)[other] == "loaded", f"after load: {status_of(srv)}")

    # a stored response continued on the other model
    r1 = client.responses.create(model=A, input="Name a color.", max_output_tokens=8, temperature=0)
    r2 = client.responses.create(model=B, input="And another one.", previous_response_id=r1.id, max_output_tokens=8,
                                 temperature=0)
    check(r1.model == A and r2.model == B and r2.status in ("completed", "incomplete"),
          f"responses across models: {r1.model} {r2.model} {r2.status}")
finally:
    srv.stop("two-model server")

# --models-mib: the files' sizes (gguf-py-independent: os.stat) bound what is loaded together
mib_a, mib_b = SMOL.stat().st_size / 2**20, GEMMA.stat().st_size / 2**20
for budget, both in [(int(mib_a + mib_b) - 1, False), (int(mib_a + mib_b) + 1, True)]:
    srv = serve_harness.Server(statelm, SMOL, "-m", str(GEMMA), "--models-mib", str(budget), "--parallel", "1",
                               "-c", "256", key="x", timeout=300)
    try:
        for name in (B, A, B):
            st, _, body = srv.request("POST", "/tokenize", {"model": name, "content": "hi"})
            check(st == 200, f"--models-mib {budget}: /tokenize on {name}: {st}")
        want = {A: "loaded", B: "loaded"} if both else {A: "unloaded", B: "loaded"}
        check(status_of(srv) == want, f"--models-mib {budget} ({mib_a:.0f} + {mib_b:.0f} MiB): {status_of(srv)}")
    finally:
        srv.stop(f"--models-mib {budget} server")

# --models-dir: every *.gguf in it (others skipped), named by stem, the first by name the default
with tempfile.TemporaryDirectory() as d:
    for m in (SMOL, GEMMA):
        os.symlink(m, Path(d) / m.name)
    (Path(d) / "notes.txt").write_text("not a model")
    srv = serve_harness.Server(statelm, Path(d) / SMOL.name, "--models-dir", d, "--parallel", "1", "-c", "256",
                               key="x", timeout=300)
    try:
        # -m names the same file again: two models, ids differ (file name for -m, stem for the folder)
        stems = [SMOL.stem, GEMMA.stem]
        check(list(status_of(srv)) == [SMOL.name, *stems], f"--models-dir: {status_of(srv)}")
        for name in (GEMMA.stem, GEMMA.name):
            st, _, body = srv.request("POST", "/tokenize", {"model": name, "content": "hi"})
            check(st == 200, f"--models-dir: /tokenize on {name}: {st} {body[:200]!r}")
        check(status_of(srv)[GEMMA.stem] == "loaded", f"--models-dir after a request: {status_of(srv)}")
    finally:
        srv.stop("--models-dir server")
    # the folder alone: its first file by name is the default
    p = subprocess.Popen([statelm, "serve", "--models-dir", d, "--port", "0", "-t", "1", "-c", "256"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        check("(2 models, default " + SMOL.stem in line, f"--models-dir alone: {line!r}")
    finally:
        p.terminate()
        _, err = p.communicate(timeout=60)
        check(p.returncode == 0, f"--models-dir alone: exit {p.returncode} {err[-300:]!r}")

# bad options
for args, what in [(["--models-dir", "/nonexistent"], "cannot open"),
                   (["-m", str(SMOL), "-m", str(SMOL)], "two models named"),
                   (["-m", str(SMOL), "-m", str(GEMMA), "--draft-model", str(SMOL)], "--draft-model needs one model")]:
    p = subprocess.run([statelm, "serve", *args, "--port", "0"], capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and what in p.stderr, f"serve {args}: {p.returncode} {p.stderr[-300:]!r}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
