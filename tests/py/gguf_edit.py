"""A GGUF file copied with gguf-py (reader and writer) with metadata keys dropped or added: the
tests' way to make a variant of a tiny model (no chat template, a pooling_type) without a
generator. Tensors are copied as stored."""
from pathlib import Path

import gguf


def copy_gguf(src: Path, dst: Path, drop=(), add=()):
    """src to dst without the keys in drop and with add's (key, value, GGUFValueType) appended."""
    reader = gguf.GGUFReader(str(src))
    arch = reader.fields["general.architecture"]
    writer = gguf.GGUFWriter(str(dst), arch=bytes(arch.parts[arch.data[0]]).decode())
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop:
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            val = ([bytes(field.parts[i]).decode("utf-8") for i in field.data] if sub == gguf.GGUFValueType.STRING
                   else [field.parts[i].tolist()[0] for i in field.data])
            writer.add_key_value(key, val, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            writer.add_key_value(key, bytes(field.parts[field.data[0]]).decode("utf-8"), vtype)
        else:
            writer.add_key_value(key, field.parts[field.data[0]].tolist()[0], vtype)
    for key, value, vtype in add:
        writer.add_key_value(key, value, vtype)
    for t in reader.tensors:
        writer.add_tensor(t.name, t.data, raw_shape=list(reversed([int(x) for x in t.shape])), raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
