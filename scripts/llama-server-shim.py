#!/usr/bin/env python3
"""llama-server-shim.py — starts `statelm serve` when called with llama-server's command line, so
llama.cpp's own server tests (tools/server/tests, run by scripts/run-llama-server-tests.sh) can
drive statelm: LLAMA_SERVER_BIN_PATH points here.

Every model flag (--model, --hf-repo, --hf-file, --model-url) stands for the one local model in
$STATELM_SHIM_MODEL (the tests run offline; the suite's presets name Hugging Face files). Flags
statelm has are passed on under its names; llama-server's tuning flags without a statelm
counterpart (batch sizes, GPU layers, flash attention, --jinja, --slots, ...) are dropped, and
each dropped flag is printed. --reasoning on|auto|off becomes the template variable
enable_thinking (true, true, false), which llama-server sets from it. Not run by CI.

With $LLAMA_SHIM_REAL set to a real llama-server binary, the shim starts that one instead, on the
same local model: its model flags become one --model (a command line without one, the router
preset, stays without), every other flag is passed as given, and --threads $LLAMA_SHIM_THREADS
(default 1) is added when the test sets none (llama-server's thread pool spins while it waits: on a
loaded machine two threads made each start take 40 s instead of 6) (scripts/run-llama-server-tests.sh --llama-server runs the suite that way, so both servers
answer on the same model)."""
import os
import sys

STATELM = os.environ.get("STATELM_SHIM_BIN", "statelm")
MODEL = os.environ.get("STATELM_SHIM_MODEL")

# llama-server flag -> statelm serve flag (a value follows both)
RENAMED = {
    "--port": "--port", "--host": "--host", "--ctx-size": "-c", "-c": "-c", "--parallel": "--parallel",
    "-np": "--parallel", "--threads": "-t", "-t": "-t", "--alias": "--alias", "--api-key": "--api-key",
    "--temp": "--temp", "--top-k": "--top-k", "--top-p": "--top-p", "--min-p": "--min-p",
    "--repeat-penalty": "--repeat-penalty", "--repeat-last-n": "--repeat-last-n", "--pooling": "--pooling",
    "--slot-save-path": "--state-dir", "--chat-template-file": "--chat-template-file",
    "--reasoning-format": "--reasoning-format", "--seed": "--seed", "-s": "--seed", "--cors-origins": "--cors", "--model-draft": "--draft-model",
}
SWITCHES = {"--embedding": "--embeddings", "--embeddings": "--embeddings", "--verbose": "--verbose", "--no-slots": "--no-slots"}
MODEL_FLAGS = {"--model", "-m", "--hf-repo", "-hfr", "--hf-file", "-hff", "--model-url", "-mu"}
# dropped, with a value
DROPPED_WITH_VALUE = {"--batch-size", "-b", "--ubatch-size", "-ub", "--n-gpu-layers", "-ngl", "-ctk",
                      "-ctv", "-fa", "--grp-attn-n", "--grp-attn-w", "--lora", "--tags",
                      "--spec-type", "--spec-draft-n-max", "--spec-draft-n-min", "--cache-ram",
                      "--sleep-idle-seconds", "--media-path", "--mmproj-url", "--models-dir",
                      # a default length there, a limit that refuses longer requests here: left at ours
                      "--n-predict", "-n",
                      "--models-max", "--models-preset", "--tools", "--tools-runtime", "--log-file"}


def real(binary, argv):
    """llama-server itself on the local model: model flags (and their values) become one --model; a
    command line without one (the router preset) is left without."""
    out, i, has_model = [binary], 0, False
    while i < len(argv):
        if argv[i] in MODEL_FLAGS:
            has_model = True
            i += 2
        else:
            out.append(argv[i])
            i += 1
    if has_model:
        out[1:1] = ["--model", MODEL]
    if "--threads" not in argv and "-t" not in argv:  # its pool spins: on a shared machine, one thread
        out += ["--threads", os.environ.get("LLAMA_SHIM_THREADS", "1")]
    print("llama-server-shim: " + " ".join(out), file=sys.stderr, flush=True)
    os.execvp(out[0], out)


def main(argv):
    if not MODEL:
        sys.exit("llama-server-shim: set STATELM_SHIM_MODEL to the model file")
    if os.environ.get("LLAMA_SHIM_REAL"):
        real(os.environ["LLAMA_SHIM_REAL"], argv)
    out, dropped, i = [STATELM, "serve", "-m", MODEL], [], 0
    chat_template = None
    while i < len(argv):
        a = argv[i]
        v = argv[i + 1] if i + 1 < len(argv) else None
        if a in MODEL_FLAGS:
            i += 2
        elif a in RENAMED:
            out += [RENAMED[a], v]
            i += 2
        elif a in SWITCHES:
            out.append(SWITCHES[a])
            i += 1
        elif a == "--chat-template":
            chat_template = v
            i += 2
        elif a == "--reasoning":  # llama-server's on/auto/off: the templates' enable_thinking
            out += ["--chat-template-kwargs", '{"enable_thinking": %s}' % ("false" if v == "off" else "true")]
            i += 2
        elif a in DROPPED_WITH_VALUE:
            dropped.append(f"{a} {v}")
            i += 2
        else:
            dropped.append(a)
            i += 1
    if chat_template:  # llama-server's built-in names that statelm renders under its own
        names = {"chatml": "chatml", "llama3": "llama3", "gemma": "gemma", "qwen3": "qwen3"}
        if chat_template in names:
            out += ["--chat-template", names[chat_template]]
        else:
            dropped.append(f"--chat-template {chat_template}")
    if "-c" in out:  # llama-server's context is shared by its slots; statelm's -c is each slot's
        k, slots = out.index("-c"), int(out[out.index("--parallel") + 1]) if "--parallel" in out else 1
        out[k + 1] = str(max(int(out[k + 1]) // slots, 2))
    if "--pooling" in out and "--embeddings" not in out:
        k = out.index("--pooling")
        dropped.append(f"--pooling {out[k + 1]} (without --embedding)")
        del out[k:k + 2]
    if "--state-dir" in out:
        os.makedirs(out[out.index("--state-dir") + 1], exist_ok=True)
    if dropped:
        print("llama-server-shim: dropped " + ", ".join(dropped), file=sys.stderr, flush=True)
    print("llama-server-shim: " + " ".join(out), file=sys.stderr, flush=True)
    os.execvp(out[0], out)


if __name__ == "__main__":
    main(sys.argv[1:])
