#!/usr/bin/env python3
"""`statelm convert` against llama.cpp's converter, and the parity of the three ways to get a
quantised model from a Hugging Face folder.

1. Each tiny HF folder (tests/data/tiny/<arch>/hf) converted at f32 and f16 is compared with the
   manifest of llama.cpp's convert_hf_to_gguf.py output (golden/convert.json, written by
   scripts/gen_convert_golden.py, read through scripts/gguf_manifest.py): the same metadata keys with
   the same types and values, except the provenance keys listed in PROVENANCE; the same tensors
   (name, ggml type, shape) in the same order, byte for byte (qwen35's ssm_a: each element within
   one ulp, see within_exp_ulp).
2. The f32 file loads in statelm and gives the logits of the folder itself, bit for bit
   (logits_digest: hashes of the raw floats of every step).
3. A quantised outtype (q8_0, q4_0, q4_k_m) writes the tensors and metadata `statelm quantize`
   writes from the f32 conversion; `statelm quantize HF_FOLDER` writes the file convert writes.
4. For the five archs and every type of `statelm quantize` (ALL_TYPES): quantisation on load of the
   folder (`--quantize T`) gives the logits of the file quantize writes from the folder, bit for
   bit, and each tensor of that file dequantised by statelm (quantize to f32) equals gguf-py's
   dequantisation of it (legacy types byte-identical to llama.cpp's quantiser: test_quantize.py).
   qwen35 with an MTP block (hf-mtp/): kept by default as llama.cpp's converter keeps it
   (golden/convert-mtp.json), dropped by --no-mtp (mtp_block).
5. Bad input: no config.json, an unknown architecture, an unknown safetensors dtype, a truncated
   safetensors file, a shape the type cannot take, an unknown outtype, a GGUF given as the folder,
   an existing output without --force, a write cut short by RLIMIT_FSIZE: exit 1, one line naming
   it, nothing left behind.
Usage: test_convert.py STATELM TESTS_DATA_DIR. Exit 77 = skipped."""
import json
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
try:
    import gguf_manifest
except ImportError:
    print("SKIPPED: the gguf Python package (with numpy) is not installed")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
digest = Path(statelm).parent / "logits_digest"
ARCHS = ("llama", "qwen3", "lfm2", "qwen35", "gemma3")
failures = []

# Keys whose values record where the file came from rather than what it holds: the converter
# names the model after its folder and model card (general.name "Hf" for a folder named hf,
# general.size_label, general.basename, ...); statelm names it after the folder as slm_model_load
# does. Every other key, general.architecture / type / file_type / quantization_version included,
# must be present on both sides with equal values.
PROVENANCE = re.compile(r"^general\.(name|basename|size_label|finetune|version|organization|license.*|"
                        r"tags|languages|base_model\..*|dataset\..*|repo_url|url|description|quantized_by)$")


def run(*args, **kw):
    return subprocess.run([statelm, *args], capture_output=True, timeout=600, **kw)


def convert_ok(label, hf, out, outtype, *extra):
    p = run("convert", "--quiet", "-m", str(hf), "-o", str(out), "--outtype", outtype, *extra)
    if p.returncode != 0:
        failures.append(f"{label}: convert exit {p.returncode}: {p.stderr.decode().strip()}")
        return False
    return True


def compare_manifest(label, got, want):
    gm, wm = got["metadata"], want["metadata"]
    for k in sorted(set(gm) | set(wm)):
        if PROVENANCE.match(k):
            continue
        if k not in gm:
            failures.append(f"{label}: key {k} missing (llama.cpp writes {wm[k]})")
        elif k not in wm:
            failures.append(f"{label}: key {k} = {gm[k]} is not in llama.cpp's file")
        elif gm[k] != wm[k]:
            failures.append(f"{label}: key {k}: {gm[k]} != llama.cpp's {wm[k]}")
    gn = [t["name"] for t in got["tensors"]]
    wn = [t["name"] for t in want["tensors"]]
    if gn != wn:
        failures.append(f"{label}: tensors {gn} != llama.cpp's {wn}")
    want_t = {t["name"]: t for t in want["tensors"]}
    for t in got["tensors"]:
        w = want_t.get(t["name"])
        if w is not None and t != w and within_exp_ulp(t, w):
            continue
        if w is not None and t != w:
            failures.append(f"{label}: tensor {t['name']}: {t['type']} {t['shape']} {t['sha256'][:12]} != llama.cpp's "
                            f"{w['type']} {w['shape']} {w['sha256'][:12]}")


