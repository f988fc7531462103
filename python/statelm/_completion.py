"""OpenAI-shaped completions, as llama-cpp-python's Llama returns them, so that code written for it
runs on statelm by changing the import:

- create_completion -> {"id": "cmpl-...", "object": "text_completion", "created", "model",
  "choices": [{"text", "index", "logprobs", "finish_reason"}], "usage": {"prompt_tokens",
  "completion_tokens", "total_tokens"}}; with stream=True an iterator of such dicts, each choice
  holding the new text and finish_reason None until the last. logprobs=N: {"tokens",
  "text_offset", "token_logprobs", "top_logprobs": [{token: logprob} of the N most probable and
  the chosen token]}, llama-cpp-python's shape (offsets count from the start of the prompt text).
- create_chat_completion -> {"id": "chatcmpl-...", "object": "chat.completion", "created", "model",
  "choices": [{"index", "message": {"role": "assistant", "content"[, "tool_calls"]}, "logprobs",
  "finish_reason"}], "usage"}; with stream=True "chat.completion.chunk" dicts whose choice has a
  "delta": first {"role": "assistant"}, then {"content": ...} pieces (and {"tool_calls": [...]}),
  then {} with the finish_reason. logprobs=True: {"content": [{"token", "logprob", "bytes",
  "top_logprobs": [{"token", "logprob", "bytes"}] (top_logprobs of them)}], "refusal": None}.

finish_reason is "stop" (end-of-generation token or a stop string), "length" (max_tokens or the
context) or "tool_calls" (the answer holds tool calls). Sampling defaults are llama-cpp-python's.
Log-probabilities are log_softmax of the model's logits (before sampling's penalties, biases and
grammar), one entry per generated token up to a stop string; they are computed in C
(Logits.logprobs).

Constraints (statelm.Grammar, the C grammar engine): response_format {"type": "json_object"}
(any JSON object, or the "schema" given with it) or {"type": "json_schema", "json_schema":
{"schema": ...}}, grammar (GBNF text or a Grammar), and tool_choice "required" or {"type":
"function", "function": {"name": ...}}, which constrain the answer to one call in the chat
template's tool-call format with arguments valid for the tool's parameters schema. tool_choice
"auto" renders the tools and parses calls from the answer (slm_tool_calls_parse) without a
constraint; "none" renders no tools.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import Iterator, Sequence

from . import _statelm
from ._errors import UnsupportedError
from ._statelm import Grammar, Sampler

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


def _run(model, ids, max_tokens, stop, sampler, lookup, draft_model, lp_top):
    """Runs in the model's own session: yields (text piece, token, finish_reason, tokens so far)
    per generated token up to a stop string (token: (id, logprob data or None)), the text held
    back while it may begin a stop string; then ("", None, finish_reason, completion tokens)."""
    stops = _Stops(stop)
    detok = model.detokenizer()
    n = 0
    finish = "length"
    session = model._own_session()
    limit = session.n_ctx - len(ids) if max_tokens is None or max_tokens <= 0 else max_tokens
    for item in model._generate(ids, limit, sampler, session, True, lookup, draft_model, 8, detok, lp_top):
        tok, lp = item if lp_top is not None else (item, None)
        n += 1
        text, hit = stops.feed(tok.text)
        if hit:
            finish = "stop"
            if text:
                yield text, None, None, n
            break
        yield text, (tok.id, lp), None, n
    else:
        tail, hit = stops.feed(detok.flush())
        if tail:
            yield tail, None, None, n
        if not hit:
            rest = stops.flush()
            if rest:
                yield rest, None, None, n
        if hit or (n < limit and session.pos < session.n_ctx):
            finish = "stop"
    yield "", None, finish, n


def _usage(n_prompt: int, n: int) -> dict:
    return {"prompt_tokens": n_prompt, "completion_tokens": n, "total_tokens": n_prompt + n}


def _sampler(sampling: dict, seed, grammar) -> Sampler:
    return Sampler(**sampling, seed=random.getrandbits(63) if seed is None else seed, grammar=grammar)


def _token_text(model, id: int) -> tuple[str, bytes]:
    """A token's text for logprobs (its bytes, invalid UTF-8 replaced, as statelm serve writes it)."""
    b = model.token_bytes(id)
    return b.decode("utf-8", "replace"), b


