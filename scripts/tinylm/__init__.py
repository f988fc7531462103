"""Helpers for statelm's tiny random-weight test models (see tests/data/tiny/README.md).

Modules:
  spec       configs of the five tiny models and the two full-size shapes, paths, seeds
  tokenizer  the shared tiny byte-level BPE tokenizer and its per-family tokenizer.json variants
  weights    deterministic random weights (numpy only)
  convert    HF (safetensors + config.json) -> GGUF, mirroring llama.cpp's convert_hf_to_gguf.py
  shapes     HF parameter names and shapes from a config dict (for the torch-free full-size models)
  jsonfmt    compact JSON for the committed manifests

Nothing here imports torch or transformers; gen_tiny_models.py (tiny HF folders) and
gen_tiny_golden.py do.
"""
