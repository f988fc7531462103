"""Types of the C extension statelm._statelm (python/src/), with their documentation.

Every call that computes releases the GIL. A Session (and a Sampler) is used by one thread at a
time: a second thread's call raises SessionBusyError. Failed calls raise a StatelmError subclass
(statelm._errors) and leave the object as it was."""

import os
from typing import Iterable, Sequence

from typing_extensions import Buffer, Self

Ids = Iterable[int] | Buffer  # ints, or a 1-D contiguous int32 buffer (numpy int32 array, array('i'))
version: str

def status_name(status: int) -> str:
    """The name of an slm_status code, e.g. status_name(-9) == "SLM_ERR_STATE"."""

def draft_lookup(history: Ids, n_max: int) -> list[int]:
    """Prompt lookup's draft: the continuation (at most n_max tokens) of the earlier occurrence of
    history's ending (slm_draft_lookup); [] when the last token occurs nowhere earlier."""

class Logits:
    """float32 logits, zero-copy over the session's buffer: numpy.asarray(logits) and
    memoryview(logits) make no copy (buffer protocol, read-only, format "f"). A view of a session's
    row is valid until the next call that changes the session (decode, prefill, rollback, ...):
    then every access raises StateError ("stale logits"); copy it (numpy.array(logits)) to keep
    it. Arrays taken while it was valid keep pointing at the session's buffer, which the session
    keeps allocated while they live (they then show newer logits, never freed memory).
    Rows of Session.verify and Sampler.probs are owned copies, always valid."""

    @property
    def shape(self) -> tuple[int] | tuple[int, int]:
        """(n_vocab,) for one row, (rows, n_vocab) for verify's rows."""
    @property
    def valid(self) -> bool:
        """False once the session has changed since this view was taken."""
    def argmax(self) -> int | list[int]:
        """The index of the largest logit, lowest on ties (greedy decoding's choice); a list per
        row for several rows."""
    def tolist(self) -> list[float] | list[list[float]]:
        """The values as Python floats."""
    def logprobs(self, id: int, top: int = 0) -> tuple[float, list[tuple[int, float]]]:
        """log_softmax of one row (in double): the log-probability of id, and (id, logprob) of the
        top most probable tokens, most probable first, the lower id first on ties."""
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> float | list[float]: ...
    def __buffer__(self, flags: int) -> memoryview: ...

class Detokenizer:
    """Streaming detokenizer (slm_detokenizer): push ids one by one, get only complete UTF-8
    characters; control tokens give ""."""

    def push(self, id: int) -> str:
        """The text this token completes (may be "")."""
    def flush(self) -> str:
        """Pending bytes of an incomplete character, as U+FFFD."""

class Tokenizer:
    """Only the tokenizer of a file (slm_tokenizer_load): a GGUF file's tokenizer.ggml.* metadata (a
    vocab-only GGUF such as llama.cpp's ggml-vocab-*.gguf, or a model of an architecture statelm
    does not run) or a Hugging Face folder's tokenizer.json. Immutable, shared by threads, freed
    when collected. A tokenizer statelm does not support raises UnsupportedError naming it
    ("tokenizer 't5' is not supported", "pre-tokenizer 'X' is not supported"); damaged metadata
    FormatError; a file without a tokenizer NotFoundError. The methods are Model's."""

    def __init__(self, path: str | os.PathLike) -> None: ...
    @property
    def info(self) -> dict:
        """{kind ("bpe"/"spm"/"wpm"), pre, n_vocab, bos, eos, eot, pad, add_bos}, as Model.info["tokenizer"]."""
    @property
    def n_vocab(self) -> int: ...
    def tokenize(self, text: str | bytes, *, add_bos: bool = True, special: bool = False) -> list[int]:
        """As Model.tokenize."""
    def detokenize(self, ids: Ids, *, special: bool = False) -> str:
        """As Model.detokenize."""
    def detokenize_bytes(self, ids: Ids, *, special: bool = False) -> bytes:
        """As Model.detokenize_bytes."""
    def token_text(self, id: int) -> str:
        """As Model.token_text."""
    def is_eog(self, id: int) -> bool:
        """As Model.is_eog."""

