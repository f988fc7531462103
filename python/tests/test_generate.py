"""High-level API: generate (streamed text equals the detokenised ids, speculative decoding gives
the greedy tokens), llama-cpp-python-shaped completions checked against the OpenAI client's response
types and llama-cpp-python's documented fields, stop strings, seeded sampling, tokenizer and chat
template against Hugging Face's (tests/data/tiny/tokenizer_vectors.json)."""
import json
import subprocess
import unicodedata

import pytest

import statelm
from conftest import ARCHS, DATA, golden, tiny_path

VECTORS = json.loads((DATA / "tiny" / "tokenizer_vectors.json").read_text())


def test_tokenize_detokenize_match_hf(models, arch):
    # HF's add_special_tokens=False still matches special-token text: special=True without BOS
    # (qwen2/qwen35 pre-tokenizers normalise to NFC as the real Qwen tokenizers do; the tiny
    # tokenizer.json has no normaliser, so text NFC changes is left out for them)
    m, v = models[arch], VECTORS["archs"][arch]
    nfc = m.info["tokenizer"]["pre"] in ("qwen2", "qwen35")
    for text, plain, special, decoded in zip(VECTORS["strings"], v["plain"], v["with_special"], v["decoded"]):
        if nfc and unicodedata.normalize("NFC", text) != text:
            continue
        assert m.tokenize(text, add_bos=False, special=True) == plain, text
        assert m.tokenize(text, add_bos=True, special=True) == special, text
        assert m.detokenize(plain, special=True) == decoded, text
        assert m.tokenize(text.encode(), add_bos=False, special=True) == plain
    assert m.tokenize("<|im_end|>", add_bos=False) != m.tokenize("<|im_end|>", add_bos=False, special=True)


# the tiny models whose stored template is one statelm renders (qwen35's and gemma3's are not)
@pytest.mark.parametrize("arch,template", [("llama", None), ("qwen3", None), ("lfm2", "lfm2")])
def test_chat_template_matches_hf(models, arch, template):
    m, v = models[arch], VECTORS["archs"][arch]
    msgs = VECTORS["chat_messages"]
    assert m.chat_template(msgs, template=template) == v["chat"]["text"]
    assert m.chat_template(msgs, template=template, tokenize=True) == v["chat"]["ids"]


def test_chat_template_text_and_kwargs(models):
    import statelm
    m = models["qwen3"]
    msgs = [{"role": "user", "content": "hi <|im_end|>"}]
    t = "{% for x in messages %}<|im_start|>{{ x.role }}:{{ x.content }}{% endfor %}{{ 'T' if enable_thinking else 'F' }}"
    assert m.chat_template(msgs, chat_template=t, chat_template_kwargs={"enable_thinking": True}) == \
        "<|im_start|>user:hi <|im_end|>T"
    assert m.chat_template(msgs, chat_template=t, chat_template_kwargs='{"enable_thinking": false}').endswith("F")
    # the template's <|im_start|> is a control token, the message's <|im_end|> text is not
    ids = m.chat_template(msgs, chat_template=t, chat_template_kwargs={"enable_thinking": True}, tokenize=True)
    im_end = m.tokenize("<|im_end|>", add_bos=False, special=True)
    assert ids[0] == m.tokenize("<|im_start|>", add_bos=False, special=True)[0]
    assert not any(ids[i:i + len(im_end)] == im_end for i in range(len(ids)))
    with pytest.raises(statelm.FormatError, match="1:"):
        m.chat_template(msgs, chat_template="{% for x in messages %}{{ x ]] }}")
    with pytest.raises(ValueError):
        m.chat_template(msgs, chat_template=t, template="chatml")
    with pytest.raises(statelm.InvalidArgumentError, match="messages"):
        m.chat_template(msgs, chat_template=t, chat_template_kwargs={"messages": []})


def test_generate_stream_text(models, arch):
    m = models[arch]
    toks = list(m.generate("The fox", max_tokens=12, stop_at_eog=False))
    ids = [t.id for t in toks]
    assert len(ids) == 12
    assert "".join(t.text for t in toks) == m.detokenize(ids)
    assert m.generate("The fox", max_tokens=12, stream=False, stop_at_eog=False) == m.detokenize(ids)