def within_exp_ulp(t, w):
    """qwen35's ssm_a = -exp(A_log): the converter computes it with torch's vectorised float32 exp
    (not correctly rounded), statelm with the correctly rounded expf, so an element may differ by one ulp
    (blk.0.ssm_a[0] of the tiny model does). Same name, type, shape; every element within 1 ulp."""
    if not t["name"].endswith(".ssm_a") or "bits" not in t or "bits" not in w:
        return False
    if (t["type"], t["shape"]) != (w["type"], w["shape"]) or len(t["bits"]) != len(w["bits"]):
        return False
    return all(abs(a - b) <= 1 and (a ^ b) >> 31 == 0 for a, b in zip(t["bits"], w["bits"]))


def hashes(*args):
    p = subprocess.run([str(digest), "-n", "4", *args], capture_output=True, timeout=300)
    if p.returncode != 0 or not p.stdout:
        failures.append(f"logits_digest {args}: exit {p.returncode}: {p.stderr.decode().strip()}")
    return p.stdout


def one_error_line(p, label, pattern, out_dir):
    err = p.stderr.decode()
    lines = err.strip().splitlines()
    if p.returncode != 1 or len(lines) != 1 or not re.search(pattern, lines[0]):
        failures.append(f"{label}: exit {p.returncode}, stderr {err!r}, want one line matching {pattern!r}")
    if os.listdir(out_dir):
        failures.append(f"{label}: left behind {os.listdir(out_dir)}")


# Every type statelm quantize writes (docs/quantize.md).
ALL_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k", "f16", "bf16")


def same_as_gguf_py_dequant(label, quantised, dequantised):
    """Each tensor of `quantised`, dequantised by gguf-py (gguf.quants.dequantize, an implementation
    independent of statelm), equals that tensor in `dequantised` (statelm's F32 file of it)."""
    from gguf import GGUFReader
    from gguf.quants import dequantize
    import numpy as np
    q = {t.name: t for t in GGUFReader(str(quantised)).tensors}
    d = {t.name: t for t in GGUFReader(str(dequantised)).tensors}
    if q.keys() != d.keys():
        failures.append(f"{label}: dequantised file has tensors {sorted(d.keys() ^ q.keys())} the other lacks")
        return
    for name, t in q.items():
        want = dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32).reshape(-1)
        got = np.asarray(d[name].data, dtype=np.float32).reshape(-1)
        if want.shape != got.shape or not np.array_equal(want, got):
            bad = int(np.count_nonzero(want != got)) if want.shape == got.shape else -1
            failures.append(f"{label}: {name} ({t.tensor_type.name}) dequantised by statelm differs from "
                            f"gguf-py's in {bad} elements")


def mtp_block(tmp, d, golden):
    """qwen35 with a multi-token-prediction block (hf-mtp/: the tiny model plus mtp.*): kept by
    default as llama.cpp's converter keeps it (golden/convert-mtp.json: blk.4.nextn.*, blk.4.*,
    block_count 5, nextn_predict_layers 1), left out by --no-mtp (then the file of hf/, convert.json);
    the MTP block changes nothing the model computes (the logits of the two files are equal)."""
    hf = d / "hf-mtp"
    want = json.loads((d / "golden" / "convert-mtp.json").read_text(encoding="utf-8"))
    for outtype in ("f32", "f16"):
        out = tmp / f"qwen35-mtp-{outtype}.gguf"
        if convert_ok(f"qwen35-mtp {outtype}", hf, out, outtype):
            compare_manifest(f"qwen35-mtp {outtype}", gguf_manifest.describe(out), want["outtypes"][outtype])
    out = tmp / "qwen35-nomtp-f32.gguf"
    if convert_ok("qwen35-mtp --no-mtp", hf, out, "f32", "--no-mtp"):
        compare_manifest("qwen35-mtp --no-mtp", gguf_manifest.describe(out), golden["outtypes"]["f32"])
    with_mtp = tmp / "qwen35-mtp-f32.gguf"
    def steps(h):  # the hashes, not the header (its weight_bytes counts the MTP block)
        return [ln for ln in h.splitlines() if not ln.startswith(b"model ")]
    if digest.exists() and with_mtp.exists() and steps(hashes("-m", str(with_mtp))) != steps(hashes("-m", str(out))):
        failures.append("qwen35-mtp: the MTP block changes the logits of the model")


