#!/usr/bin/env python3
"""Generates the golden data for tests/unit/test_dtype.c and tests/unit/test_gguf.c, and the seed
corpus of tests/fuzz/fuzz_gguf.c, from independent implementations: the `gguf` Python package
(0.19: GGUFWriter, GGUFReader, gguf.quants) and numpy. Nothing here uses statelm.

Run:  ~/.cache/statelm/venv/bin/python tests/data/gguf/gen_gguf_golden.py
Writes (all deterministic, fixed seeds):
  tests/data/gguf/dtype_golden.bin   dequantisation records (format below)
  tests/data/gguf/small.gguf, meta.gguf, tensors.gguf, be.gguf   files written by GGUFWriter
  tests/data/gguf/golden.txt         what test_gguf.c must read back from those files
  tests/data/gguf/smollm2_golden.txt only when ~/.cache/statelm/models/SmolLM2-135M-Instruct.Q4_1.gguf
                                     exists (scripts/fetch-models.sh); the committed copy is reused
  tests/data/corpus/gguf/*           fuzz seeds (valid files and hand-made invalid ones)

dtype_golden.bin (little-endian): "SLMDQ1\\0\\0", u32 n_records, then per record
  u32 type, u32 n_elems, u32 n_bytes, u32 source (0 = gguf.quants.dequantize, 1 = numpy formula
  for types gguf-py lacks: Q8_1, Q8_K), n_bytes block bytes, n_elems f32 expected values.

golden.txt / smollm2_golden.txt: one record per line, tokens separated by single spaces.
  file NAME                       following lines describe tests/data/gguf/NAME (or the model)
  header VERSION ALIGNMENT DATA_START N_KV N_TENSORS
  kv KEY RENDER                   the value of KEY, rendered canonically (see render())
  arrlen KEY N                    KEY is an array of N elements
  arrelem KEY I RENDER            element I of array KEY
  tensor NAME TYPE N_DIMS NE0 NE1 NE2 NE3 OFFSET SIZE CRC32 N ROW...
        OFFSET relative to data_start, CRC32 (zlib) of the tensor's bytes, then the first N
        elements (the first row, as gguf-py dequantises it) as f32 bit patterns in hex; N = 0
        for types without a dequantiser (I8..I64, F64).
  trunc_ok_from N                 every prefix shorter than N bytes must fail to parse, N and longer parse
  end
"""
import os
import shutil
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import gguf
from gguf import GGUFReader, GGUFWriter
from gguf.constants import GGMLQuantizationType as T
from gguf.constants import GGUFEndian
from gguf.constants import GGUFValueType as V
import gguf.quants as gq

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "corpus" / "gguf"
MODEL = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache" / "statelm")) / "models" / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"

VT_NAME = {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32", V.INT32: "i32",
           V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "str", V.ARRAY: "arr", V.UINT64: "u64",
           V.INT64: "i64", V.FLOAT64: "f64"}
VT_ELEM_NAME = {**VT_NAME, V.STRING: "string", V.ARRAY: "array"}

# Block geometry from docs/spec/gguf.md §3 (ggml-common.h static asserts). gguf-py 0.19's
# GGML_QUANT_SIZES agrees except for Q8_1, which it lists with the old 40-byte layout (f32 d and s);
# ggml's block_q8_1 has been 36 bytes (f16 d, f16 s, 32 int8) for a long time, so Q8_1 tensors are
# written and sliced here with the spec's size, never gguf-py's.
SIZES = {t: gq.GGML_QUANT_SIZES[t] for t in gq.GGML_QUANT_SIZES}
SIZES[T.Q8_1] = (32, 36)

# Types whose dequantisation is checked; others are stored but have no row values.
DEQUANT_TYPES = {T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q8_1, T.Q2_K, T.Q3_K,
                 T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K}


# ---- canonical rendering (test_gguf.c renders parsed values the same way) ----------------------

def render_str(b: bytes) -> str:
    out = []
    for c in b:
        if 0x21 <= c <= 0x7E and c not in (0x22, 0x5C):
            out.append(chr(c))
        else:
            out.append("\\x%02x" % c)
    return 'str:"' + "".join(out) + '"'