@pytest.mark.parametrize("arch", ARCHS)
def test_speculative_equals_greedy(models, arch):
    m = models[arch]
    prompt = golden(arch)[0]["ids"][:11] * 3  # repeats: prompt lookup finds drafts
    want = [t.id for t in m.generate(prompt, 40, stop_at_eog=False)]
    assert [t.id for t in m.generate(prompt, 40, stop_at_eog=False, lookup=True)] == want
    with statelm.Model(tiny_path(arch, "q8_0")) as draft:
        assert [t.id for t in m.generate(prompt, 40, stop_at_eog=False, draft_model=draft, draft_max=4)] == want


def test_mtp_equals_greedy():
    """Qwen3.5's multi-token-prediction block drafts (tests/data/tiny/qwen35/hf-mtp): the same
    greedy tokens; the Spec driver over a Session(mtp=True); a session without it is refused."""
    with statelm.Model(str(DATA / "tiny" / "qwen35" / "hf-mtp")) as m:
        prompt = golden("qwen35")[0]["ids"][:11]
        want = [t.id for t in m.generate(prompt, 30, stop_at_eog=False)]
        assert [t.id for t in m.generate(prompt, 30, stop_at_eog=False, mtp=True, draft_max=3)] == want
        with statelm.Session(m, n_ctx=128, mtp=True) as s:
            s.prefill(prompt)
            spec = statelm.Spec(s, mtp=True, draft_max=4, fixed=True)
            out = []
            while len(out) < 30:
                out += spec.step(30 - len(out))
            assert out[:30] == want and spec.stats["n_drafted"] > 0
            spec.close()
        with statelm.Session(m, n_ctx=128) as s:
            s.prefill(prompt)
            with pytest.raises(statelm.InvalidArgumentError):
                statelm.Spec(s, mtp=True)
    with statelm.Model(tiny_path("qwen35")) as m, pytest.raises(statelm.UnsupportedError):
        statelm.Session(m, mtp=True)


def test_spec_driver_stats(models):
    m = models["qwen35"]
    prompt = golden("qwen35")[0]["ids"][:11] * 4
    with statelm.Session(m, n_ctx=256) as s:
        s.prefill(prompt)
        spec = statelm.Spec(s, draft_max=6)
        out = []
        while len(out) < 30:
            out += spec.step(30 - len(out))
        st = spec.stats
        assert st["n_steps"] >= 1 and st["n_accepted"] <= st["n_drafted"]
        assert s.pos == len(prompt) + len(out) and s.history[len(prompt):] == out
        spec.close()
    with statelm.Session(m, n_ctx=256) as s:
        s.prefill(prompt)
        greedy = []
        for i in range(30):
            greedy.append(s.logits.argmax())
            s.decode(greedy[-1])
    assert out == greedy


def completion_fields(resp):
    return set(resp), set(resp["choices"][0]), set(resp["usage"])