def _check_top(n, what: str):
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        raise ValueError(f"{what} must be an int >= 0")


def _response_format_grammar(response_format):
    """The Grammar of an OpenAI response_format (None for text or None)."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict) or not isinstance(response_format.get("type"), str):
        raise ValueError("response_format must be a dict with a str 'type'")
    kind = response_format["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        schema = response_format.get("schema")
        return Grammar.from_json_schema({"type": "object"} if schema is None else schema)
    if kind == "json_schema":
        js = response_format.get("json_schema")
        schema = js.get("schema") if isinstance(js, dict) else None
        if not isinstance(schema, (dict, bool)):
            raise ValueError("response_format json_schema needs 'json_schema': {'schema': {...}}")
        return Grammar.from_json_schema(schema)
    raise ValueError(f"response_format type {kind!r} is not text, json_object or json_schema")


def _grammar_of(grammar):
    return None if grammar is None else grammar if isinstance(grammar, Grammar) else Grammar(grammar)


def create_completion(model, prompt: str | Sequence[int], *, max_tokens: int | None = 16, temperature: float = 0.8,
                      top_p: float = 0.95, min_p: float = 0.05, top_k: int = 40, repeat_penalty: float = 1.0,
                      presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                      logit_bias: dict[int | str, float] | None = None, seed: int | None = None,
                      stop: str | list[str] | None = None, stream: bool = False, echo: bool = False,
                      logprobs: int | None = None, grammar: "Grammar | str | None" = None, lookup: bool = False,
                      draft_model=None):
    """A text completion of prompt: text (tokenised with BOS, control-token text such as
    "<|im_start|>" read as those tokens, as llama-cpp-python does) or ids. logprobs=N adds the
    log-probability of each generated token and of the N most probable ones (not of an echoed
    prompt: echo with logprobs raises UnsupportedError). grammar: GBNF text or a Grammar the
    text must match. See the module doc."""
    _check_top(logprobs, "logprobs")
    if logprobs is not None and echo:
        raise UnsupportedError("logprobs of the echoed prompt are not computed (statelm keeps only the last row of "
                               "a prefill's logits)", -5)
    ids = model.prompt_ids(prompt, special=True)
    cid, created, name = f"cmpl-{uuid.uuid4()}", int(time.time()), model.path
    head = model.detokenize(ids) if echo else ""
    base = len(prompt) if isinstance(prompt, str) else len(model.detokenize(ids))
    sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty,
                    presence_penalty=presence_penalty, frequency_penalty=frequency_penalty, logit_bias=logit_bias)
    sampler = _sampler(sampling, seed, _grammar_of(grammar))
    gen = _run(model, ids, max_tokens, stop, sampler, lookup, draft_model, logprobs)
    offset = [base]

    def entry(tok, into):
        """Appends token tok = (id, (logprob, top)) to the completion logprobs dict into."""
        id, (lp, top) = tok
        text, _ = _token_text(model, id)
        into["tokens"].append(text)
        into["text_offset"].append(offset[0])
        offset[0] += len(text)
        into["token_logprobs"].append(lp)
        tops = {_token_text(model, i)[0]: v for i, v in top}
        tops[text] = lp
        into["top_logprobs"].append(tops)

    def new_lps():
        return None if logprobs is None else {"tokens": [], "text_offset": [], "token_logprobs": [], "top_logprobs": []}

    def chunk(text, finish, lps=None):
        return {"id": cid, "object": "text_completion", "created": created, "model": name,
                "choices": [{"text": text, "index": 0, "logprobs": lps, "finish_reason": finish}]}

    if stream:
        def chunks() -> Iterator[dict]:
            if head:
                yield chunk(head, None)
            for text, tok, finish, _ in gen:
                lps = new_lps()
                if lps is not None and tok is not None:
                    entry(tok, lps)
                if text or finish or (lps and lps["tokens"]):
                    yield chunk(text, finish, lps)
        return chunks()
    parts, finish, n, lps = [head], None, 0, new_lps()
    for text, tok, finish, n in gen:
        parts.append(text)
        if lps is not None and tok is not None:
            entry(tok, lps)
    out = chunk("".join(parts), finish, lps)
    out["usage"] = _usage(len(ids), n)
    return out


def _message_text(i: int, content):
    """A message's content as text: a str, None, or OpenAI's array of parts (text parts joined)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for k, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif kind in ("image_url", "input_audio", "file"):
                raise UnsupportedError(f"messages[{i}].content[{k}] is a {kind} part: statelm runs text models", -5)
            else:
                raise ValueError(f"messages[{i}].content[{k}] is not a {{'type': 'text', 'text': str}} part")
        return "".join(out)
    raise TypeError(f"messages[{i}]['content'] must be a str, None or a list of parts")


