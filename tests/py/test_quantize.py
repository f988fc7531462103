#!/usr/bin/env python3
"""`statelm quantize` against the gguf Python package (gguf-py) and llama-quantize's rules.

1. Legacy types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and BF16, F16 with --pure: every tensor byte for
   byte equal to gguf-py's quantisers (gguf.quants.quantize, llama.cpp's reference rounding; F16:
   numpy's float16 cast) of the same F32 data; 1-D tensors copied; metadata copied with
   general.file_type / general.quantization_version as llama-quantize sets them.
2. K-quant tensors dequantised by gguf-py (gguf.quants.dequantize) within the type's error of the
   source, so the block layout is the one gguf-py reads.
3. The mix rules (docs/quantize.md, from llama.cpp src/llama-quant.cpp) on an 8-layer model:
   per tensor the type llama-quantize picks, worked out in the table below from its rules.
4. The options --leave-output, --token-embedding-type, --output-tensor-type, --pure, --force.
   A Q8_0 file dequantised to F32 equals gguf-py's dequantisation.
5. Bad input: unknown type, existing output, truncated source, requantising, non-finite values,
   a shape the requested type cannot take: one line naming it, non-zero exit, no file left behind;
   the same for a write cut short by RLIMIT_FSIZE. (A Hugging Face folder as IN is converted
   first: tests/py/test_convert.py.)
6. Every tiny model quantised to every type loads and runs in statelm.
7. Quantisation on load (slm_model_params.quantize, run --quantize): the logits of every step
   (logits_digest: hashes of the raw floats) equal those of the file statelm quantize writes from
   the same GGUF; from a Hugging Face folder too, wherever the folder and its GGUF give
   bit-identical f32 logits (all five: HF folders load in the converter's layout,
   src/model/hf_layout.c; tests/py/test_convert.py checks the folder against its own quantised file).
Usage: test_quantize.py STATELM TESTS_DATA_DIR. Exit 77 = skipped."""
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy as np
    import gguf
    from gguf.quants import quantize, dequantize
except ImportError:
    print("SKIPPED: the gguf Python package (with numpy) is not installed")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
failures = []
Q = gguf.GGMLQuantizationType
N_LAYER = 8
D = 256


def run(*args, **kw):
    return subprocess.run([statelm, *args], capture_output=True, timeout=600, **kw)