def test_create_completion_shape(models):
    from openai.types import Completion
    m = models["llama"]
    r = m.create_completion("Hello", max_tokens=8, seed=1)
    assert completion_fields(r) == ({"id", "object", "created", "model", "choices", "usage"},
                                    {"text", "index", "logprobs", "finish_reason"},
                                    {"prompt_tokens", "completion_tokens", "total_tokens"})
    assert r["object"] == "text_completion" and r["id"].startswith("cmpl-") and r["model"] == m.path
    Completion.model_validate(r)
    n_prompt = len(m.tokenize("Hello", special=True))
    u = r["usage"]
    assert u["prompt_tokens"] == n_prompt and u["total_tokens"] == n_prompt + u["completion_tokens"]
    assert u["completion_tokens"] <= 8 and r["choices"][0]["finish_reason"] in ("stop", "length")
    # same seed, same text; streamed pieces join to it
    again = m.create_completion("Hello", max_tokens=8, seed=1)
    assert again["choices"][0]["text"] == r["choices"][0]["text"]
    chunks = list(m.create_completion("Hello", max_tokens=8, seed=1, stream=True))
    for c in chunks:  # the OpenAI type wants a finish_reason: only the last chunk has one
        assert completion_fields({**c, "usage": r["usage"]}) == completion_fields(r)
    Completion.model_validate(chunks[-1])
    assert "".join(c["choices"][0]["text"] for c in chunks) == r["choices"][0]["text"]
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == r["choices"][0]["finish_reason"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    # temperature 0 is greedy: the generate() tokens
    g = m.create_completion([1, 89, 95], max_tokens=10, temperature=0)
    want = [t.id for t in m.generate([1, 89, 95], 10)]
    assert g["choices"][0]["text"] == m.detokenize(want)
    assert g["usage"]["completion_tokens"] == len(want)
    assert g["choices"][0]["finish_reason"] == ("length" if len(want) == 10 else "stop")
    # llama-cpp-python's Llama(...)(prompt)
    assert m([1, 89, 95], max_tokens=10, temperature=0)["choices"][0]["text"] == g["choices"][0]["text"]


def test_stop_strings(models):
    m = models["llama"]
    full = m.create_completion("The fox", max_tokens=30, temperature=0)["choices"][0]["text"]
    assert len(full) > 12
    stop = full[len(full) // 2:len(full) // 2 + 3]
    r = m.create_completion("The fox", max_tokens=30, temperature=0, stop=[stop, "\x00never"])
    assert r["choices"][0]["text"] == full[:full.index(stop)]
    assert r["choices"][0]["finish_reason"] == "stop"
    pieces = list(m.create_completion("The fox", max_tokens=30, temperature=0, stop=stop, stream=True))
    assert "".join(c["choices"][0]["text"] for c in pieces) == full[:full.index(stop)]


def test_create_chat_completion_shape(models):
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    m = models["lfm2"]
    msgs = [{"role": "user", "content": "What is the state of the fox?"}]
    r = m.create_chat_completion(msgs, max_tokens=12, seed=3)
    assert set(r) == {"id", "object", "created", "model", "choices", "usage"}
    ch = r["choices"][0]
    assert set(ch) == {"index", "message", "logprobs", "finish_reason"} and ch["logprobs"] is None
    assert set(ch["message"]) == {"role", "content"} and ch["message"]["role"] == "assistant"
    assert r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-")
    assert r["usage"]["prompt_tokens"] == len(m.chat_template(msgs, tokenize=True))
    ChatCompletion.model_validate(r)
    chunks = list(m.create_chat_completion(msgs, max_tokens=12, seed=3, stream=True))
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
        assert c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert chunks[-1]["choices"][0]["delta"] == {} and chunks[-1]["choices"][0]["finish_reason"] == ch["finish_reason"]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == ch["message"]["content"]
    lp = m.create_chat_completion(msgs, max_tokens=4, seed=3, logprobs=True, top_logprobs=2)
    ChatCompletion.model_validate(lp)
    assert len(lp["choices"][0]["logprobs"]["content"]) == lp["usage"]["completion_tokens"]


def test_sampler(models):
    m = models["llama"]
    with statelm.Session(m, n_ctx=32) as s:
        with pytest.raises(statelm.StateError, match="no logits"):
            statelm.Sampler().sample(s)
        s.prefill([1, 89, 95])
        probs = list(statelm.Sampler(temperature=0.7, top_k=5).probs(s))
        assert abs(sum(probs) - 1) < 1e-5 and sum(p > 0 for p in probs) <= 5
        greedy = list(statelm.Sampler(temperature=0).probs(s))
        assert greedy.index(1.0) == s.logits.argmax()
        draws = [statelm.Sampler(temperature=0.7, top_k=5, seed=9).sample(s) for _ in range(3)]
        assert len(set(draws)) == 1 and probs[draws[0]] > 0
    with pytest.raises(statelm.InvalidArgumentError):
        statelm.Sampler(top_p=1.5)
    with pytest.raises(statelm.InvalidArgumentError):
        statelm.Sampler(logit_bias={-3: 1.0})
    with pytest.raises(TypeError):
        statelm.Sampler(logit_bias=[(1, 2.0)])


def test_logit_bias_and_penalties_match_cli(models, statelm_cli):
    m = models["llama"]
    with statelm.Session(m, n_ctx=32) as s:
        s.prefill([1, 89, 95])
        top = s.logits.argmax()
        banned = statelm.Sampler(temperature=0, logit_bias={top: float("-inf")}).sample(s)
        assert banned != top
        assert statelm.Sampler(temperature=0, logit_bias={str(top): float("-inf")}).sample(s) == banned
    man = golden("llama")[0]
    prompt = man["ids"][:man["n_prompt"]]
    out = subprocess.run([statelm_cli, "run", "-m", tiny_path("llama"), "--prompt-ids", ",".join(map(str, prompt)),
                          "--temp", "0.9", "--seed", "11", "--presence-penalty", "0.7", "--frequency-penalty", "0.4",
                          "--repeat-penalty", "1.3", "--ids", "-n", "24", "--ignore-eos"],
                         capture_output=True, text=True, check=True).stdout
    sampler = statelm.Sampler(temperature=0.9, seed=11, presence_penalty=0.7, frequency_penalty=0.4, repeat_penalty=1.3)
    assert [t.id for t in m.generate(prompt, 24, sampler=sampler, stop_at_eog=False)] == [int(x) for x in out.split()]
