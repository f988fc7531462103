"""Model and Session: the C extension's types with the high-level layer on top (generation,
speculative decoding, grammar-constrained generation, embeddings, the session file constructor).

A Model keeps one session of its own for generate() and the create_*completion() calls (the way
llama-cpp-python's Llama keeps one context): each call syncs it to the new prompt, so a prompt that
extends the previous one recomputes only the new tokens. That session is used by one thread at a
time (a second thread gets SessionBusyError): threads that generate at once each use their own
Session with generate(session=...).
"""

from __future__ import annotations

import os
import struct
from typing import Iterator, NamedTuple, Sequence, Union

from . import _statelm
from ._errors import ContextFullError, InvalidArgumentError
from ._statelm import Grammar, Sampler, Snapshot, Spec

Prompt = Union[str, Sequence[int]]


class Token(NamedTuple):
    """One generated token: its id and the text it completes (may be "" while a multi-byte
    character is incomplete, or for control tokens)."""

    id: int
    text: str


class Session(_statelm.Session):
    """One instance of a model's states and its position. See statelm._statelm.Session."""

    __slots__ = ()

    @classmethod
    def load(cls, model: "Model", path: str | os.PathLike, **params) -> "Session":
        """A new session in the state saved at path (Session.save): with the context size and K and
        V cache types the file records; params as for Session() (n_threads, kernels, checkpoints).
        A missing, damaged, truncated or foreign file raises StateError or IOFailedError."""
        n_ctx, kv_k, kv_v = _state_file_shape(path)
        s = cls(model, n_ctx=n_ctx, kv_dtype_k=kv_k, kv_dtype_v=kv_v, **params)
        try:
            s.load_state(path)
        except BaseException:
            s.close()
            raise
        return s


# State files (src/runtime/state.c): "SLMSTATE", u32 version, u32 0, 16-byte model fingerprint,
# u32 n_ctx, u32 K dtype, then (version 2) u32 V dtype (GGUF type ids: 0 f32, 1 f16, 8 q8_0, 2 q4_0),
# ... The library checks everything when it loads the file; this only picks the session shape to
# load it into.
_STATE_HEADER = struct.Struct("<8sII16sIII")
_KV_TYPES = {0: "f32", 1: "f16", 8: "q8_0", 2: "q4_0"}


def _state_file_shape(path) -> tuple[int, str | None, str | None]:
    try:
        with open(path, "rb") as f:
            head = f.read(_STATE_HEADER.size)
    except OSError:
        return 0, None, None  # load_state reports the file's problem
    if len(head) < _STATE_HEADER.size:
        return 0, None, None
    magic, version, _, _, n_ctx, k, v = _STATE_HEADER.unpack(head)
    if version == 1:
        v = k
    if magic != b"SLMSTATE" or k not in _KV_TYPES or v not in _KV_TYPES or not 0 < n_ctx <= 1 << 24:
        return 0, None, None
    return n_ctx, _KV_TYPES[k], _KV_TYPES[v]


