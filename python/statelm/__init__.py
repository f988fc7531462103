"""statelm: small language models whose state is first-class, from Python.

    import statelm
    model = statelm.Model("SmolLM2-135M-Instruct.Q4_1.gguf")
    print(model.generate("The capital of France is", max_tokens=16, stream=False))

Model (GGUF file or Hugging Face folder), Tokenizer (only a file's tokenizer: vocab-only GGUFs, any
architecture), Session (prefill/decode, zero-copy logits, snapshot,
fork, rollback, sync, save/load, verify/accept, embeddings), Sampler (with a Grammar: GBNF, JSON
Schema or a tool call), speculative decoding (Spec, or generate(lookup=True / draft_model=...)),
and llama-cpp-python-shaped completions (logprobs, response_format, tools) and embeddings. Errors are
StatelmError subclasses carrying the library's status name and message. docs/python.md has a tour.
"""

from ._errors import (AbortedError, BackendError, ClosedError, ContextFullError, FormatError, InvalidArgumentError,
                      IOFailedError, NotFoundError, OutOfMemoryError, RangeError, SessionBusyError, ShapeError,
                      StateError, StatelmError, UnsupportedError)
from ._statelm import Detokenizer, Grammar, Logits, Sampler, Snapshot, Spec, Tokenizer, draft_lookup, status_name
from ._statelm import version as __version__
from ._core import Model, Session, Token

__all__ = [
    "Model", "Session", "Snapshot", "Logits", "Sampler", "Grammar", "Spec", "Detokenizer", "Tokenizer", "Token", "draft_lookup",
    "status_name", "StatelmError", "ClosedError", "SessionBusyError", "InvalidArgumentError", "OutOfMemoryError",
    "IOFailedError", "FormatError", "UnsupportedError", "ShapeError", "RangeError", "ContextFullError", "StateError",
    "BackendError", "AbortedError", "NotFoundError",
]
