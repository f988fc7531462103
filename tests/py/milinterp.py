"""milinterp.py — a NumPy interpreter of the ML Programs `statelm export --target coreml` writes.

Independent of statelm: it reads the package through coremltools' protobuf classes (the spec and
the MIL blob storage of weight.bin) and executes every operation by the semantics coremltools
documents for it (coremltools.converters.mil.mil.ops.defs), each op computed in float32 (int32,
bool as declared) and its result stored in the dtype the file declares for it (f16 activations
are rounded to f16 after every op, as a f16 Core ML device computes). States live across calls,
in the dtype and shape of the function's state inputs. Package(path, f16_activations=False) keeps
the values the file declares f16 in f32 instead (weights and states stay f16): what the f16
activations alone cost. Only the ops the exporter emits are known;
any other op is an error."""
import struct
from pathlib import Path

import numpy as np
from coremltools.proto import MIL_pb2

DTYPES = {MIL_pb2.FLOAT16: np.float16, MIL_pb2.FLOAT32: np.float32, MIL_pb2.INT32: np.int32,
          MIL_pb2.BOOL: np.bool_, MIL_pb2.INT8: np.int8, MIL_pb2.UINT4: np.uint8}
CAST = {"fp16": np.float16, "fp32": np.float32, "int32": np.int32, "bool": np.bool_}


def _shape(tt):
    return [d.constant.size for d in tt.dimensions]