def render(vtype, val, sub=None) -> str:
    """vtype/val as passed to GGUFWriter.add_key_value; for arrays sub is the element type (nested
    elements follow GGUFWriter's inference: list -> array, int -> i32, float -> f32, str, bool)."""
    if vtype == V.STRING:
        return render_str(val.encode("utf-8") if isinstance(val, str) else bytes(val))
    if vtype == V.FLOAT32:
        return "f32:0x%08x" % struct.unpack("<I", struct.pack("<f", val))[0]
    if vtype == V.FLOAT64:
        return "f64:0x%016x" % struct.unpack("<Q", struct.pack("<d", val))[0]
    if vtype == V.BOOL:
        return "bool:%d" % (1 if val else 0)
    if vtype == V.ARRAY:
        if sub is None:
            sub = V.get_type(val[0])
        return "arr<%s>[%s]" % (VT_ELEM_NAME[sub], ",".join(render(sub, x) for x in val))
    return "%s:%d" % (VT_NAME[vtype], int(val))


# ---- quantised blocks ----------------------------------------------------------------------

def f16_bytes(x):
    return np.asarray(x, dtype=np.float16).view(np.uint8)


def sane_blocks(t: T, n_blocks: int, rng) -> np.ndarray:
    """Random block bytes whose f16/f32 scale fields hold finite values of sensible size."""
    be, bb = SIZES[t]
    b = rng.integers(0, 256, (n_blocks, bb), dtype=np.uint8)
    def setf16(off, lo, hi, signed=True):
        v = rng.uniform(lo, hi, n_blocks)
        if signed:
            v *= rng.choice([-1.0, 1.0], n_blocks)
        b[:, off:off + 2] = f16_bytes(v).reshape(n_blocks, 2)
    if t in (T.Q4_0, T.Q5_0, T.Q8_0):
        setf16(0, 1e-3, 0.5)
    elif t in (T.Q4_1, T.Q5_1):
        setf16(0, 1e-3, 0.5); setf16(2, 1e-3, 2.0)
    elif t == T.Q8_1:
        setf16(0, 1e-3, 0.5); setf16(2, 1e-3, 50.0)
    elif t == T.Q2_K:
        setf16(80, 1e-3, 0.1); setf16(82, 1e-3, 0.1)
    elif t == T.Q3_K:
        setf16(108, 1e-3, 0.1)
    elif t in (T.Q4_K, T.Q5_K):
        setf16(0, 1e-4, 0.05); setf16(2, 1e-4, 0.05)
    elif t == T.Q6_K:
        setf16(208, 1e-4, 0.05)
    elif t == T.Q8_K:
        d = (rng.uniform(1e-3, 0.1, n_blocks) * rng.choice([-1.0, 1.0], n_blocks)).astype(np.float32)
        b[:, 0:4] = d.view(np.uint8).reshape(n_blocks, 4)
    else:
        raise ValueError(t)
    return b


def numpy_dequant(t: T, raw: np.ndarray) -> np.ndarray:
    """Dequantisation by an independent implementation: gguf-py, or for the two types gguf-py lacks
    the block formula of docs/spec/gguf.md §4 written directly in numpy (y = d * q)."""
    raw = np.ascontiguousarray(raw).reshape(-1)
    if t == T.Q8_1:
        b = raw.reshape(-1, 36)
        d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
        q = b[:, 4:36].copy().view(np.int8).astype(np.float32)
        return (q * d).reshape(-1)
    if t == T.Q8_K:
        b = raw.reshape(-1, 292)
        d = b[:, 0:4].copy().view(np.float32)
        q = b[:, 4:260].copy().view(np.int8).astype(np.float32)
        return (d * q).reshape(-1)
    if t == T.F32:
        return raw.view(np.float32).copy()
    return gq.dequantize(raw, t).reshape(-1).astype(np.float32)