def _chat_messages(messages) -> list[dict]:
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TypeError(f"messages[{i}] is not a dict")
        m = dict(m)
        m["content"] = _message_text(i, m.get("content"))
        if m["content"] is None and not m.get("tool_calls"):
            m["content"] = ""
        out.append(m)
    return out


class _Tools:
    """The tools of a chat request: whether they are rendered, the call format of the template,
    the grammar forcing a call (tool_choice "required" or a named function), and the parse."""

    def __init__(self, model, tools, tool_choice, template, chat_template):
        self.tools, self.render, self.parse, self.grammar = None, False, False, None
        if not tools:
            if tool_choice not in (None, "none", "auto"):
                raise ValueError(f"tool_choice {tool_choice!r} needs a non-empty tools list")
            return
        _statelm.tools_check(tools)
        choice = "auto" if tool_choice is None else tool_choice
        name = None
        if isinstance(choice, dict):
            fn = choice.get("function") if choice.get("type") == "function" else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if not isinstance(name, str):
                raise ValueError("tool_choice object must be {'type': 'function', 'function': {'name': str}}")
            choice = "named"
        elif choice not in ("none", "auto", "required"):
            raise ValueError("tool_choice must be 'none', 'auto', 'required' or {'type': 'function', ...}")
        if choice == "none":
            return
        self.tools, self.render = tools, True
        self.format = model.tool_format(template=template, chat_template=chat_template)
        if choice in ("required", "named"):
            if self.format is None:
                raise UnsupportedError("the chat template writes no tool calls, so no call can be required; pass "
                                       "template= naming one that does (e.g. 'chatml') or tool_choice 'auto'", -5)
            self.grammar = Grammar.tool_call(self.format, tools, name)
        self.parse = self.format is not None

    def split(self, text: str) -> tuple[str, list[dict]]:
        """The content and the OpenAI tool_calls of an answer."""
        if not self.parse:
            return text, []
        r = json.loads(_statelm.tool_calls_parse(self.format, text, self.tools))
        calls = [{"id": c.get("id") or f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                  "function": {"name": c["name"], "arguments": c["arguments"]}} for c in r["tool_calls"]]
        return r["content"], calls

    def ready(self, text: str) -> str:
        """The prefix of text that is content whatever is generated next."""
        if not self.parse:
            return text
        b = text.encode()
        return b[:_statelm.tool_calls_content_ready(self.format, b)].decode("utf-8", "ignore")


