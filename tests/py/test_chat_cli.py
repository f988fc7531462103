#!/usr/bin/env python3
"""`statelm chat` interruption and a full context (issue 13, item 2), on the tiny llama model and
the tiny hybrid qwen35 (whose recurrent states roll back through checkpoints and replay):

- Ctrl-C (SIGINT) during a reply stops it, says so on stderr and returns to the prompt with the
  session kept: the next line gets a reply; SIGINT at the prompt then exits with status 130;
- three turns in a 128-token context with 60-token replies: every turn is answered (the oldest
  turns are dropped, said on stderr; a reply cut by the full context is said too), exit status 0;
- `run` stopped by a full context says so on stderr.
Standard library only. Usage: test_chat_cli.py STATELM TESTS_DATA_DIR."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

statelm, data = sys.argv[1], Path(sys.argv[2])
failures = []


class Chat:
    """statelm chat with its stdout and stderr collected by reader threads."""

    def __init__(self, *args):
        self.p = subprocess.Popen([statelm, "chat", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out, self.err = bytearray(), bytearray()
        self.readers = [threading.Thread(target=self._read, args=(stream, buf), daemon=True)
                        for stream, buf in ((self.p.stdout, self.out), (self.p.stderr, self.err))]
        for r in self.readers:
            r.start()

    @staticmethod
    def _read(stream, buf):
        while chunk := os.read(stream.fileno(), 4096):
            buf += chunk

    def send(self, line):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def wait_for(self, what, cond, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            if self.p.poll() is not None and not cond():
                for r in self.readers:  # the pipes are at their end: the readers finish
                    r.join(30)
                if cond():
                    return True
                failures.append(f"{what}: chat exited with {self.p.returncode}; stderr {bytes(self.err)[-300:]!r}")
                return False
            time.sleep(0.01)
        failures.append(f"{what}: timed out; stderr {bytes(self.err)[-300:]!r}")
        return False


for arch in ("llama", "qwen35"):
    model = str(data / "tiny" / arch / f"{arch}-f32.gguf")
    # ---- Ctrl-C during a reply, then another turn, then Ctrl-C at the prompt
    c = Chat("-m", model, "-c", "4096", "--temp", "0", "-n", "100000", "--ignore-eos")
    ok = c.wait_for(f"{arch}: first prompt", lambda: c.err.count(b"> ") >= 1)
    ok = ok and (c.send("Hello there") or True)
    ok = ok and c.wait_for(f"{arch}: first reply starts", lambda: len(c.out) >= 16)
    if ok:
        c.p.send_signal(signal.SIGINT)
        ok = c.wait_for(f"{arch}: prompt after the interrupted reply",
                        lambda: b"reply interrupted" in c.err and c.err.rstrip().endswith(b">"))
    if ok:
        n_out = len(c.out)
        c.send("Tell me a story")
        ok = c.wait_for(f"{arch}: second reply after the interruption", lambda: len(c.out) >= n_out + 16)
    if ok:
        c.p.send_signal(signal.SIGINT)
        ok = c.wait_for(f"{arch}: prompt after the second interrupted reply", lambda: c.err.count(b"reply interrupted") == 2
                        and c.err.rstrip().endswith(b">"))
    if ok:
        c.p.send_signal(signal.SIGINT)
        try:
            rc = c.p.wait(timeout=30)
            if rc != 130:
                failures.append(f"{arch}: SIGINT at the prompt: exit status {rc}, want 130")
        except subprocess.TimeoutExpired:
            failures.append(f"{arch}: SIGINT at the prompt did not end chat")
    if c.p.poll() is None:
        c.p.kill()
        c.p.wait()
    if b"context is full" in c.err:
        failures.append(f"{arch}: the interrupted replies ran to the end of the context: SIGINT was not taken mid-reply")
    print("interrupt: stderr", bytes(c.err)[-400:])

    # ---- a full context: three turns, three replies
    p = subprocess.run([statelm, "chat", "-m", model, "-c", "128", "--temp", "0", "-n", "60", "--ignore-eos"],
                       input=b"Hello there\nTell me a story\nAnother one\n", capture_output=True, timeout=300)
    err = p.stderr.decode()
    print("full context: stderr", err)
    if p.returncode != 0:
        failures.append(f"{arch}: chat -c 128: exit status {p.returncode}: {err[-300:]!r}")
    if err.count("> ") != 4:
        failures.append(f"{arch}: chat -c 128: {err.count('> ')} prompts, want 4 (three turns answered, then end of input)")
    if "dropped the oldest" not in err:
        failures.append(f"{arch}: chat -c 128: no word about dropped turns")
    if arch == "llama" and "the context is full (128 tokens): stopped after" not in err:
        # llama's first turn takes 80 tokens with the template: its 60-token reply cannot fit
        failures.append(f"{arch}: chat -c 128: a reply cut by the full context is not said")
    if len(p.stdout.strip()) == 0:
        failures.append(f"{arch}: chat -c 128: no reply text")


model = str(data / "tiny" / "llama" / "llama-f32.gguf")
# ---- run stopped by the full context
p = subprocess.run([statelm, "run", "-m", model, "--prompt-ids", "1,2,3", "-c", "16", "-n", "100", "--ignore-eos",
                    "--ids", "--temp", "0"], capture_output=True, timeout=120)
if p.returncode != 0 or len(p.stdout.split()) != 14 or \
        "the context is full (16 tokens): stopped after 14 generated tokens" not in p.stderr.decode():
    failures.append(f"run -c 16 -n 100: exit {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failure(s)" if failures else "chat interruption and full-context checks passed")
sys.exit(1 if failures else 0)