def random_f16_bits(n, rng):
    bits = rng.integers(0, 0x10000, n, dtype=np.uint32).astype(np.uint16)
    nan = (bits & 0x7C00) == 0x7C00
    bits[nan & ((bits & 0x3FF) != 0)] &= 0xFC00  # NaN -> inf (gguf-py and C may differ on payloads)
    specials = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
                         0x7C00, 0xFC00, 0x3555, 0x0200], dtype=np.uint16)
    bits[: len(specials)] = specials
    return bits


def random_bf16_bits(n, rng):
    bits = rng.integers(0, 0x10000, n, dtype=np.uint32).astype(np.uint16)
    nan = ((bits & 0x7F80) == 0x7F80) & ((bits & 0x7F) != 0)
    bits[nan] &= 0xFF80
    specials = np.array([0x0000, 0x8000, 0x0001, 0x3F80, 0xBF80, 0x7F7F, 0x7F80, 0xFF80], dtype=np.uint16)
    bits[: len(specials)] = specials
    return bits


def gen_dtype_golden():
    rng = np.random.default_rng(20240531)
    recs = []
    def add(t, raw, source=0):
        raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
        y = numpy_dequant(t, raw)
        recs.append((int(t), y.size, raw, y, source))

    # F32 / F16 / BF16: bit patterns (every class: normal, subnormal, zero, inf).
    add(T.F32, rng.standard_normal(256).astype(np.float32).view(np.uint8))
    add(T.F16, random_f16_bits(1024, rng).view(np.uint8))
    add(T.BF16, random_bf16_bits(1024, rng).view(np.uint8))
    # Types gguf-py can quantise: realistic blocks from quantize(), plus random block bytes.
    for t in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0):
        x = (rng.standard_normal((4, 128)) * rng.uniform(0.01, 2.0, (4, 1))).astype(np.float32)
        x[0, :32] = 0.0  # an all-zero block (d = 0)
        add(t, gq.quantize(x, t))
        add(t, sane_blocks(t, 16, rng))
    # K-quants (gguf-py cannot quantise them) and Q8_1/Q8_K: random bytes with sane scales.
    for t in (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K):
        add(t, sane_blocks(t, 4, rng))
    add(T.Q8_1, sane_blocks(T.Q8_1, 16, rng), source=1)
    add(T.Q8_K, sane_blocks(T.Q8_K, 4, rng), source=1)

    out = bytearray(b"SLMDQ1\0\0" + struct.pack("<I", len(recs)))
    for t, n, raw, y, source in recs:
        assert y.dtype == np.float32 and not np.isnan(y).any()
        out += struct.pack("<IIII", t, n, raw.size, source) + raw.tobytes() + y.astype("<f4").tobytes()
    (HERE / "dtype_golden.bin").write_bytes(bytes(out))


# ---- GGUF files written by GGUFWriter ------------------------------------------------------

