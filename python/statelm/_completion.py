"""OpenAI-shaped completions, as llama-cpp-python's Llama returns them, so that code written for it
runs on statelm by changing the import:

- create_completion -> {"id": "cmpl-...", "object": "text_completion", "created", "model",
  "choices": [{"text", "index", "logprobs", "finish_reason"}], "usage": {"prompt_tokens",
  "completion_tokens", "total_tokens"}}; with stream=True an iterator of such dicts, each choice
  holding the new text and finish_reason None until the last.
- create_chat_completion -> {"id": "chatcmpl-...", "object": "chat.completion", "created", "model",
  "choices": [{"index", "message": {"role": "assistant", "content"}, "logprobs", "finish_reason"}],
  "usage"}; with stream=True "chat.completion.chunk" dicts whose choice has a "delta": first
  {"role": "assistant"}, then {"content": ...} pieces, then {} with the finish_reason.

finish_reason is "stop" (end-of-generation token or a stop string) or "length" (max_tokens or the
context). Sampling defaults are llama-cpp-python's. logprobs are not computed (None); asking for
them raises UnsupportedError.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Iterator, Sequence

from ._errors import UnsupportedError
from ._statelm import Sampler


class _Stops:
    """Cuts text at the first stop string; holds back a tail that may begin one."""

    def __init__(self, stop):
        self.stops = [stop] if isinstance(stop, str) else [s for s in (stop or []) if s]
        self.pending = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """The text safe to emit now, and whether a stop string was hit."""
        if not self.stops:
            return text, False
        buf = self.pending + text
        hits = [i for i in (buf.find(s) for s in self.stops) if i >= 0]
        if hits:
            self.pending = ""
            return buf[:min(hits)], True
        keep = 0
        for s in self.stops:
            for k in range(min(len(s) - 1, len(buf)), 0, -1):
                if buf.endswith(s[:k]):
                    keep = max(keep, k)
                    break
        self.pending = buf[len(buf) - keep:]
        return buf[:len(buf) - keep], False

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return out


def _run(model, ids, max_tokens, stop, sampling, seed, lookup, draft_model):
    """Runs in the model's own session: yields (text piece, None, tokens so far) while generating,
    then ("", finish_reason, completion tokens). sampling: the Sampler's keyword arguments."""
    sampler = Sampler(**sampling, seed=random.getrandbits(63) if seed is None else seed)
    stops = _Stops(stop)
    detok = model.detokenizer()
    n = 0
    finish = "length"
    session = model._own_session()
    limit = session.n_ctx - len(ids) if max_tokens is None or max_tokens <= 0 else max_tokens
    for tok in model._generate(ids, limit, sampler, session, True, lookup, draft_model, 8, detok):
        n += 1
        text, hit = stops.feed(tok.text)
        if text:
            yield text, None, n
        if hit:
            finish = "stop"
            break
    else:
        tail, hit = stops.feed(detok.flush())
        if tail:
            yield tail, None, n
        if not hit:
            rest = stops.flush()
            if rest:
                yield rest, None, n
        if hit or (n < limit and session.pos < session.n_ctx):
            finish = "stop"
    yield "", finish, n


def _usage(n_prompt: int, n: int) -> dict:
    return {"prompt_tokens": n_prompt, "completion_tokens": n, "total_tokens": n_prompt + n}


def _check_logprobs(logprobs):
    if logprobs:
        raise UnsupportedError("logprobs are not computed by statelm's Python completions", -5)


def create_completion(model, prompt: str | Sequence[int], *, max_tokens: int | None = 16, temperature: float = 0.8,
                      top_p: float = 0.95, min_p: float = 0.05, top_k: int = 40, repeat_penalty: float = 1.0,
                      presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                      logit_bias: dict[int | str, float] | None = None, seed: int | None = None,
                      stop: str | list[str] | None = None, stream: bool = False, echo: bool = False,
                      logprobs: int | None = None, lookup: bool = False, draft_model=None):
    """A text completion of prompt: text (tokenised with BOS, control-token text such as
    "<|im_start|>" read as those tokens, as llama-cpp-python does) or ids. See the module doc."""
    _check_logprobs(logprobs)
    ids = model.prompt_ids(prompt, special=True)
    cid, created, name = f"cmpl-{uuid.uuid4()}", int(time.time()), model.path
    head = model.detokenize(ids) if echo else ""
    sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty,
                    presence_penalty=presence_penalty, frequency_penalty=frequency_penalty, logit_bias=logit_bias)
    gen = _run(model, ids, max_tokens, stop, sampling, seed, lookup, draft_model)

    def chunk(text, finish):
        return {"id": cid, "object": "text_completion", "created": created, "model": name,
                "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}]}

    if stream:
        def chunks() -> Iterator[dict]:
            if head:
                yield chunk(head, None)
            for text, finish, _ in gen:
                yield chunk(text, finish)
        return chunks()
    parts, finish, n = [head], None, 0
    for text, finish, n in gen:
        parts.append(text)
    out = chunk("".join(parts), finish)
    out["usage"] = _usage(len(ids), n)
    return out


def create_chat_completion(model, messages: list[dict], *, max_tokens: int | None = None, temperature: float = 0.2,
                           top_p: float = 0.95, min_p: float = 0.05, top_k: int = 40, repeat_penalty: float = 1.0,
                           presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                           logit_bias: dict[int | str, float] | None = None, seed: int | None = None,
                           stop: str | list[str] | None = None, stream: bool = False, logprobs: bool | None = None,
                           template: str | None = None, lookup: bool = False, draft_model=None,
                           chat_template: str | None = None, chat_template_kwargs: dict | None = None):
    """The assistant's reply to messages (rendered with the model's chat template, the Jinja text
    chat_template, or the built-in template; chat_template_kwargs adds template variables). See
    the module doc."""
    _check_logprobs(logprobs)
    ids = model.chat_template(messages, add_generation_prompt=True, template=template, tokenize=True,
                              chat_template=chat_template, chat_template_kwargs=chat_template_kwargs)
    cid, created, name = f"chatcmpl-{uuid.uuid4()}", int(time.time()), model.path
    sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty,
                    presence_penalty=presence_penalty, frequency_penalty=frequency_penalty, logit_bias=logit_bias)
    gen = _run(model, ids, max_tokens, stop, sampling, seed, lookup, draft_model)
    if stream:
        def chunks() -> Iterator[dict]:
            def chunk(delta, finish):
                return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            yield chunk({"role": "assistant"}, None)
            for text, finish, _ in gen:
                if text:
                    yield chunk({"content": text}, None)
                if finish is not None:
                    yield chunk({}, finish)
        return chunks()
    parts, finish, n = [], None, 0
    for text, finish, n in gen:
        parts.append(text)
    return {"id": cid, "object": "chat.completion", "created": created, "model": name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(parts)}, "logprobs": None,
                         "finish_reason": finish}],
            "usage": _usage(len(ids), n)}
