#!/usr/bin/env python3
"""POST /slots/{id}?action=save|restore|erase of `statelm serve` (issue 37 item 3, docs/serve.md
"llama-server's shapes") on the tiny llama, qwen35 (hybrid: attention and recurrent states) and
lfm2 (hybrid: attention and convolution states) models, one slot, no snapshot cache:

- a request leaves the slot holding prompt + answer; save writes it (n_saved tokens); a request
  continuing that history gives answer A (ids and every logprob of the top alternatives);
- erase empties the slot (n_erased = n_saved); another prompt runs in it; restore brings the
  saved history back (n_restored = n_saved) and the same continuing request gives A again bit for
  bit (ids and logprobs equal as floats), reusing the restored tokens (timings.cache_n);
- after a server restart on the same --state-dir, restore and the same request give A again;
- a file saved by another model is refused (400, naming the model); bad input (an unknown action,
  a slot out of range, a file name with '/', a missing file, slot files without --state-dir) is a
  4xx with a message.
Usage: test_serve_slots.py STATELM TESTS_DATA_DIR."""
import json
import os
import sys
import tempfile
from pathlib import Path

try:
    import openai  # noqa: F401 (serve_harness)
except ImportError as e:
    print(f"SKIPPED: {e.name} is not importable (scripts/test.sh installs it into the test venv)")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
import serve_harness  # noqa: E402
from serve_harness import check, failures  # noqa: E402

ARCHS = ["llama", "qwen35", "lfm2"]
state = tempfile.mkdtemp(prefix="statelm-slots-")


def start(arch, *extra):
    return serve_harness.Server(statelm, data / "tiny" / arch / f"{arch}-f32.gguf", "--parallel", "1", "--cache-mib", "0",
                                "--temp", "0", *extra, timeout=120)


def post(srv, path, body):
    s, _, text = srv.request("POST", path, body)
    return s, json.loads(text)


def gen(srv, prompt, n=8):
    s, r = post(srv, "/completion", {"prompt": prompt, "n_predict": n, "n_probs": 3, "return_tokens": True,
                                     "ignore_eos": True, "temperature": 0})
    check(s == 200, f"/completion: {s} {r}")
    probs = [(p["id"], p["logprob"], [(t["id"], t["logprob"]) for t in p["top_logprobs"]])
             for p in r.get("completion_probabilities", [])]
    return r.get("tokens", []), probs, r.get("timings", {}).get("cache_n", 0)


try:
    for arch in ARCHS:
        d = os.path.join(state, arch)
        os.mkdir(d)
        srv = start(arch, "--state-dir", d)
        try:
            s, tk = post(srv, "/tokenize", {"content": "one two three four five six seven", "add_special": True})
            p_ids = tk["tokens"]
            g1, _, _ = gen(srv, p_ids)
            s, sv = post(srv, "/slots/0?action=save", {"filename": "slot0.bin"})
            check(s == 200 and sv["n_saved"] >= len(p_ids) and sv["n_written"] > 0 and sv["filename"] == "slot0.bin",
                  f"{arch}: save: {sv}")
            cont = p_ids + g1 + p_ids[1:4]  # the saved history, its last generated token, more
            a_ids, a_probs, a_cache = gen(srv, cont)
            check(a_cache >= sv["n_saved"] - 1, f"{arch}: the live slot is reused ({a_cache} of {sv['n_saved']})")
            s, er = post(srv, "/slots/0?action=erase", {})
            check(s == 200 and er["n_erased"] > 0, f"{arch}: erase: {er}")
            gen(srv, p_ids[::-1])  # another history in the slot
            s, rs = post(srv, "/slots/0?action=restore", {"filename": "slot0.bin"})
            check(s == 200 and rs["n_restored"] == sv["n_saved"], f"{arch}: restore: {rs}")
            b_ids, b_probs, b_cache = gen(srv, cont)
            check(b_ids == a_ids and b_probs == a_probs, f"{arch}: the restored slot continues bit for bit")
            check(b_cache >= sv["n_saved"] - 1, f"{arch}: the restored state is reused ({b_cache})")
            for body, path, want in [({}, "/slots/0?action=fly", "'action'"),
                                     ({"filename": "x"}, "/slots/5?action=save", "not a slot id"),
                                     ({"filename": "../x"}, "/slots/0?action=save", "'filename'"),
                                     ({"filename": "nope.bin"}, "/slots/0?action=restore", "nope.bin")]:
                s, e = post(srv, path, body)
                check(400 <= s < 500 and want in e["error"]["message"], f"{arch}: {path} {body}: {s} {e}")
        finally:
            srv.stop(f"{arch} server")
        srv = start(arch, "--state-dir", d)  # a new process: the file outlives the server
        try:
            s, rs = post(srv, "/slots/0?action=restore", {"filename": "slot0.bin"})
            c_ids, c_probs, c_cache = gen(srv, cont)
            check(s == 200 and c_ids == a_ids and c_probs == a_probs and c_cache >= sv["n_saved"] - 1,
                  f"{arch}: after a restart the restored slot continues bit for bit ({c_cache})")
            other = os.path.join(state, ARCHS[(ARCHS.index(arch) + 1) % len(ARCHS)], "slot0.bin")
            if os.path.exists(other):
                os.link(other, os.path.join(d, "other.bin"))
                s, e = post(srv, "/slots/0?action=restore", {"filename": "other.bin"})
                check(s == 400 and "model" in e["error"]["message"], f"{arch}: another model's file: {s} {e}")
        finally:
            srv.stop(f"{arch} server after restart")
    srv = start("llama")
    try:
        s, e = post(srv, "/slots/0?action=save", {"filename": "x.bin"})
        check(s == 400 and "--state-dir" in e["error"]["message"], f"without --state-dir: {s} {e}")
    finally:
        srv.stop("server without --state-dir")
finally:
    for root, dirs, files in os.walk(state, topdown=False):
        for f in files:
            os.unlink(os.path.join(root, f))
        for x in dirs:
            os.rmdir(os.path.join(root, x))
    os.rmdir(state)

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
