"""Reference counting and memory: 10,000 cycles of creating, using and destroying a session (logits
views, numpy arrays over them, a sampler), 1,000 with snapshots, forks, verify/accept and
speculative drivers, and 1,000 with grammars, constrained samplers, embeddings, logprobs and tool
calls leak neither Python objects (tracemalloc, reference counts) nor C memory
(resident set size; in the ASan run, LeakSanitizer at exit)."""
import gc
import os
import sys
import tracemalloc
import weakref

import numpy as np
import pytest

import statelm
from conftest import tiny_path


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def plain_cycle(m, sampler):
    with statelm.Session(m, n_ctx=32) as s:
        np.asarray(s.prefill([1, 89, 95]))
        s.decode(sampler.sample(s))


def full_cycle(m, sampler):
    with statelm.Session(m, n_ctx=32) as s:
        a = np.asarray(s.prefill([1, 89, 95]))
        tok = sampler.sample(s)
        snap = s.snapshot()
        with snap.fork() as f:
            f.decode(int(a.argmax()))
        snap.close()
        s.verify([tok, 5])
        s.accept(1)
        spec = statelm.Spec(s, draft_max=2)
        spec.step(2)
        spec.close()
        assert s.history[:3] == [1, 89, 95]


TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "a": {"type": "integer"}}, "required": ["a"]}}}]


def grammar_cycle(m, sampler):
    g = statelm.Grammar.from_json_schema({"type": "array", "items": {"type": "integer"}, "maxItems": 2})
    smp = statelm.Sampler(temperature=0.5, seed=2, grammar=g)
    with statelm.Session(m, n_ctx=32, embeddings=True) as s:
        logits = s.prefill([1, 89, 95])
        logits.logprobs(sampler.sample(s), 3)
        s.decode(smp.sample(s))
        smp.probs(s)
        s.reset()
        s.embed([1, 89, 95], pooling="none")
    m.chat_template([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}],
        template="chatml", tools=TOOLS, tokenize=True)
    statelm.Grammar.tool_call("hermes", TOOLS)
    statelm._statelm.tool_calls_parse("hermes", '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>', TOOLS)
    with pytest.raises(statelm.FormatError):
        statelm.Grammar("root ::= (")


@pytest.mark.parametrize("cycle,cycles", [(plain_cycle, 10000), (full_cycle, 1000), (grammar_cycle, 1000)])
def test_no_leaks(models, cycle, cycles):
    m = models["llama"]
    sampler = statelm.Sampler(seed=1)
    asan = os.environ.get("STATELM_ASAN") == "1"  # LeakSanitizer checks the C side at exit
    if asan:
        cycles //= 10
    for _ in range(300):  # warm-up: allocator pools, caches
        cycle(m, sampler)
    gc.collect()
    refs = (sys.getrefcount(m), sys.getrefcount(sampler))
    tracemalloc.start()
    before, rss0 = tracemalloc.take_snapshot(), rss_bytes()
    for _ in range(cycles):
        cycle(m, sampler)
    gc.collect()
    after, rss1 = tracemalloc.take_snapshot(), rss_bytes()
    tracemalloc.stop()
    growth = sum(d.size_diff for d in after.compare_to(before, "filename"))
    assert growth < 64 * 1024, f"Python heap grew {growth} bytes over {cycles} cycles"
    # one leaked session of this model would be tens of kB: 10,000 of them hundreds of MB
    if not asan:  # ASan's quarantine holds freed memory
        assert rss1 - rss0 < 16 << 20, f"resident set grew {(rss1 - rss0) >> 10} kB over {cycles} cycles"
    assert (sys.getrefcount(m), sys.getrefcount(sampler)) == refs


def test_objects_release_their_references(models):
    m = statelm.Model(models["llama"].path)
    base = sys.getrefcount(m)
    s = statelm.Session(m, n_ctx=16)
    view = s.prefill([1, 2])
    arr = np.asarray(view)
    snap = s.snapshot()
    f = snap.fork()
    detok = m.detokenizer()
    assert sys.getrefcount(m) > base
    del s, view, arr, snap, f, detok
    gc.collect()
    assert sys.getrefcount(m) == base
    m.close()


def test_model_with_its_own_session_is_collected():
    # Model keeps a session for generate(), and the session holds the model: a cycle the garbage
    # collector must be able to break
    m = statelm.Model(tiny_path("llama"))
    m.generate([1, 89, 95], 4, stream=False)
    own = m._session
    assert own is not None and own.model is m
    ref = weakref.ref(m)
    del m, own
    gc.collect()
    assert ref() is None