def without_provenance(m):
    return {k: v for k, v in m["metadata"].items() if not PROVENANCE.match(k)}


if not digest.exists():
    failures.append(f"{digest} is missing (build the logits_digest target)")

with tempfile.TemporaryDirectory() as tmp_s:
    tmp = Path(tmp_s)
    for arch in ARCHS:
        hf = data / "tiny" / arch / "hf"
        golden = json.loads((data / "tiny" / arch / "golden" / "convert.json").read_text(encoding="utf-8"))
        # ---- 1: the converter's file
        for outtype in ("f32", "f16"):
            out = tmp / f"{arch}-{outtype}.gguf"
            if convert_ok(f"{arch} {outtype}", hf, out, outtype):
                compare_manifest(f"{arch} {outtype}", gguf_manifest.describe(out), golden["outtypes"][outtype])
        f32 = tmp / f"{arch}-f32.gguf"
        if not f32.exists():
            continue
        # ---- 2: the file runs as the folder
        if digest.exists() and hashes("-m", str(f32)) != hashes("-m", str(hf)):
            failures.append(f"{arch}: logits of the converted f32 file differ from the folder's")
        # ---- 3: quantised outtypes = quantize of the f32 conversion
        for t in ("q8_0", "q4_0", "q4_k_m"):
            conv, quant = tmp / f"{arch}-{t}-convert.gguf", tmp / f"{arch}-{t}-quantize.gguf"
            if not convert_ok(f"{arch} {t}", hf, conv, t):
                continue
            p = run("quantize", "--quiet", str(f32), str(quant), t)
            if p.returncode != 0:
                failures.append(f"{arch} {t}: quantize exit {p.returncode}: {p.stderr.decode().strip()}")
                continue
            c, q = gguf_manifest.describe(conv), gguf_manifest.describe(quant)
            if c["tensors"] != q["tensors"]:
                diff = [a["name"] for a, b in zip(c["tensors"], q["tensors"]) if a != b]
                failures.append(f"{arch} {t}: convert --outtype and quantize of the f32 file differ in {diff or 'order'}")
            if without_provenance(c) != without_provenance(q):
                failures.append(f"{arch} {t}: metadata of convert --outtype and quantize differ")
            via_quantize = tmp / f"{arch}-{t}-hf-quantize.gguf"
            p = run("quantize", "--quiet", str(hf), str(via_quantize), t)
            if p.returncode != 0 or via_quantize.read_bytes() != conv.read_bytes():
                failures.append(f"{arch} {t}: quantize HF_FOLDER exit {p.returncode} "
                                f"{p.stderr.decode().strip()}: not the file convert writes")
            via_quantize.unlink(missing_ok=True)
        if arch == "qwen35":
            mtp_block(tmp, data / "tiny" / "qwen35", golden)
        # ---- 4: every type: quantisation on load of the folder = the file quantize writes from it;
        # that file's tensors dequantised by statelm = gguf-py's dequantisation of them
        for t in ALL_TYPES:
            out = tmp / f"{arch}-{t}-load.gguf"
            p = run("quantize", "--quiet", str(hf), str(out), t)
            if p.returncode != 0:
                failures.append(f"{arch} {t}: quantize HF_FOLDER exit {p.returncode}: {p.stderr.decode().strip()}")
                continue
            if digest.exists() and hashes("-m", str(hf), "--quantize", t) != hashes("-m", str(out)):
                failures.append(f"{arch} {t}: logits of the folder quantised on load differ from the quantised file's")
            deq = tmp / f"{arch}-{t}-deq.gguf"
            p = run("quantize", "--quiet", str(out), str(deq), "f32")
            if p.returncode != 0:
                failures.append(f"{arch} {t}: quantize to f32 exit {p.returncode}: {p.stderr.decode().strip()}")
            else:
                same_as_gguf_py_dequant(f"{arch} {t}", out, deq)
                deq.unlink()
            out.unlink()

    # ---- 5: bad input
    bad_out = tmp / "bad-out"
    bad_out.mkdir()
    dst = str(bad_out / "out.gguf")
    src = data / "tiny" / "llama" / "hf"

    def folder(name, edit=None):
        d = tmp / name
        shutil.copytree(src, d)
        if edit:
            edit(d)
        return d

    no_config = folder("no-config", lambda d: (d / "config.json").unlink())
    one_error_line(run("convert", "-m", str(no_config), "-o", dst), "no config.json", r"config\.json", bad_out)

    def unknown_arch(d):
        c = json.loads((d / "config.json").read_text())
        c["model_type"] = "gpt_neox"
        (d / "config.json").write_text(json.dumps(c))
    one_error_line(run("convert", "-m", str(folder("arch", unknown_arch)), "-o", dst), "unknown architecture",
                   r"unsupported architecture 'gpt_neox'", bad_out)

    def unknown_dtype(d):
        raw = (d / "model.safetensors").read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        name = next(k for k in sorted(header) if k != "__metadata__")
        header[name]["dtype"] = "F8_E4M3"
        sz = 1
        for s in header[name]["shape"]:
            sz *= s
        begin = header[name]["data_offsets"][0]
        header[name]["data_offsets"] = [begin, begin + sz]
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        (d / "model.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + raw[8 + n:])
    one_error_line(run("convert", "-m", str(folder("dtype", unknown_dtype)), "-o", dst), "unknown dtype",
                   r"F8_E4M3", bad_out)

    def truncated(d):
        raw = (d / "model.safetensors").read_bytes()
        (d / "model.safetensors").write_bytes(raw[:len(raw) // 2])
    one_error_line(run("convert", "-m", str(folder("truncated", truncated)), "-o", dst), "truncated safetensors",
                   r"model\.safetensors", bad_out)
    one_error_line(run("convert", "-m", str(src), "-o", dst, "--outtype", "q4_0", "--token-embedding-type", "q4_k"),
                   "shape", r"tensor 'token_embd\.weight': rows of 64 elements are not a whole number of q4_k blocks",
                   bad_out)
    one_error_line(run("convert", "-m", str(src), "-o", dst, "--outtype", "q3_k"), "outtype",
                   r"unknown quantisation type 'q3_k'", bad_out)
    one_error_line(run("convert", "-m", str(data / "tiny" / "llama" / "llama-f32.gguf"), "-o", dst), "a GGUF",
                   r"is not a folder", bad_out)

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
    p = subprocess.run([statelm, "convert", "--quiet", "-m", str(data / "tiny" / "gemma3" / "hf"), "-o", dst,
                        "--outtype", "f32"], capture_output=True, timeout=120, preexec_fn=limit)
    one_error_line(p, "RLIMIT_FSIZE", r"cannot write .*out\.gguf: File too large", bad_out)
    Path(dst).write_bytes(b"keep")
    p = run("convert", "-m", str(src), "-o", dst, "--quiet")
    if p.returncode != 1 or "exists" not in p.stderr.decode() or Path(dst).read_bytes() != b"keep":
        failures.append(f"existing output: exit {p.returncode}, {p.stderr.decode().strip()!r}")
    p = run("convert", "-m", str(src), "-o", dst, "--quiet", "--force", "--outtype", "f32")
    if p.returncode != 0 or Path(dst).read_bytes()[:4] != b"GGUF":
        failures.append(f"--force: exit {p.returncode}, {p.stderr.decode().strip()!r}")
    if sorted(os.listdir(bad_out)) != ["out.gguf"]:
        failures.append(f"--force: left {os.listdir(bad_out)}")

for f in failures:
    print("FAIL:", f)
print("test_convert:", "FAILED" if failures else "ok")
sys.exit(1 if failures else 0)