class Package:
    def __init__(self, path, f16_activations=True):
        import coremltools as ct
        path = Path(path)
        self.spec = ct.models.MLModel(str(path), skip_model_load=True).get_spec()
        self.blob = (path / "Data/com.apple.CoreML/weights/weight.bin").read_bytes()
        self.states = {}
        self._cache = {}
        self.f16 = f16_activations  # False: keep declared-f16 values in f32 (weights, states stay f16)

    def reset(self):
        self.states = {}

    def _blob(self, value):
        tt = value.type.tensorType
        off = value.blobFileValue.offset
        key = (off, tt.dataType)
        if key not in self._cache:
            sentinel, _, size, data = struct.unpack_from("<IIQQ", self.blob, off)
            if sentinel != 0xDEADBEEF:
                raise ValueError(f"no blob record at {off}")
            raw = np.frombuffer(self.blob, dtype=np.uint8, count=size, offset=data)
            n = int(np.prod(_shape(tt)))
            if tt.dataType == MIL_pb2.UINT4:
                arr = np.stack([raw & 15, raw >> 4], axis=-1).reshape(-1)[:n]
            else:
                arr = raw.view(DTYPES[tt.dataType])[:n]
            self._cache[key] = arr.reshape(_shape(tt))
        return self._cache[key]

    def _value(self, v):
        if v.WhichOneof("value") == "blobFileValue":
            return self._blob(v)
        tt, tv = v.type.tensorType, v.immediateValue.tensor
        kind = tv.WhichOneof("value")
        if kind == "strings":
            return tv.strings.values[0]
        if kind == "bytes":
            arr = np.frombuffer(tv.bytes.values, dtype=DTYPES[tt.dataType])
        else:
            arr = np.array(list(getattr(tv, kind).values), dtype=DTYPES[tt.dataType])
        return arr.reshape(_shape(tt)) if tt.rank else arr.reshape(())

    def run(self, function, input_ids, pos):
        """Runs one call; returns the logits (f32). States persist between calls."""
        fn = self.spec.mlProgram.functions[function]
        env = {"input_ids": np.asarray(input_ids, dtype=np.int32), "pos": np.array([pos], dtype=np.int32)}
        for inp in fn.inputs:
            if inp.type.WhichOneof("type") == "stateType":
                tt = inp.type.stateType.wrappedType.tensorType
                self.states.setdefault(inp.name, np.zeros(_shape(tt), dtype=DTYPES[tt.dataType]))
                env[inp.name] = inp.name  # a state input stands for its name
        block = fn.block_specializations[fn.opset]
        for op in block.operations:
            self._op(op, env)
        return env[block.outputs[0]].astype(np.float32)

    def _op(self, op, env):
        t = op.type
        if t == "const":
            env[op.outputs[0].name] = self._value(op.attributes["val"])
            return
        a = {}
        for k, arg in op.inputs.items():
            vals = [env[b.name] if b.WhichOneof("binding") == "name" else self._value(b.value) for b in arg.arguments]
            a[k] = vals if k == "values" else vals[0]
        if t == "write_state":
            cur = self.states[a["input"]]
            self.states[a["input"]] = a["data"].astype(cur.dtype).reshape(cur.shape)
            return
        out = self._compute(t, a)
        decl = op.outputs[0].type.tensorType
        dt = DTYPES[decl.dataType]
        out = np.asarray(out).astype(np.float32 if dt == np.float16 and not self.f16 else dt)
        if list(out.shape) != _shape(decl):
            raise ValueError(f"{t} {op.outputs[0].name}: computed {list(out.shape)}, declared {_shape(decl)}")
        env[op.outputs[0].name] = out

    def _compute(self, t, a):
        f = lambda k: np.asarray(a[k]).astype(np.float32)  # noqa: E731 - operands as f32
        if t == "constexpr_blockwise_shift_scale":
            data, scale = a["data"].astype(np.float32), a["scale"].astype(np.float32)
            rep = [d // s for d, s in zip(data.shape, scale.shape)]
            off = a["offset"].astype(np.float32) if "offset" in a else 0.0
            if "offset" in a:
                off = np.kron(off, np.ones(rep, dtype=np.float32))
            return np.kron(scale, np.ones(rep, dtype=np.float32)) * (data - off)
        if t == "read_state":
            return self.states[a["input"]].copy()
        if t == "gather":
            return np.take(a["x"], a["indices"], axis=int(a["axis"]))
        if t == "linear":
            y = f("x") @ f("weight").T
            return y + f("bias") if "bias" in a else y
        binops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "less_equal": np.less_equal,
                  "greater": np.greater, "greater_equal": np.greater_equal, "equal": np.equal,
                  "not_equal": np.not_equal, "logical_and": np.logical_and}
        if t in binops:
            x, y = np.asarray(a["x"]), np.asarray(a["y"])
            if x.dtype.kind == "f" or y.dtype.kind == "f":
                x, y = x.astype(np.float32), y.astype(np.float32)
            return binops[t](x, y)
        if t == "mod":  # MIL mod: x - floor(x / y) * y
            return np.mod(a["x"], a["y"])
        unops = {"silu": lambda x: x / (1 + np.exp(-x)), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
                 "softplus": lambda x: np.logaddexp(0, x), "exp": np.exp, "cos": np.cos, "sin": np.sin}
        if t in unops:
            return unops[t](f("x"))
        if t == "gelu":
            x = f("x")
            if a.get("mode", "EXACT") != "TANH_APPROXIMATION":
                raise ValueError(f"gelu mode {a.get('mode')}")
            return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
        if t == "rsqrt":
            return 1 / np.sqrt(f("x") + (float(a["epsilon"]) if "epsilon" in a else 1e-12))
        if t in ("reduce_mean", "reduce_sum"):
            op = np.mean if t == "reduce_mean" else np.sum
            return op(f("x"), axis=tuple(int(v) for v in a["axes"]), keepdims=bool(a.get("keep_dims", False)))
        if t == "reshape":
            return np.reshape(a["x"], [int(v) for v in a["shape"]])
        if t == "transpose":
            return np.transpose(a["x"], [int(v) for v in a["perm"]])
        if t == "slice_by_index":
            return a["x"][tuple(slice(int(b), int(e)) for b, e in zip(a["begin"], a["end"]))]
        if t == "slice_update":
            x = np.array(a["x"])
            x[tuple(slice(int(b), int(e)) for b, e in zip(a["begin"], a["end"]))] = a["update"]
            return x
        if t == "concat":
            return np.concatenate(a["values"], axis=int(a["axis"]))
        if t == "range_1d":
            return np.arange(int(a["start"]), int(a["end"]), int(a["step"]), dtype=np.int32)
        if t == "cast":
            return np.asarray(a["x"]).astype(CAST[a["dtype"]])
        if t == "matmul":
            x, y = f("x"), f("y")
            if bool(a.get("transpose_x", False)):
                x = np.swapaxes(x, -1, -2)
            if bool(a.get("transpose_y", False)):
                y = np.swapaxes(y, -1, -2)
            return np.matmul(x, y)
        if t == "softmax":
            x = f("x")
            e = np.exp(x - x.max(axis=int(a["axis"]), keepdims=True))
            return e / e.sum(axis=int(a["axis"]), keepdims=True)
        if t == "select":
            return np.where(a["cond"], a["a"], a["b"])
        if t == "fill":
            return np.full([int(v) for v in a["shape"]], a["value"])
        if t == "tile":
            return np.tile(a["x"], [int(v) for v in a["reps"]])
        raise ValueError(f"milinterp: unknown op {t}")