def create_chat_completion(model, messages: list[dict], *, functions: list[dict] | None = None,
                           function_call=None, tools: list[dict] | None = None, tool_choice=None,
                           max_tokens: int | None = None, temperature: float = 0.2,
                           top_p: float = 0.95, min_p: float = 0.05, top_k: int = 40, repeat_penalty: float = 1.0,
                           presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                           logit_bias: dict[int | str, float] | None = None, seed: int | None = None,
                           stop: str | list[str] | None = None, stream: bool = False, logprobs: bool | None = None,
                           top_logprobs: int | None = None, response_format: dict | None = None,
                           grammar: "Grammar | str | None" = None, template: str | None = None, lookup: bool = False,
                           draft_model=None, chat_template: str | None = None, chat_template_kwargs: dict | None = None):
    """The assistant's reply to messages (rendered with the model's chat template, the Jinja text
    chat_template, or the built-in template; chat_template_kwargs adds template variables).
    Message contents may be str or OpenAI's arrays of text parts; assistant messages may carry
    tool_calls and tool messages tool_call_id. tools / tool_choice (functions / function_call, the
    older names, are taken too), response_format and grammar constrain or parse the answer;
    logprobs / top_logprobs add log-probabilities. See the module doc."""
    if functions and tools is None:
        tools = [{"type": "function", "function": f} for f in functions]
        if tool_choice is None and function_call is not None:
            tool_choice = ({"type": "function", "function": {"name": function_call["name"]}}
                           if isinstance(function_call, dict) else function_call)
    _check_top(top_logprobs, "top_logprobs")
    if top_logprobs and not logprobs:
        raise ValueError("top_logprobs needs logprobs=True")
    lp_top = (top_logprobs or 0) if logprobs else None
    tl = _Tools(model, tools, tool_choice, template, chat_template)
    constraints = [g for g in (_response_format_grammar(response_format), _grammar_of(grammar), tl.grammar)
                   if g is not None]
    if len(constraints) > 1:
        raise ValueError("give one of response_format, grammar and a required tool call (tool_choice)")
    ids = model.chat_template(_chat_messages(messages), add_generation_prompt=True, template=template, tokenize=True,
                              chat_template=chat_template, chat_template_kwargs=chat_template_kwargs,
                              tools=tl.tools if tl.render else None)
    cid, created, name = f"chatcmpl-{uuid.uuid4()}", int(time.time()), model.path
    sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty,
                    presence_penalty=presence_penalty, frequency_penalty=frequency_penalty, logit_bias=logit_bias)
    sampler = _sampler(sampling, seed, constraints[0] if constraints else None)
    gen = _run(model, ids, max_tokens, stop, sampler, lookup, draft_model, lp_top)

    def entry(tok):
        id, (lp, top) = tok
        text, b = _token_text(model, id)
        alts = []
        for i, v in top:
            t, tb = _token_text(model, i)
            alts.append({"token": t, "logprob": v, "bytes": list(tb)})
        return {"token": text, "logprob": lp, "bytes": list(b), "top_logprobs": alts}

    if stream:
        def chunks() -> Iterator[dict]:
            def chunk(delta, finish, lps=None):
                return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                                     "logprobs": None if lps is None else {"content": lps, "refusal": None}}]}
            yield chunk({"role": "assistant"}, None)
            full, sent = "", 0
            for text, tok, finish, _ in gen:
                full += text
                lps = [entry(tok)] if lp_top is not None and tok is not None else None
                if finish is None:
                    ready = tl.ready(full)
                    if len(ready) > sent or lps:
                        yield chunk({"content": ready[sent:]} if len(ready) > sent else {}, None, lps)
                        sent = max(sent, len(ready))
                    continue
                content, calls = tl.split(full)
                if len(content) > sent:
                    yield chunk({"content": content[sent:]}, None)
                if calls:
                    yield chunk({"tool_calls": [{"index": k, **c} for k, c in enumerate(calls)]}, None)
                yield chunk({}, "tool_calls" if calls else finish)
        return chunks()
    parts, finish, n, lps = [], None, 0, []
    for text, tok, finish, n in gen:
        parts.append(text)
        if lp_top is not None and tok is not None:
            lps.append(entry(tok))
    content, calls = tl.split("".join(parts))
    message = {"role": "assistant", "content": content}
    if calls:
        message = {"role": "assistant", "content": content or None, "tool_calls": calls}
        finish = "tool_calls"
    return {"id": cid, "object": "chat.completion", "created": created, "model": name,
            "choices": [{"index": 0, "message": message,
                         "logprobs": {"content": lps, "refusal": None} if lp_top is not None else None,
                         "finish_reason": finish}],
            "usage": _usage(len(ids), n)}
