"""Fixtures of the statelm package tests: the tiny models of every architecture (tests/data/tiny,
with Hugging Face golden data), the statelm CLI of the same build (STATELM_CLI; tests that compare
with it are skipped without it) and a scratch folder.

Environment (tests/CMakeLists.txt sets both for py_package): SLM_TEST_DATA_DIR (default: the
checkout's tests/data), STATELM_CLI (the built `statelm` program). The real model SmolLM2-135M-Instruct
(scripts/fetch-models.sh) comes from ${STATELM_CACHE:-~/.cache/statelm}/models; tests that need it
are skipped without it."""
import json
import os
import struct
from pathlib import Path

import pytest

DATA = Path(os.environ.get("SLM_TEST_DATA_DIR", Path(__file__).resolve().parents[2] / "tests" / "data"))
ARCHS = ["llama", "qwen3", "lfm2", "qwen35", "gemma3"]
HYBRIDS = ["lfm2", "qwen35"]


def tiny_path(arch, kind="f32"):
    return str(DATA / "tiny" / arch / f"{arch}-{kind}.gguf")


def golden(arch):
    """The manifest (ids, n_prompt, vocab, hf_greedy) and HF's logits rows [n_ids][vocab]."""
    g = DATA / "tiny" / arch / "golden"
    man = json.loads((g / "manifest.json").read_text())
    raw = (g / "logits.f32").read_bytes()
    vocab = man["vocab"]
    rows = [struct.unpack_from(f"<{vocab}f", raw, i * vocab * 4) for i in range(len(raw) // (vocab * 4))]
    return man, rows


@pytest.fixture(scope="session")
def statelm_cli():
    cli = os.environ.get("STATELM_CLI")
    if not cli or not os.access(cli, os.X_OK):
        pytest.skip("STATELM_CLI (the built statelm program) not given")
    return cli


SMOLLM2 = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache" / "statelm")) / "models" / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct (Q4_1), the real model of the chat, tool and grammar tests."""
    if not SMOLLM2.is_file():
        pytest.skip(f"{SMOLLM2} is absent (scripts/fetch-models.sh fetches it)")
    import statelm
    m = statelm.Model(SMOLLM2, n_ctx=1024)
    yield m
    m.close()


@pytest.fixture(scope="session")
def models():
    """One loaded f32 model per architecture, shared by the tests (Models are immutable)."""
    import statelm
    out = {arch: statelm.Model(tiny_path(arch)) for arch in ARCHS}
    yield out
    for m in out.values():
        m.close()


@pytest.fixture(params=ARCHS)
def arch(request):
    return request.param