class Model:
    """A GGUF file or Hugging Face folder (config.json, safetensors, tokenizer.json), loaded with
    the weights memory-mapped; immutable and shared by threads. Raises FormatError, IOFailedError,
    UnsupportedError with the library's message (naming the field and byte offset) on bad files."""

    def __init__(self, path: str | os.PathLike, *, n_threads: int = 0) -> None:
        """n_threads: the default of its sessions (0 = the online CPUs)."""
    @property
    def info(self) -> dict:
        """arch, name, format ("gguf"/"hf"), n_layer, layer_kinds, n_vocab, n_embd, n_ctx_train,
        n_ctx_default, n_tensors, weight_bytes, hparams {name: value}, fingerprint (16 bytes),
        chat_template (the built-in template that resembles the stored one, or None; the stored
        template itself is what renders by default), chat_template_text (as stored), and
        tokenizer {kind, pre, n_vocab, bos, eos, eot, pad, add_bos} (None without one)."""
    @property
    def n_vocab(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def tokenize(self, text: str | bytes, *, add_bos: bool = True, special: bool = False) -> list[int]:
        """Token ids of text (str as UTF-8). add_bos: prepend BOS when the tokenizer asks for it.
        special: text spelling a control token ("<|im_start|>") becomes that token; otherwise it
        is tokenised as plain text. Text the vocabulary cannot spell raises InvalidArgumentError
        naming the byte offset."""
    def detokenize(self, ids: Ids, *, special: bool = False) -> str:
        """The text of ids (invalid UTF-8 replaced by U+FFFD); control tokens are skipped unless
        special. Ids outside the vocabulary raise RangeError."""
    def detokenize_bytes(self, ids: Ids, *, special: bool = False) -> bytes:
        """The raw bytes of ids (detokenize without UTF-8 decoding)."""
    def token_text(self, id: int) -> str:
        """The token as stored in the vocabulary (e.g. "Ġthe")."""
    def is_eog(self, id: int) -> bool:
        """Whether id ends generation (eos, eot, end-of-turn tokens)."""
    def detokenizer(self) -> Detokenizer:
        """A new streaming detokenizer."""
    def token_bytes(self, id: int) -> bytes:
        """The token's raw bytes (slm_tokenizer_token_bytes; may be part of a UTF-8 character)."""
    def chat_template(self, messages: Sequence[dict], *, add_generation_prompt: bool = True,
                      template: str | None = None, tokenize: bool = False, chat_template: str | None = None,
                      chat_template_kwargs: dict | str | None = None,
                      tools: list[dict] | str | None = None) -> str | list[int]:
        """Renders messages ([{"role": ..., "content": ...}]) with the model's own Jinja chat
        template (run by statelm's interpreter, as transformers renders it), the Jinja text
        chat_template, or the built-in named template ("chatml", "smollm2", "qwen3",
        "qwen3-nothink", "lfm2", "llama3", "gemma"). chat_template_kwargs (a dict, or a JSON
        object's text) adds template variables, e.g. {"enable_thinking": False}. tools: OpenAI's
        "tools" array (a list or its JSON text), rendered as the template renders tools; an
        assistant message may carry "tool_calls" (OpenAI's array, content None) and a tool
        message "tool_call_id". tokenize=True gives the ids ready to prefill
        (slm_chat_tokenize_with: control tokens only from the template's own text, never from
        message contents)."""
    def tool_format(self, *, template: str | None = None, chat_template: str | None = None) -> str | None:
        """The tool-call format of the template a chat runs (slm_chat_tool_format: "hermes",
        "qwen-xml", "lfm2", "llama3", "mistral", "mistral-args", "granite", "gpt-oss"), None
        when the template writes no tool calls."""
    def close(self) -> None:
        """Marks the model closed; its memory goes when the last session using it is gone."""
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...

class Snapshot:
    """An immutable in-memory copy of a session's whole state (states, position, history).
    Restore it into a session of the same model, context size and KV dtype, or fork new sessions
    from it, from any thread."""

    @property
    def pos(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def fork(self, *, n_ctx: int = 0, n_threads: int = 0, kv_dtype: str | None = None, kernels: str | None = None,
             checkpoint_interval: int = 0, checkpoint_budget_mib: int = 0,
             checkpoint_dir: str | os.PathLike | None = None, no_repack: bool = False,
             embeddings: bool = False, mtp: bool = False, kv_dtype_k: str | None = None,
             kv_dtype_v: str | None = None) -> "Session":
        """A new session in this state (context size and KV dtype are the snapshot's)."""
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...

class Session:
    """One instance of a model's states and its position. Holds its model. One thread at a time.

    n_ctx: context size (0 = min(n_ctx_train, 4096)); n_threads: 0 = the model's default;
    kv_dtype: the KV cache's type, "f16" (default), "f32", "q8_0" or "q4_0" (ggml's blocks, as
    llama.cpp's -ctk/-ctv; head dimension a multiple of 32, else UnsupportedError); kv_dtype_k /
    kv_dtype_v: the K and the V cache's own type (None: kv_dtype's); kernels: "auto"/None, "ref", "generic", "avx2",
    "avxvnni", "avx512", "neon" (a tier this CPU or build lacks raises UnsupportedError);
    checkpoint_interval / checkpoint_budget_mib / checkpoint_dir: checkpoints of hybrid models'
    conv and recurrent states for exact rollback (0 = defaults, interval -1 = none); mtp: keep
    the hidden states a Spec(mtp=True) drafts from (Qwen3.5 with its MTP block only)."""

    def __init__(self, model: Model, *, n_ctx: int = 0, n_threads: int = 0, kv_dtype: str | None = None,
                 kernels: str | None = None, checkpoint_interval: int = 0, checkpoint_budget_mib: int = 0,
                 checkpoint_dir: str | os.PathLike | None = None, no_repack: bool = False,
                 embeddings: bool = False, mtp: bool = False, kv_dtype_k: str | None = None,
                 kv_dtype_v: str | None = None) -> None:
        """embeddings=True also compiles the model's "embed" function, which embed() runs; mtp=True
        keeps every position's hidden state for the model's multi-token-prediction block (Spec(mtp=True))."""
    def embed(self, ids: Ids, *, pooling: str | None = None, normalize: bool = True) -> list[float] | list[list[float]]:
        """Feeds ids from the current position as prefill does (the history advances; logits are
        None until the next prefill or decode) and returns the final-norm hidden states pooled:
        pooling "mean", "cls", "last", or "none" (one vector per token); None is the model's
        pooling_type, "last" when the file names none. normalize: unit L2 norm. The hidden states
        see the whole history: reset() first to embed a text on its own. Needs a session made with
        embeddings=True (UnsupportedError otherwise)."""
    def prefill(self, ids: Ids) -> Logits:
        """Processes ids from the current position; the logits of the last one. Ids outside the
        vocabulary (RangeError) or beyond the context (ContextFullError) change nothing."""
    def decode(self, id: int) -> Logits:
        """Processes one token; its logits."""
    @staticmethod
    def decode_batch(sessions: Sequence["Session"], tokens: Sequence[int]) -> list[Logits]:
        """One decode step for several sessions of the same model (and context size, KV dtype and
        kernels) at once, each weight read once for all: every session ends exactly as after its
        own decode. On failure no session changes."""
    @property
    def logits(self) -> Logits | None:
        """The logits of the last processed token (None after rollback, restore, load, reset, or
        before the first call)."""
    @property
    def pos(self) -> int:
        """Tokens processed so far (the position of the next token)."""
    @property
    def n_ctx(self) -> int: ...
    @property
    def kernels(self) -> str:
        """The CPU kernel tier the session runs ("avx512", "avx2", "ref", ...)."""
    @property
    def history(self) -> list[int]:
        """The tokens processed so far."""
    @property
    def model(self) -> Model: ...
    @property
    def closed(self) -> bool: ...
    @property
    def checkpoint_stats(self) -> dict:
        """n_in_memory, n_on_disk, bytes_in_memory, bytes_on_disk, bytes_each, positions."""
    def rollback(self, pos: int) -> None:
        """Back to position pos in [0, self.pos], bit-exactly (hybrids: from the nearest checkpoint
        and a replay of the history). Logits are None until the next call."""
    def sync(self, ids: Ids) -> int:
        """Makes the history equal ids, computing as little as possible (rolls back to the common
        prefix and prefills the rest); returns the number of tokens reused. Logits: of ids[-1]."""
    def reset(self) -> None:
        """Position 0, states zeroed, checkpoints dropped."""
    def verify(self, ids: Ids) -> Logits:
        """Feeds k proposed tokens in one pass; returns a copy of the k rows of logits (row i after
        ids[i]), bit-identical to decoding them one by one. The session stands at pos + k; the next
        call may be accept()."""
    def accept(self, n: int) -> Logits | None:
        """Keeps the first n tokens of the last verify, as if only they had been decoded; their
        last logits."""
    def snapshot(self) -> Snapshot:
        """An immutable copy of the whole state."""
    def restore(self, snapshot: Snapshot) -> None:
        """Replaces the state with the snapshot's (StateError for another model, context size or
        KV dtype)."""
    def fork(self, *, n_ctx: int = 0, n_threads: int = 0, kv_dtype: str | None = None, kernels: str | None = None,
             checkpoint_interval: int = 0, checkpoint_budget_mib: int = 0,
             checkpoint_dir: str | os.PathLike | None = None, no_repack: bool = False,
             embeddings: bool = False, mtp: bool = False) -> Self:
        """A new, independent session in this session's current state."""
    def save(self, path: str | os.PathLike) -> None:
        """Writes the state to path atomically (a new file has mode 0600)."""
    def load_state(self, path: str | os.PathLike) -> None:
        """Replaces the state with a file written by save(); a missing, damaged, truncated or
        foreign file raises StateError/IOFailedError and changes nothing. Session.load(model, path)
        makes a session of the file's shape."""
    def close(self) -> None:
        """Releases the session (after the numpy arrays over its logits are gone). Every later
        call raises ClosedError."""
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...

class Grammar:
    """A compiled grammar (slm_grammar): GBNF text in llama.cpp's format, a JSON Schema or one tool
    call. Immutable; shared by threads and by every Sampler it constrains. docs/grammar.md has the
    GBNF and schema coverage."""

    def __init__(self, gbnf: str, *, root: str | None = None) -> None:
        """GBNF text with start rule root (default "root"). A bad grammar raises FormatError
        "grammar LINE:COL: what is wrong" (RangeError past a size cap)."""
    @classmethod
    def from_json_schema(cls, schema: dict | bool | str, *, strict: bool = False) -> Self:
        """The grammar of the JSON texts valid for schema (a dict or JSON text); {"type": "object"}
        is any JSON object. Unsupported keywords raise UnsupportedError naming them and where
        (a JSON pointer); strict also refuses keywords outside the JSON Schema vocabulary."""
    @classmethod
    def tool_call(cls, format: str, tools: list[dict] | str, name: str | None = None) -> Self:
        """One tool call in a chat template's call format (Model.tool_format()) of the tool named
        name (None: any of tools, OpenAI's "tools" array), its arguments valid for the tool's
        "parameters" schema."""

def tools_check(tools: list[dict] | str) -> None:
    """Raises InvalidArgumentError naming the entry and field of a bad OpenAI "tools" array."""

def tool_calls_parse(format: str, text: str, tools: list[dict] | str | None = None) -> str:
    """The tool calls in a generated answer, in format's markers: the JSON text of {"content": str,
    "tool_calls": [{"name": str, "arguments": JSON object text}]} (no calls: the whole text as
    content)."""

def tool_calls_content_ready(format: str, text: bytes) -> int:
    """How many bytes of text are content whatever is generated next (for streaming)."""

class Sampler:
    """Temperature, top-k, top-p, min-p and repetition penalty over a session's logits, with its
    own seeded generator (reproducible: the same seed gives the same draws as `statelm run
    --seed`), optionally constrained by a grammar. temperature 0 is greedy. Defaults are
    llama-cpp-python's."""

    def __init__(self, *, temperature: float = 0.8, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 repeat_penalty: float = 1.0, repeat_last_n: int = 64, seed: int = 0, presence_penalty: float = 0.0,
                 frequency_penalty: float = 0.0, logit_bias: dict[int | str, float] | None = None,
                 grammar: Grammar | str | None = None, json_schema: dict | str | None = None) -> None:
        """Applied in this order: logit_bias ({token id: bias}, -inf bans a token), the penalties
        over the distinct tokens of the last repeat_last_n of the history (repeat_penalty divides a
        positive logit and multiplies a negative one; then minus count * frequency_penalty +
        presence_penalty), then greedy at temperature 0, else temperature, top-k, top-p (0 keeps
        the most probable token), min-p and a draw. Out-of-range values raise
        InvalidArgumentError.

        grammar (a Grammar or GBNF text) or json_schema (a dict or JSON text): draws only tokens
        whose bytes keep the output a prefix of a string of the grammar, and an end-of-generation
        token only where the grammar may end. The constraint is made for the model of the first
        session sampled from and advanced by every token sample() returns."""
    def sample(self, session: Session) -> int:
        """Draws the next token from the session's logits (its history for the penalty); with a
        grammar, advances it by that token."""
    def probs(self, session: Session) -> Logits:
        """The distribution sample() draws from (a copy; 0 outside the kept candidates and the
        tokens the grammar refuses)."""
    def accept(self, id: int) -> None:
        """Advances the grammar by a token chosen elsewhere; InvalidArgumentError when the grammar
        does not allow it, StateError without a grammar or before the first sample()."""
    def reset(self) -> None:
        """The grammar back to its start (a new generation; Model.generate does it)."""
    @property
    def grammar(self) -> Grammar | None: ...
    @property
    def can_end(self) -> bool | None:
        """Whether the grammar may end here (None without a grammar)."""

class Spec:
    """The speculative decoding driver (slm_spec) over a target session holding logits: prompt
    lookup (draft None) or a draft model's session (same tokenizer; it is reset and follows the
    target), or with mtp=True the target model's own multi-token-prediction block (the target
    created with mtp=True). Greedy without a sampler (the exact greedy tokens), else speculative
    sampling (the sampler's distribution; a Sampler with a grammar is refused: UnsupportedError).
    Both sessions stay open while the driver lives."""

    def __init__(self, target: Session, *, draft: Session | None = None, draft_max: int = 8, fixed: bool = False,
                 sampler: Sampler | None = None, verify_cost: float = 0.3, mtp: bool = False) -> None: ...
    def step(self, n_max: int = 64) -> list[int]:
        """1 to n_max next tokens; the target then stands after them with their last logits."""
    @property
    def stats(self) -> dict:
        """n_steps, n_drafted, n_accepted, draft_len."""
    def close(self) -> None: ...