def write_model(path, tensors, tied=False):
    """A llama-shaped GGUF (F32) holding `tensors` (name -> array), not meant to run."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(N_LAYER)
    w.add_name("quantize test")
    w.add_file_type(0)
    w.add_string("test.marker", "kept")
    for name, a in tensors.items():
        if tied and name == "output.weight":
            continue
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def model_tensors(rng):
    t = {"token_embd.weight": rng.standard_normal((48, D)), "output.weight": rng.standard_normal((48, D)),
         "output_norm.weight": rng.standard_normal(D)}
    for i in range(N_LAYER):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = rng.standard_normal(D)
        t[p + "attn_q.weight"] = rng.standard_normal((64, D))
        t[p + "attn_k.weight"] = rng.standard_normal((32, D))
        t[p + "attn_v.weight"] = rng.standard_normal((32, D))
        t[p + "attn_output.weight"] = rng.standard_normal((D, 64))  # rows of 64: K-quant fallback
        t[p + "ffn_gate.weight"] = rng.standard_normal((64, D))
        t[p + "ffn_up.weight"] = rng.standard_normal((64, D))
        t[p + "ffn_down.weight"] = rng.standard_normal((D, 256))
    t["blk.0.attn_q_b.weight"] = rng.standard_normal((8, 40))  # rows of 40: no 32-block fits -> F16
    t["blk.0.shortconv.conv.weight"] = rng.standard_normal((D, 3))  # never quantised
    return {k: (v * 0.05).astype(np.float32) for k, v in t.items()}


def read(path):
    r = gguf.GGUFReader(str(path))
    return r, {t.name: t for t in r.tensors}


def field(r, key):
    f = r.fields.get(key)
    if f is None:
        return None
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode()
    return f.parts[f.data[0]].tolist()[0]


def quantize_ok(label, *args):
    p = run("quantize", "--quiet", *args)
    if p.returncode != 0:
        failures.append(f"{label}: exit {p.returncode}: {p.stderr.decode().strip()}")
        return False
    return True


def one_error_line(p, label, pattern, out_dir):
    err = p.stderr.decode()
    lines = err.strip().splitlines()
    if p.returncode == 0 or len(lines) != 1 or not re.search(pattern, lines[0]):
        failures.append(f"{label}: exit {p.returncode}, stderr {err!r}, want one line matching {pattern!r}")
    left = sorted(f for f in os.listdir(out_dir) if ".tmp" in f)
    if left:
        failures.append(f"{label}: left behind {left}")


# Types of llama-quantize's mixes on the model above (llama.cpp src/llama-quant.cpp):
# use_more_bits(i, 8) holds for layers 0, 3, 6, 7 (i < 1, i >= 7, (i - 1) % 3 == 2);
# output.weight -> Q6_K; attn_output (rows of 64) falls back Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0;
# attn_q_b (rows of 40) falls back to F16; norms and shortconv stay F32.
MORE = {0, 3, 6, 7}


def want_mix(name, mix):
    base = {"q4_k_m": "Q4_K", "q4_k_s": "Q4_K", "q5_k_m": "Q5_K", "q5_k_s": "Q5_K", "q6_k": "Q6_K",
            "q4_0": "Q4_0", "q8_0": "Q8_0"}[mix]
    fb = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
    if name.endswith("norm.weight") or "shortconv" in name:
        return "F32"
    if name == "output.weight":
        return "Q8_0" if base == "Q8_0" else "Q6_K"
    if name == "blk.0.attn_q_b.weight":
        return "F16"
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    if "attn_output" in name:
        return fb.get(base, base)
    if "attn_v" in name or "ffn_down" in name:
        if mix in ("q4_k_m", "q5_k_m") and layer in MORE:
            return "Q6_K"
        if mix == "q4_k_s" and (("attn_v" in name and layer < 4) or ("ffn_down" in name and layer < N_LAYER // 8)):
            return "Q5_K"
    return base


with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    rng = np.random.default_rng(27)
    src = model_tensors(rng)
    f32 = tmp / "m-f32.gguf"
    write_model(f32, src)
    r_in, _ = read(f32)

    # ---- 1: legacy types, F16 and BF16, --pure, byte for byte against gguf-py
    for name, qt, ftype in (("q4_0", Q.Q4_0, 2), ("q4_1", Q.Q4_1, 3), ("q5_0", Q.Q5_0, 8), ("q5_1", Q.Q5_1, 9),
                            ("q8_0", Q.Q8_0, 7), ("bf16", Q.BF16, 32), ("f16", Q.F16, 1)):
        out = tmp / f"m-{name}.gguf"
        if not quantize_ok(name, "--pure", str(f32), str(out), name.upper()):
            continue
        r, ts = read(out)
        if field(r, "general.file_type") != ftype or field(r, "general.quantization_version") != 2:
            failures.append(f"{name}: file_type {field(r, 'general.file_type')}, "
                            f"quantization_version {field(r, 'general.quantization_version')}")
        for key in ("general.name", "test.marker", "llama.block_count"):
            if field(r, key) != field(r_in, key):
                failures.append(f"{name}: {key} is {field(r, key)!r}, source {field(r_in, key)!r}")
        if set(ts) != set(src):
            failures.append(f"{name}: tensors {sorted(set(ts) ^ set(src))} differ")
            continue
        for tn, a in src.items():
            t = ts[tn]
            got = np.asarray(t.data).tobytes()
            if a.ndim == 1 or "shortconv" in tn:
                want_type, want = Q.F32, a.tobytes()
            elif a.shape[1] % 32 != 0 and qt not in (Q.F16, Q.BF16):
                want_type, want = Q.F16, a.astype(np.float16).tobytes()
            elif qt == Q.F16:
                want_type, want = Q.F16, a.astype(np.float16).tobytes()
            else:
                want_type, want = qt, quantize(a, qt).tobytes()
            if t.tensor_type != want_type or got != want:
                failures.append(f"{name}: {tn} is {t.tensor_type.name}, want {want_type.name}; bytes equal: {got == want}")
            if list(t.shape) != list(reversed(a.shape)):
                failures.append(f"{name}: {tn} shape {list(t.shape)}, want {list(reversed(a.shape))}")

    # ---- 2 and 3: the mixes: types per tensor, K-quant layouts through gguf-py's dequantisers
    for mix in ("q4_k_m", "q4_k_s", "q5_k_m", "q5_k_s", "q6_k", "q4_0", "q8_0"):
        out = tmp / f"mix-{mix}.gguf"
        if not quantize_ok(mix, str(f32), str(out), mix):
            continue
        r, ts = read(out)
        for tn, a in src.items():
            want = want_mix(tn, mix)
            t = ts[tn]
            if t.tensor_type.name != want:
                failures.append(f"{mix}: {tn} is {t.tensor_type.name}, llama-quantize's rule gives {want}")
                continue
            if t.tensor_type in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
                deq = dequantize(np.asarray(t.data), t.tensor_type).reshape(a.shape)
                bits = {Q.Q4_K: 4, Q.Q5_K: 5, Q.Q6_K: 6}[t.tensor_type]
                rel = float(np.sqrt(np.mean((deq - a) ** 2)) / np.sqrt(np.mean(a ** 2)))
                if not rel < 2.0 ** -(bits - 1):
                    failures.append(f"{mix}: {tn} dequantised by gguf-py is off by {rel:.4f} RMS (relative)")

    # tied embeddings (no output.weight): token_embd takes the output rule
    tied = tmp / "tied-f32.gguf"
    write_model(tied, src, tied=True)
    out = tmp / "tied-q4_0.gguf"
    if quantize_ok("tied q4_0", str(tied), str(out), "q4_0"):
        _, ts = read(out)
        if ts["token_embd.weight"].tensor_type != Q.Q6_K:
            failures.append(f"tied q4_0: token_embd is {ts['token_embd.weight'].tensor_type.name}, want Q6_K")

    # ---- 4: options
    out = tmp / "opt.gguf"
    if quantize_ok("options", "--leave-output", "--token-embedding-type", "q8_0", str(f32), str(out), "q4_k_m"):
        _, ts = read(out)
        got = (ts["output.weight"].tensor_type, ts["token_embd.weight"].tensor_type)
        if got != (Q.F32, Q.Q8_0):
            failures.append(f"--leave-output --token-embedding-type q8_0: {got}")
        before = out.read_bytes()
        p = run("quantize", "--quiet", str(f32), str(out), "q4_0")
        one_error_line(p, "existing output", r"opt\.gguf exists", tmp)
        if out.read_bytes() != before:
            failures.append("existing output: changed without --force")
    if quantize_ok("--force --output-tensor-type", "--force", "--output-tensor-type", "f16", str(f32), str(out), "q8_0"):
        _, ts = read(out)
        if ts["output.weight"].tensor_type != Q.F16 or ts["blk.0.attn_q.weight"].tensor_type != Q.Q8_0:
            failures.append("--force --output-tensor-type f16: types "
                            f"{ts['output.weight'].tensor_type.name}, {ts['blk.0.attn_q.weight'].tensor_type.name}")
    out = tmp / "pure.gguf"
    if quantize_ok("--pure q4_k", "--pure", str(f32), str(out), "q4_k"):
        _, ts = read(out)
        for tn in ("output.weight", "blk.0.attn_v.weight", "blk.0.ffn_down.weight"):
            if ts[tn].tensor_type != Q.Q4_K:
                failures.append(f"--pure q4_k: {tn} is {ts[tn].tensor_type.name}")

    # ---- 5: bad input
    bad_dir = tmp / "bad"
    bad_dir.mkdir()
    dst = str(bad_dir / "out.gguf")
    one_error_line(run("quantize", "--quiet", str(f32), dst, "q3_k"), "unknown type", r"unknown quantisation type 'q3_k'", bad_dir)
    one_error_line(run("quantize", "--quiet", str(f32), dst, "q4_0", "--token-embedding-type", "iq2"), "unknown tensor type",
                   r"token embedding type 'iq2'", bad_dir)
    cut = tmp / "cut.gguf"
    cut.write_bytes(f32.read_bytes()[: f32.stat().st_size - 1000])
    one_error_line(run("quantize", "--quiet", str(cut), dst, "q4_0"), "truncated source", r"cut\.gguf: tensor .* lies outside the file", bad_dir)
    one_error_line(run("quantize", "--quiet", str(tmp / "m-q4_0.gguf"), dst, "q8_0"), "requantising",
                   r"tensor '[^']+' is q4_0: requantising", bad_dir)
    odd = dict(src)
    odd["token_embd.weight"] = rng.standard_normal((8, 96)).astype(np.float32)
    odd_path = tmp / "odd.gguf"
    write_model(odd_path, odd)
    one_error_line(run("quantize", "--quiet", "--token-embedding-type", "q4_k", str(odd_path), dst, "q8_0"), "shape",
                   r"tensor 'token_embd\.weight': rows of 96 elements are not a whole number of q4_k blocks of 256",
                   bad_dir)
    nan = dict(src)
    nan["blk.2.ffn_up.weight"] = nan["blk.2.ffn_up.weight"].copy()
    nan["blk.2.ffn_up.weight"][5, 7] = np.nan
    nan_path = tmp / "nan.gguf"
    write_model(nan_path, nan)
    one_error_line(run("quantize", "--quiet", str(nan_path), dst, "q4_0"), "non-finite",
                   r"tensor 'blk\.2\.ffn_up\.weight': row 5 holds a non-finite value", bad_dir)
    if os.path.exists(dst):
        failures.append("bad input: the output file exists")

    # RLIMIT_FSIZE: the write fails (EFBIG) and the temporary file is removed
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
    p = subprocess.run([statelm, "quantize", "--quiet", str(f32), dst, "q8_0"], capture_output=True, timeout=120,
                       preexec_fn=limit)
    one_error_line(p, "RLIMIT_FSIZE", r"cannot write .*out\.gguf: File too large", bad_dir)
    if os.listdir(bad_dir):
        failures.append(f"RLIMIT_FSIZE: left {os.listdir(bad_dir)}")

    # dequantising: a Q8_0 file to F32 equals gguf-py's dequantisation
    out = tmp / "deq-f32.gguf"
    if quantize_ok("q8_0 -> f32", str(data / "tiny" / "llama" / "llama-q8_0.gguf"), str(out), "f32"):
        _, ts = read(out)
        r_q, tq = read(data / "tiny" / "llama" / "llama-q8_0.gguf")
        for tn, t in tq.items():
            want = dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32).tobytes()
            if ts[tn].tensor_type != Q.F32 or np.asarray(ts[tn].data).tobytes() != want:
                failures.append(f"q8_0 -> f32: {tn} is {ts[tn].tensor_type.name}, not gguf-py's dequantisation")

    # ---- 6: the tiny models, every type: loads and generates
    for arch in ("llama", "qwen3", "lfm2", "qwen35", "gemma3"):
        model = data / "tiny" / arch / f"{arch}-f32.gguf"
        for t in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k_m", "q4_k_s", "q5_k_m", "q6_k", "f16", "bf16"):
            out = tmp / f"{arch}-{t}.gguf"
            if not quantize_ok(f"{arch} {t}", str(model), str(out), t):
                continue
            p = run("run", "-m", str(out), "--prompt-ids", "1,2,3", "-n", "2", "--temp", "0", "--ids")
            if p.returncode != 0 or len(p.stdout.split()) != 2:
                failures.append(f"{arch} {t}: run exit {p.returncode}: {p.stderr.decode().strip()[:200]}")
            out.unlink()

    # ---- 7: quantisation on load
    digest = Path(statelm).parent / "logits_digest"
    if not digest.exists():
        failures.append(f"{digest} is missing (build the logits_digest target)")
    else:
        def hashes(*args):
            p = subprocess.run([str(digest), "-n", "4", *args], capture_output=True, timeout=300)
            if p.returncode != 0:
                failures.append(f"logits_digest {args}: {p.stderr.decode().strip()}")
            return p.stdout
        n_hf = 0
        for arch in ("llama", "qwen3", "lfm2", "qwen35", "gemma3"):
            model = data / "tiny" / arch / f"{arch}-f32.gguf"
            hf = data / "tiny" / arch / "hf"
            hf_same = hashes("-m", str(hf)) == hashes("-m", str(model))
            for t in ("q4_0", "q5_1", "q4_k_m", "q6_k"):
                out = tmp / f"{arch}-{t}-load.gguf"
                if not quantize_ok(f"{arch} {t}", str(model), str(out), t):
                    continue
                want = hashes("-m", str(out))
                if hashes("-m", str(model), "--quantize", t) != want:
                    failures.append(f"{arch} {t}: logits quantised on load differ from the quantized file's")
                if hf_same:
                    n_hf += 1
                    if hashes("-m", str(hf), "--quantize", t) != want:
                        failures.append(f"{arch} {t}: logits of the HF folder quantised on load differ")
        if n_hf == 0:
            failures.append("no HF folder gives the f32 logits of its GGUF: the HF half of check 7 ran on nothing")
        p = run("run", "-m", str(data / "tiny" / "qwen3" / "hf"), "--quantize", "q3_k", "--prompt-ids", "1", "-n", "1")
        if p.returncode == 0 or "unknown quantisation type 'q3_k'" not in p.stderr.decode():
            failures.append(f"run --quantize q3_k: exit {p.returncode}, {p.stderr.decode().strip()}")

for f in failures:
    print("FAIL:", f)
print("test_quantize:", "FAILED" if failures else "ok")
sys.exit(1 if failures else 0)
