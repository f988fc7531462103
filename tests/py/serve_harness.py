"""serve_harness.py — `statelm serve` on a free port for the tests that drive it (test_serve.py,
test_serve_tools.py, test_serve_embeddings.py, ...): started with a time limit on its first line,
stderr drained while it runs (a full pipe would block the server), stopped with SIGTERM and
checked for a clean exit and no sanitizer report; an OpenAI client and raw HTTP requests.
Import it after the script has made sure `openai` is importable. `check` and `failures` are the
scripts' shared failure record; cached_model finds a model of scripts/fetch-models.sh or skips."""
import http.client
import json
import os
import re
import signal
import subprocess
import threading

import openai

failures = []


def cached_model(name):
    """The path of models/NAME in the cache (STATELM_CACHE, else ~/.cache/statelm); when it is
    absent, says SKIPPED and exits 77."""
    from pathlib import Path
    path = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache" / "statelm")) / "models" / name
    if not path.exists():
        print(f"SKIPPED: {path} is absent (scripts/fetch-models.sh)")
        raise SystemExit(77)
    return path


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


class Server:
    """statelm serve -m MODEL --port 0 -t 1 ARGS; key: the bearer token requests carry."""

    def __init__(self, statelm, model, *args, key="x", timeout=120):
        self.model_path = str(model)
        self.key = key
        self.timeout = timeout
        self.p = subprocess.Popen([statelm, "serve", "-m", self.model_path, "--port", "0", "-t", "1", *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.err = bytearray()
        self.drainer = threading.Thread(target=self._drain, daemon=True)
        self.drainer.start()
        line = []
        reader = threading.Thread(target=lambda: line.append(self.p.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        m = re.search(rb"http://(127\.0\.0\.1|\[::1\]):(\d+)", line[0]) if line else None
        if not m:
            self.kill()
            raise RuntimeError(f"server did not start: {bytes(self.err)[-500:]!r}")
        self.host = m.group(1).decode().strip("[]")
        self.port = int(m.group(2))
        self.url = f"http://{m.group(1).decode()}:{self.port}"
        self.model = os.path.basename(self.model_path)
        self.api = self.client()

    def _drain(self):
        while chunk := os.read(self.p.stderr.fileno(), 4096):
            self.err += chunk

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def stop(self, what="server"):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
                check(False, f"{what}: the server did not exit within 30 s of SIGTERM")
                return
        self.drainer.join(30)  # stderr is at its end once the server exited: the drain thread has read it all
        err = bytes(self.err).decode(errors="replace")
        check(self.p.returncode == 0, f"{what}: exit status {self.p.returncode} after SIGTERM; stderr {err[-800:]}")
        check("Sanitizer" not in err and "runtime error" not in err, f"{what}: sanitizer report: {err[-1500:]}")

    def client(self, key=None):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key or self.key, max_retries=0, timeout=self.timeout)

    def request(self, method, path, body=None, key=..., raw=None, headers=None):
        """(status, headers, body bytes) without raising on error statuses; key None: no token."""
        key = self.key if key is ... else key
        c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        h = {"Content-Type": "application/json", **(headers or {})}
        if key:
            h["Authorization"] = "Bearer " + key
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        c.request(method, path, body=payload, headers=h)
        r = c.getresponse()
        out = (r.status, dict(r.getheaders()), r.read())
        c.close()
        return out

    def post(self, body, path, method="POST"):
        """(status, parsed JSON body) without raising on error statuses."""
        status, _, text = self.request(method, path, body)
        return status, json.loads(text)

    def metrics(self):
        _, _, body = self.request("GET", "/metrics")
        return {k: float(v) for k, v in re.findall(r"^(statelm_\w+) (\S+)$", body.decode(), re.M)}

    def curl(self, body, path="/v1/chat/completions"):
        return subprocess.run(["curl", "-sN", "--max-time", str(self.timeout), "-H", "Authorization: Bearer " + self.key,
                               "-H", "Content-Type: application/json", "-d", json.dumps(body), self.url + path],
                              capture_output=True, timeout=self.timeout + 10).stdout