class Spec:
    def __init__(self, name, alignment=None, endian=GGUFEndian.LITTLE):
        self.name, self.alignment, self.endian = name, alignment, endian
        self.kvs = []      # (key, vtype, value, sub)
        self.tensors = []  # (name, ggml type, array or raw bytes, raw_dtype or None)

    def kv(self, key, vtype, val, sub=None):
        self.kvs.append((key, vtype, val, sub))

    def write(self):
        path = HERE / self.name
        w = GGUFWriter(str(path), arch="test", endianess=self.endian)
        if self.alignment:
            w.add_custom_alignment(self.alignment)
        for key, vtype, val, sub in self.kvs:
            w.add_key_value(key, val, vtype, sub_type=sub)
        for name, t, arr, raw_dtype in self.tensors:
            if t == T.Q8_1:  # see SIZES: give the element shape so gguf-py does not derive it
                be, bb = SIZES[t]
                shape = arr.shape[:-1] + (arr.shape[-1] // bb * be,)
                w.add_tensor(name, arr.view(np.int8), raw_shape=shape, raw_dtype=t)
            else:
                w.add_tensor(name, arr, raw_dtype=raw_dtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path

    def all_kvs(self):
        """Every kv in file order: GGUFWriter adds general.architecture first, then alignment."""
        kvs = [("general.architecture", V.STRING, "test", None)]
        if self.alignment:
            kvs.append(("general.alignment", V.UINT32, self.alignment, None))
        return kvs + self.kvs


def tensor_line(name, t, shape_ggml, rel_offset, data: bytes):
    ne = list(shape_ggml) + [1] * (4 - len(shape_ggml))
    row = []
    if t in DEQUANT_TYPES:
        be, bb = SIZES[t]
        row_bytes = ne[0] // be * bb
        y = numpy_dequant(t, np.frombuffer(data[:row_bytes], dtype=np.uint8))
        assert y.size == ne[0]
        row = ["%08x" % v for v in y.astype("<f4").view("<u4")]
    fields = ["tensor", name, str(int(t)), str(len(shape_ggml))] + [str(x) for x in ne] + \
        [str(rel_offset), str(len(data)), "%08x" % zlib.crc32(data), str(len(row))] + row
    return " ".join(fields)


def describe(spec: Spec, path: Path):
    """Manifest lines for a file written from spec, checked against GGUFReader's view of it."""
    r = GGUFReader(str(path))
    kvs = spec.all_kvs()
    lines = ["file " + spec.name,
             "header 3 %d %d %d %d" % (spec.alignment or 32, r.data_offset, len(kvs), len(spec.tensors))]
    for key, vtype, val, sub in kvs:
        lines.append("kv %s %s" % (key, render(vtype, val, sub)))
        assert key in r.fields, key
    assert len(r.tensors) == len(spec.tensors)
    blob = path.read_bytes()
    end = 0
    for (name, t, _arr, _raw), rt in zip(spec.tensors, r.tensors):
        assert rt.name == name and rt.tensor_type == t
        shape = [int(x) for x in rt.shape]  # ggml order (ne0 first)
        be, bb = SIZES[t]
        n_bytes = int(np.prod(shape)) // be * bb
        data = blob[rt.data_offset: rt.data_offset + n_bytes]
        lines.append(tensor_line(name, t, shape, rt.data_offset - r.data_offset, data))
        end = max(end, rt.data_offset + n_bytes)
    lines.append("trunc_ok_from %d" % (end if spec.tensors else len(blob)))
    lines.append("end")
    return lines


def quant_tensor(t, rows, cols, rng, lead=()):
    """(bytes array for GGUFWriter, raw_dtype) of a rows x cols tensor of type t."""
    shape = tuple(lead) + (rows, cols)
    if t in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.BF16):
        x = rng.standard_normal(shape).astype(np.float32)
        return gq.quantize(x, t), t
    be, bb = SIZES[t]
    n_blocks = int(np.prod(shape)) // be
    raw = sane_blocks(t, n_blocks, rng).reshape(tuple(lead) + (rows, cols // be * bb))
    return raw, t


def build_specs():
    rng = np.random.default_rng(7)
    specs = []

    # small.gguf: a bit of everything, small enough to truncate at every length.
    s = Spec("small.gguf")
    s.kv("t.u32", V.UINT32, 7)
    s.kv("t.str", V.STRING, "h\u00e9llo")
    s.kv("t.arr_i16", V.ARRAY, [-3, 0, 300], V.INT16)
    s.kv("t.arr_str", V.ARRAY, ["a", "", "b c"], V.STRING)
    s.kv("t.nested", V.ARRAY, [[1, 2], [3]], V.ARRAY)
    s.kv("t.bool", V.BOOL, True)
    s.tensors.append(("a", T.F32, rng.standard_normal((2, 3)).astype(np.float32), None))
    arr, rd_ = quant_tensor(T.Q8_0, 1, 32, rng)
    s.tensors.append(("b.q8", T.Q8_0, arr, rd_))
    s.tensors.append(("c", T.F16, rng.standard_normal(5).astype(np.float16), None))
    specs.append(s)

    # meta.gguf: every value type, typed arrays, nested arrays, a large string array, alignment 64.
    m = Spec("meta.gguf", alignment=64)
    m.kv("t.u8", V.UINT8, 200)
    m.kv("t.i8", V.INT8, -100)
    m.kv("t.u16", V.UINT16, 65535)
    m.kv("t.i16", V.INT16, -32768)
    m.kv("t.u32", V.UINT32, 4000000000)
    m.kv("t.i32", V.INT32, -2000000000)
    m.kv("t.f32", V.FLOAT32, 3.14159)
    m.kv("t.bool_f", V.BOOL, False)
    m.kv("t.bool_t", V.BOOL, True)
    m.kv("t.str", V.STRING, "Gr\u00fc\u00dfe, \u4e16\u754c \U0001F600\n\t\"q\"\\")
    m.kv("t.str_empty", V.STRING, "")
    m.kv("t.u64", V.UINT64, 18446744073709551615)
    m.kv("t.i64", V.INT64, -9223372036854775808)
    m.kv("t.f64", V.FLOAT64, -2.718281828459045)
    m.kv("t.f64_tiny", V.FLOAT64, 5e-324)
    m.kv("t.arr_u8", V.ARRAY, [0, 1, 255], V.UINT8)
    m.kv("t.arr_i8", V.ARRAY, [-128, 127], V.INT8)
    m.kv("t.arr_u16", V.ARRAY, [1, 65535], V.UINT16)
    m.kv("t.arr_i16", V.ARRAY, [-32768, 32767], V.INT16)
    m.kv("t.arr_u32", V.ARRAY, [4294967295, 0], V.UINT32)
    m.kv("t.arr_i32", V.ARRAY, [-1, 2, -3], V.INT32)
    m.kv("t.arr_f32", V.ARRAY, [0.5, -1.25e-3, 1e30], V.FLOAT32)
    m.kv("t.arr_bool", V.ARRAY, [True, False, True], V.BOOL)
    m.kv("t.arr_u64", V.ARRAY, [18446744073709551615, 9223372036854775808, 1], V.UINT64)
    m.kv("t.arr_i64", V.ARRAY, [-9223372036854775808, 9223372036854775807], V.INT64)
    m.kv("t.arr_f64", V.ARRAY, [1.0 / 3.0, -0.0], V.FLOAT64)
    m.kv("t.arr_str", V.ARRAY, ["", "\u0120the", "\u010a", "a b", "\u00e9\u00e8"], V.STRING)
    m.kv("t.nested2", V.ARRAY, [[1, -2, 3], [4], [5, 6]], V.ARRAY)
    m.kv("t.nested_str", V.ARRAY, [["x", "yz"], ["\u00fc"]], V.ARRAY)
    m.kv("t.nested3", V.ARRAY, [[[1, 2], [3]], [[4.5]], [[True, False]]], V.ARRAY)
    vocab = ["tok%d_%s" % (i, "\u00e9" * (i % 4)) for i in range(2000)]
    m.kv("tokenizer.ggml.tokens", V.ARRAY, vocab, V.STRING)
    m.kv("tokenizer.ggml.scores", V.ARRAY, [float(-i) / 7.0 for i in range(2000)], V.FLOAT32)
    m.tensors.append(("w", T.F32, rng.standard_normal((3, 4)).astype(np.float32), None))
    arr, rd_ = quant_tensor(T.Q4_K, 2, 256, rng)
    m.tensors.append(("w.q4k", T.Q4_K, arr, rd_))
    m.tensors.append(("v", T.F32, rng.standard_normal(7).astype(np.float32), None))
    specs.append(m)

    # tensors.gguf: every supported tensor type, 1 to 4 dims.
    t = Spec("tensors.gguf")
    t.tensors.append(("f32.1d", T.F32, rng.standard_normal(33).astype(np.float32), None))
    t.tensors.append(("f16.2d", T.F16, rng.standard_normal((3, 17)).astype(np.float16), None))
    arr, rd_ = quant_tensor(T.BF16, 2, 9, rng)
    t.tensors.append(("bf16.2d", T.BF16, arr, rd_))
    for qt, rows, cols, lead in ((T.Q4_0, 2, 64, ()), (T.Q4_1, 1, 32, (2,)), (T.Q5_0, 3, 32, ()),
                                 (T.Q5_1, 1, 64, (1, 2)), (T.Q8_0, 2, 96, ()), (T.Q8_1, 1, 64, ()),
                                 (T.Q2_K, 1, 256, ()), (T.Q3_K, 2, 256, ()), (T.Q4_K, 1, 512, ()),
                                 (T.Q5_K, 2, 256, (1,)), (T.Q6_K, 1, 256, (2, 1)), (T.Q8_K, 1, 256, ())):
        arr, rd_ = quant_tensor(qt, rows, cols, rng, lead)
        t.tensors.append(("%s.%dd" % (qt.name.lower(), 2 + len(lead)), qt, arr, rd_))
    t.tensors.append(("i8", T.I8, rng.integers(-128, 128, 5).astype(np.int8), None))
    t.tensors.append(("i16", T.I16, rng.integers(-2**15, 2**15, (2, 3)).astype(np.int16), None))
    t.tensors.append(("i32", T.I32, rng.integers(-2**31, 2**31, 4).astype(np.int32), None))
    t.tensors.append(("i64", T.I64, rng.integers(-2**62, 2**62, 3).astype(np.int64), None))
    t.tensors.append(("f64", T.F64, rng.standard_normal((2, 2, 2, 2)).astype(np.float64), None))
    specs.append(t)
    return specs


# ---- the real model ------------------------------------------------------------------------

def describe_model(path: Path):
    r = GGUFReader(str(path))
    kv_lines = []
    def field_value(f):
        vtype = f.types[0]
        if vtype == V.ARRAY:
            return None
        if vtype == V.STRING:
            return render_str(bytes(f.parts[f.data[0]]))
        val = f.parts[f.data[0]][0]
        if vtype in (V.FLOAT32, V.FLOAT64):
            return render(vtype, float(val))
        return render(vtype, int(val))
    n_kv = 0
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        n_kv += 1
        v = field_value(f)
        if v is not None:
            kv_lines.append("kv %s %s" % (key, v))
        else:
            sub = f.types[1]
            kv_lines.append("arrlen %s %d" % (key, len(f.data)))
            for i in sorted({0, 1, 100, 1000, len(f.data) - 1}):
                if i >= len(f.data):
                    continue
                part = f.parts[f.data[i]]
                if sub == V.STRING:
                    kv_lines.append("arrelem %s %d %s" % (key, i, render_str(bytes(part))))
                else:
                    kv_lines.append("arrelem %s %d %s" % (key, i, render(sub, part[0].item())))
    lines = ["file " + path.name,
             "header 3 32 %d %d %d" % (r.data_offset, n_kv, len(r.tensors))] + kv_lines
    wanted = ["token_embd.weight", "blk.0.attn_norm.weight", "blk.0.ffn_down.weight", "blk.0.attn_q.weight",
              "blk.29.ffn_gate.weight", "output_norm.weight"]
    blob = np.memmap(path, dtype=np.uint8, mode="r")
    for rt in r.tensors:
        if rt.name not in wanted:
            continue
        data = bytes(blob[rt.data_offset: rt.data_offset + rt.n_bytes])
        lines.append(tensor_line(rt.name, rt.tensor_type, [int(x) for x in rt.shape],
                                 rt.data_offset - r.data_offset, data))
    lines.append("end")
    return lines


# ---- fuzz seeds: a tiny raw GGUF emitter for hand-made invalid files -----------------------

def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def emit(kvs=b"", n_kv=0, infos=b"", n_tensors=0, data=b"", version=3, align=32, magic=b"GGUF"):
    head = magic + struct.pack("<IQQ", version, n_tensors, n_kv) + kvs + infos
    pad = (-len(head)) % align
    return head + b"\0" * pad + data


def info(name, dims, t, off):
    return gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + \
        struct.pack("<IQ", t, off)


def gen_corpus(valid_paths):
    if CORPUS.exists():
        for p in CORPUS.iterdir():
            if p.name.startswith("seed_"):
                p.unlink()
    CORPUS.mkdir(parents=True, exist_ok=True)
    for p in valid_paths:
        if p.stat().st_size <= 16384:
            shutil.copy(p, CORPUS / ("seed_valid_" + p.name))
    kv_arch = gstr("general.architecture") + struct.pack("<I", 8) + gstr("x")
    f32x8 = info("t", [8], 0, 0)
    seeds = {
        "minimal": emit(kv_arch, 1, f32x8, 1, b"\0" * 32),
        "empty": b"",
        "magic": emit(magic=b"GGML"),
        "v1": emit(version=1),
        "v4": emit(version=4),
        "bigendian": b"GGUF" + struct.pack(">IQQ", 3, 0, 0),
        "n_kv_huge": emit(n_kv=1 << 62),
        "n_tensors_huge": emit(n_tensors=1 << 62),
        "strlen_huge": emit(gstr("k")[:0] + struct.pack("<Q", 1 << 60) + b"k", 1),
        "arr_count_huge": emit(gstr("k") + struct.pack("<IIQ", 9, 4, 1 << 61), 1),
        "nest9": emit(gstr("k") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 8 +
                      struct.pack("<IQ", 4, 1) + b"\1\0\0\0", 1),
        "bool2": emit(gstr("k") + struct.pack("<I", 7) + b"\2", 1),
        "bad_utf8_key": emit(gstr(b"k\xff") + struct.pack("<I", 0) + b"\1", 1),
        "align_bad": emit(gstr("general.alignment") + struct.pack("<II", 4, 12), 1),
        "type_unknown": emit(infos=info("t", [8], 4, 0), n_tensors=1, data=b"\0" * 32),
        "ndims0": emit(infos=info("t", [], 0, 0), n_tensors=1, data=b"\0" * 32),
        "ndims5": emit(infos=info("t", [1, 1, 1, 1, 1], 0, 0), n_tensors=1, data=b"\0" * 32),
        "dims_overflow": emit(infos=info("t", [1 << 32, 1 << 32], 0, 0), n_tensors=1),
        "block_misfit": emit(infos=info("t", [31], 8, 0), n_tensors=1, data=b"\0" * 64),
        "misaligned": emit(infos=info("t", [8], 0, 8), n_tensors=1, data=b"\0" * 64),
        "outside": emit(infos=info("t", [64], 0, 0), n_tensors=1, data=b"\0" * 32),
        "overlap": emit(infos=info("t", [16], 0, 0) + info("u", [8], 0, 32), n_tensors=2, data=b"\0" * 64),
        "dup_tensor": emit(infos=info("t", [8], 0, 0) + info("t", [8], 0, 32), n_tensors=2, data=b"\0" * 64),
        "dup_key": emit(kv_arch + kv_arch, 2),
        "q4k_row": emit(kv_arch, 1, info("q", [256, 2], 12, 0), 1, bytes(range(256)) * 2 + b"\x11" * 32),
        "strarr": emit(gstr("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3) + gstr("a") + gstr("") +
                       gstr("\u00e9"), 1),
    }
    for name, blob in seeds.items():
        (CORPUS / ("seed_" + name)).write_bytes(blob)


def main():
    gen_dtype_golden()
    specs = build_specs()
    lines, paths = [], []
    for spec in specs:
        path = spec.write()
        paths.append(path)
        lines += describe(spec, path)
    (HERE / "golden.txt").write_text("\n".join(lines) + "\n")

    # A big-endian file from the same writer (the reader must refuse it with a clear message).
    be = Spec("be.gguf", endian=GGUFEndian.BIG)
    be.kv("t.u32", V.UINT32, 1)
    be.tensors.append(("a", T.F32, np.arange(4, dtype=np.float32), None))
    paths.append(be.write())

    if MODEL.exists():
        (HERE / "smollm2_golden.txt").write_text("\n".join(describe_model(MODEL)) + "\n")
    else:
        print("note: %s absent; keeping the committed smollm2_golden.txt" % MODEL, file=sys.stderr)
    gen_corpus(paths)


if __name__ == "__main__":
    main()
