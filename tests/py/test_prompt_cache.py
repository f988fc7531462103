#!/usr/bin/env python3
"""`statelm run --prompt-cache` file safety (issue 13, defects 4 and 5), on the tiny llama and qwen35:

- a cache file of another model, context size or KV dtype, or a damaged one, is refused (exit != 0,
  a message saying so) and left byte for byte as it was;
- a cache that loads but cannot be written (the file-size limit RLIMIT_FSIZE, which also stops
  root, and a read-only directory when not root) still gives the text of a run without the cache,
  exit 0, a warning, the file unchanged and no temporary file left;
- --prompt-cache-ro reuses the file and never writes it.
The reference text is the same run without any cache. Standard library only.
Usage: test_prompt_cache.py STATELM TESTS_DATA_DIR."""
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

statelm, data = sys.argv[1], Path(sys.argv[2])
failures = []


def run(args, limit_fsize=None):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))
    return subprocess.run([statelm, "run", *args], capture_output=True, text=True,
                          preexec_fn=limit if limit_fsize is not None else None)


def model_of(arch):
    return str(data / "tiny" / arch / f"{arch}-f32.gguf")


def prompt_of(arch, extra=0):
    man = json.loads((data / "tiny" / arch / "golden" / "manifest.json").read_text())
    return ",".join(map(str, man["ids"][:man["n_prompt"] + extra]))


GEN = ["--temp", "0", "--ids", "-n", "6", "--ignore-eos", "-c", "64"]

for arch in ("llama", "qwen35"):
    model, other = model_of(arch), model_of("qwen35" if arch == "llama" else "llama")
    short, longer = prompt_of(arch), prompt_of(arch, 4)
    plain = run(["-m", model, "--prompt-ids", longer, *GEN]).stdout
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "prompt.slmstate")

        def save_cache(*extra, m=model):
            if os.path.exists(cache):
                os.unlink(cache)
            p = run(["-m", m, "--prompt-ids", short, "--prompt-cache", cache, "-n", "1", "-c", "64", *extra])
            if p.returncode != 0 or not os.path.exists(cache):
                failures.append(f"{arch}: saving a cache failed: {p.stderr.strip()}")
            return Path(cache).read_bytes()

        # defect 4: refused and left alone
        cases = [("another context", [], ["-c", "32"]), ("another KV dtype", ["--kv-f32"], []),
                 ("another model", [], [])]
        for what, save_extra, run_extra in cases:
            before = save_cache(*save_extra, m=other if what == "another model" else model)
            p = run(["-m", model, "--prompt-ids", longer, "--prompt-cache", cache, *GEN, *run_extra])
            if p.returncode == 0 or "refused" not in p.stderr:
                failures.append(f"{arch}: cache of {what}: exit {p.returncode}, stderr {p.stderr.strip()!r}")
            if Path(cache).read_bytes() != before:
                failures.append(f"{arch}: cache of {what} was overwritten ({len(before)} -> "
                                f"{len(Path(cache).read_bytes())} bytes)")
        before = bytearray(save_cache())
        before[len(before) // 2] ^= 0x10
        Path(cache).write_bytes(before)
        p = run(["-m", model, "--prompt-ids", longer, "--prompt-cache", cache, *GEN])
        if p.returncode == 0 or "damaged" not in p.stderr or Path(cache).read_bytes() != before:
            failures.append(f"{arch}: damaged cache: exit {p.returncode}, stderr {p.stderr.strip()!r}, "
                            f"unchanged {Path(cache).read_bytes() == before}")

        # defect 5: loads, cannot be written -> the text anyway, a warning, nothing changed
        good = save_cache()
        p = run(["-m", model, "--prompt-ids", longer, "--prompt-cache", cache, *GEN], limit_fsize=64)
        if p.returncode != 0 or p.stdout != plain or "could not be updated" not in p.stderr:
            failures.append(f"{arch}: unwritable cache (RLIMIT_FSIZE): exit {p.returncode}, {p.stdout!r} "
                            f"(want {plain!r}), stderr {p.stderr.strip()!r}")
        if Path(cache).read_bytes() != good or os.listdir(tmp) != ["prompt.slmstate"]:
            failures.append(f"{arch}: failed save changed the cache or left {sorted(os.listdir(tmp))}")
        if os.geteuid() != 0:
            os.chmod(tmp, 0o555)
            p = run(["-m", model, "--prompt-ids", longer, "--prompt-cache", cache, *GEN])
            os.chmod(tmp, 0o755)
            if p.returncode != 0 or p.stdout != plain or "could not be updated" not in p.stderr:
                failures.append(f"{arch}: read-only directory: exit {p.returncode}, stderr {p.stderr.strip()!r}")

        # --prompt-cache-ro: reuses, never writes (the directory is writable)
        p = run(["-m", model, "--prompt-ids", longer, "--prompt-cache-ro", cache, *GEN])
        n_short = len(short.split(","))
        if (p.returncode != 0 or p.stdout != plain or
                f"{n_short - 1} of {n_short + 4} prompt tokens reused" not in p.stderr):
            failures.append(f"{arch}: --prompt-cache-ro: exit {p.returncode}, {p.stdout!r}, {p.stderr.strip()!r}")
        if Path(cache).read_bytes() != good or os.listdir(tmp) != ["prompt.slmstate"]:
            failures.append(f"{arch}: --prompt-cache-ro wrote the cache")
    print(f"{arch}: ok" if not failures else f"{arch}: {len(failures)} failures so far")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("prompt-cache file safety holds")
