"""A compact, comparable description of a GGUF file (used by scripts/gen_convert_golden.py to
record llama.cpp's converter output and by tests/py/test_convert.py to compare statelm's).

describe(path) -> {"metadata": {key: entry}, "tensors": [entry, ...]} where
  metadata entry: {"type": "UINT32" | "FLOAT32" | "STRING" | ...} plus
    scalars: "value" (strings longer than 256 bytes: "len" + "sha256" of the UTF-8 bytes instead);
    arrays:  "type": "ARRAY", "elem": element type, "len", "sha256" of the canonical encoding
             (JSON of the list, compact separators, UTF-8, ensure_ascii off) and "value" when len <= 16;
  tensor entry (file order): "name", "type" (ggml type name), "shape" (ggml order, innermost first),
    "sha256" of the tensor's bytes as stored, and for F32 tensors of at most 16 elements "bits":
    the elements as uint32 (so a comparison can say which element differs, and by how many ulps).
Only the gguf package (gguf-py) and numpy; float values are compared as float32 round-trips."""
import hashlib
import json

import numpy as np
import gguf

SMALL = 16
SMALL_TENSOR = 16
LONG_STRING = 256


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _scalar(field, vtype):
    v = field.contents()
    if vtype == gguf.GGUFValueType.FLOAT32:
        v = float(np.float32(v))
    return v


def _entry(field) -> dict:
    vtype = field.types[0]
    if vtype != gguf.GGUFValueType.ARRAY:
        v = _scalar(field, vtype)
        if isinstance(v, str) and len(v.encode("utf-8")) > LONG_STRING:
            return {"type": vtype.name, "len": len(v.encode("utf-8")), "sha256": _sha(v.encode("utf-8"))}
        return {"type": vtype.name, "value": v}
    elem = field.types[1] if len(field.types) > 1 else None
    vals = field.contents()
    if elem == gguf.GGUFValueType.FLOAT32:
        vals = [float(np.float32(x)) for x in vals]
    enc = json.dumps(vals, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    e = {"type": "ARRAY", "elem": elem.name if elem is not None else None, "len": len(vals), "sha256": _sha(enc)}
    if len(vals) <= SMALL:
        e["value"] = vals
    return e


def describe(path) -> dict:
    r = gguf.GGUFReader(str(path))
    meta = {}
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue  # header fields (version, counts), not metadata
        meta[key] = _entry(field)
    tensors = []
    for t in r.tensors:
        e = {"name": t.name, "type": t.tensor_type.name, "shape": [int(x) for x in t.shape],
             "sha256": _sha(np.asarray(t.data).tobytes())}
        if t.tensor_type == gguf.GGMLQuantizationType.F32 and t.n_elements <= SMALL_TENSOR:
            e["bits"] = [int(x) for x in np.asarray(t.data, dtype=np.float32).reshape(-1).view(np.uint32)]
        tensors.append(e)
    return {"metadata": meta, "tensors": tensors}