class Model(_statelm.Model):
    """A GGUF file or Hugging Face folder, loaded (weights memory-mapped). See
    statelm._statelm.Model for tokenize, detokenize, chat_template and info.

    n_ctx, kv_dtype (kv_dtype_k, kv_dtype_v: the K and the V cache's own) and kernels configure the
    session generate() and the completion calls use (0 / None: the model's defaults); n_threads is
    every session's default thread count."""

    __slots__ = ("_session", "_embed_session", "_mtp_session", "_session_params", "path", "__weakref__")

    def __init__(self, path: str | os.PathLike, *, n_threads: int = 0, n_ctx: int = 0, kv_dtype: str | None = None,
                 kernels: str | None = None, kv_dtype_k: str | None = None, kv_dtype_v: str | None = None):
        super().__init__(path, n_threads=n_threads)
        self.path = os.fspath(path)
        self._session = None
        self._embed_session = None
        self._mtp_session = None
        self._session_params = {"n_ctx": n_ctx, "kv_dtype": kv_dtype, "kernels": kernels, "kv_dtype_k": kv_dtype_k,
                                "kv_dtype_v": kv_dtype_v}

    def close(self) -> None:
        """Releases the model (once its sessions are gone) and the sessions generate() and embed()
        keep."""
        for name in ("_session", "_embed_session", "_mtp_session"):
            if getattr(self, name, None) is not None:
                getattr(self, name).close()
                setattr(self, name, None)
        super().close()

    def __exit__(self, *exc) -> None:
        self.close()

    def session(self, **params) -> Session:
        """A new Session of this model (params as for Session())."""
        return Session(self, **{**self._session_params, **params})

    def _own_session(self) -> Session:
        if self._session is None or self._session.closed:
            self._session = self.session()
        return self._session

    def _own_mtp_session(self) -> Session:
        s = self._mtp_session
        if s is None or s.closed:
            s = self._mtp_session = self.session(mtp=True)
        return s

    def prompt_ids(self, prompt: Prompt, special: bool = False) -> list[int]:
        """Token ids of a prompt: text is tokenised with BOS where the model wants it (special:
        control-token text becomes those tokens); a sequence of ids is taken as is."""
        if isinstance(prompt, (str, bytes)):
            return self.tokenize(prompt, add_bos=True, special=special)
        return list(prompt)

    def generate(self, prompt: Prompt, max_tokens: int | None = 128, *, stream: bool = True,
                 sampler: Sampler | None = None, session: Session | None = None, stop_at_eog: bool = True,
                 lookup: bool = False, draft_model: "Model | None" = None, draft_max: int = 8, mtp: bool = False,
                 grammar: "Grammar | str | None" = None, json_schema: dict | str | None = None):
        """Generates up to max_tokens tokens after prompt (None: to the end of the context).

        stream=True returns an iterator of Token(id, text) (bytes of an incomplete character at the
        very end are not yielded); stream=False the whole text. sampler
        None is greedy decoding (argmax, lowest id on ties: `statelm run --temp 0`). session: the
        session to run in (synced to the prompt, reusing its common prefix); default the model's
        own. Generation ends at an end-of-generation token (not yielded) unless stop_at_eog is
        False, or when the context is full.

        lookup=True or draft_model=M decode speculatively (slm_spec: prompt lookup, or a session of
        the draft model M, which must share the tokenizer): the same tokens as without when greedy,
        the same distribution with a sampler; draft_max bounds the draft length. mtp=True drafts
        with the model's own multi-token-prediction block (Qwen3.5 converted with it): the session
        must be created with Session(model, mtp=True) (the default one here is).

        grammar (a Grammar or GBNF text) or json_schema (a dict or JSON text) constrain the output:
        decoding is greedy among the tokens the grammar allows (Sampler(grammar=...) samples
        instead), and an end-of-generation token comes only where the grammar may end. A sampler
        with a grammar starts it over at each call. Constrained generation decodes one token at a
        time (lookup, draft_model and mtp are not used)."""
        if grammar is not None or json_schema is not None:
            if sampler is not None:
                raise ValueError("give the grammar to the Sampler (Sampler(grammar=...)) or pass no sampler")
            sampler = Sampler(temperature=0, grammar=grammar, json_schema=json_schema)
        detok = self.detokenizer()
        it = self._generate(prompt, max_tokens, sampler, session, stop_at_eog, lookup, draft_model, draft_max, detok,
                            mtp=mtp)
        if stream:
            return it
        return "".join(t.text for t in it) + detok.flush()

    def _generate(self, prompt, max_tokens, sampler, session, stop_at_eog, lookup, draft_model, draft_max,
                  detok, lp_top=None, mtp=False) -> Iterator[Token]:
        """Yields Token(id, text); with lp_top (an int) (Token, logits.logprobs(id, lp_top)) pairs."""
        ids = self.prompt_ids(prompt)
        if not ids:
            raise InvalidArgumentError("the prompt is empty", -1)
        s = session if session is not None else self._own_mtp_session() if mtp else self._own_session()
        s.sync(ids)
        limit = s.n_ctx - s.pos if max_tokens is None or max_tokens <= 0 else max_tokens
        constrained = sampler is not None and sampler.grammar is not None
        if constrained:
            sampler.reset()
        if (lookup or draft_model is not None or mtp) and not constrained and lp_top is None:
            yield from self._generate_spec(s, limit, sampler, stop_at_eog, draft_model, draft_max, detok, mtp)
            return
        logits = s.logits
        for n in range(limit):
            tok = logits.argmax() if sampler is None else sampler.sample(s)
            lp = None if lp_top is None else logits.logprobs(tok, lp_top)
            if stop_at_eog and self.is_eog(tok):
                break
            yield Token(tok, detok.push(tok)) if lp_top is None else (Token(tok, detok.push(tok)), lp)
            if n + 1 == limit or s.pos == s.n_ctx:
                break
            logits = s.decode(tok)

    def _generate_spec(self, s, limit, sampler, stop_at_eog, draft_model, draft_max, detok,
                       mtp=False) -> Iterator[Token]:
        draft = None
        if draft_model is not None:
            draft = Session(draft_model, n_ctx=s.n_ctx)
        spec = Spec(s, draft=draft, draft_max=draft_max, sampler=sampler, mtp=mtp)
        try:
            n = 0
            while n < limit and s.pos < s.n_ctx:
                try:
                    toks = spec.step(limit - n)
                except ContextFullError:
                    break
                for tok in toks:
                    if stop_at_eog and self.is_eog(tok):
                        return
                    n += 1
                    yield Token(tok, detok.push(tok))
        finally:
            spec.close()
            if draft is not None:
                draft.close()

    # Embeddings, as llama-cpp-python's Llama offers them
    def embed(self, input: str | Sequence[str], normalize: bool = False, truncate: bool = True,
              return_count: bool = False):
        """The embedding of a text (a list of n_embd floats), or a list of them for a list of
        texts: each text tokenised as a completion prompt (BOS where the model wants it, control-
        token text read as those tokens) and embedded on its own from position 0
        (Session.embed with the model's pooling, "last" when the file names none). normalize:
        scale to unit L2 norm. truncate: cut a text at the context size (else ContextFullError).
        return_count: also return the number of tokens embedded. The embedding session is the
        model's own (one thread at a time)."""
        texts = [input] if isinstance(input, str) else list(input)
        if self._embed_session is None or self._embed_session.closed:
            self._embed_session = Session(self, embeddings=True, **self._session_params)
        s = self._embed_session
        out, total = [], 0
        for text in texts:
            ids = self.tokenize(text, add_bos=True, special=True)
            if truncate:
                ids = ids[:s.n_ctx]
            total += len(ids)
            s.reset()
            out.append(s.embed(ids, normalize=normalize))
        result = out[0] if isinstance(input, str) else out
        return (result, total) if return_count else result

    def create_embedding(self, input: str | Sequence[str], model: str | None = None) -> dict:
        """llama-cpp-python's Llama.create_embedding: {"object": "list", "data": [{"object":
        "embedding", "embedding": [floats], "index": i}], "model", "usage": {"prompt_tokens",
        "total_tokens"}}. The vectors are L2-normalised, as OpenAI's and `statelm serve`'s
        /v1/embeddings are (embed() leaves them as they are by default)."""
        texts = [input] if isinstance(input, str) else list(input)
        vectors, total = self.embed(texts, normalize=True, return_count=True)
        return {"object": "list",
                "data": [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)],
                "model": model if model is not None else self.path,
                "usage": {"prompt_tokens": total, "total_tokens": total}}

    # OpenAI-shaped responses (statelm._completion)
    def create_completion(self, prompt: Prompt, **kwargs):
        """llama-cpp-python's Llama.create_completion: a text_completion dict, or an iterator of
        chunks with stream=True. See statelm._completion.create_completion."""
        from ._completion import create_completion
        return create_completion(self, prompt, **kwargs)

    def __call__(self, prompt: Prompt, **kwargs):
        """Same as create_completion (llama-cpp-python's Llama(...)(prompt))."""
        return self.create_completion(prompt, **kwargs)

    def create_chat_completion(self, messages, **kwargs):
        """llama-cpp-python's Llama.create_chat_completion: a chat.completion dict, or an iterator
        of chat.completion.chunk dicts with stream=True. See statelm._completion."""
        from ._completion import create_chat_completion
        return create_chat_completion(self, messages, **kwargs)


__all__ = ["Model", "Session", "Token", "Sampler", "Snapshot", "Spec", "Grammar"]
