#!/usr/bin/env python3
"""src/export/proto/{Model,MIL}.proto against coremltools' own Core ML schema.

The exporter's .proto files are written for statelm and hold only what it writes; this checks
that every declaration agrees with the schema coremltools embeds (coremltools.proto.*_pb2): each
message exists under the same full name (map entries alike), each declared field has the same
name, number, type, label, message/enum type, oneof and options (packed), each enum value the
same name and number; both files are proto3 in the format's packages. The declarations are read
from protoc-c's --descriptor_set_out (the compiler the build uses: SLM_PROTOC_C in the build's
CMakeCache.txt, else protoc-c on PATH).
Usage: test_coreml_proto.py STATELM TESTS_DATA_DIR. Exit 77 = skipped."""
import contextlib
import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        from coremltools.proto import Model_pb2  # announces its missing native runtime on Linux
    from google.protobuf import descriptor_pb2, text_format
except ImportError as exc:
    print(f"SKIPPED: {exc.name} is not installed: coremltools' schema is the reference "
          "(scripts/test.sh installs coremltools)")
    sys.exit(77)

root = Path(__file__).resolve().parents[2]
proto_dir = root / "src/export/proto"
build = Path(sys.argv[1]).resolve().parent
failures = []


def check(label, ok, detail=""):
    if not ok:
        failures.append(f"{label}: {detail}")


def protoc_c():
    cache = build / "CMakeCache.txt"
    if cache.exists():
        for line in cache.read_text().splitlines():
            if line.startswith("SLM_PROTOC_C:") and not line.endswith("NOTFOUND"):
                return line.split("=", 1)[1]
    return shutil.which("protoc-c")


def text(msg):
    return text_format.MessageToString(msg, as_one_line=True) or "none"


def by_name(files):
    """Full name (".pkg.Msg.Nested") -> DescriptorProto or EnumDescriptorProto, with its file."""
    out = {}

    def walk(prefix, f, msgs, enums):
        for e in enums:
            out[f"{prefix}.{e.name}"] = (e, f)
        for m in msgs:
            out[f"{prefix}.{m.name}"] = (m, f)
            walk(f"{prefix}.{m.name}", f, m.nested_type, m.enum_type)

    for f in files:
        walk("." + f.package, f, f.message_type, f.enum_type)
    return out


def reference_files():
    files, seen = [], set()

    def add(fd):
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            add(dep)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        files.append(proto)

    add(Model_pb2.DESCRIPTOR)
    return files


exe = protoc_c()
if not exe:
    print("SKIPPED: protoc-c is not installed (Debian protobuf-c-compiler; this build has no Core ML export)")
    sys.exit(77)
with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "set.pb"
    p = subprocess.run([exe, f"--proto_path={proto_dir}", f"--descriptor_set_out={out}", "MIL.proto", "Model.proto"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL: protoc-c rejects src/export/proto: {p.stderr.strip()}")
        sys.exit(1)
    ours = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file

want_pkg = {"MIL.proto": "CoreML.Specification.MILSpec", "Model.proto": "CoreML.Specification"}
for f in ours:
    check(f"{f.name} syntax", f.syntax == "proto3", f.syntax)
    check(f"{f.name} package", f.package == want_pkg.get(f.name), f.package)

ref = by_name(reference_files())
n_fields = n_values = 0
declared = by_name(ours)
for name, (d, f) in sorted(declared.items()):
    if name not in ref:
        check(name, False, f"declared in {f.name}, absent from coremltools' schema")
        continue
    r, rf = ref[name]
    check(f"{name} kind", type(d) is type(r), f"{type(d).__name__} here, {type(r).__name__} in {rf.name}")
    if type(d) is not type(r):
        continue
    if isinstance(d, descriptor_pb2.EnumDescriptorProto):
        rv = {v.name: v.number for v in r.value}
        for v in d.value:
            n_values += 1
            check(f"{name}.{v.name}", rv.get(v.name) == v.number, f"{v.number} here, {rv.get(v.name)} in {rf.name}")
        continue
    check(f"{name} options", d.options == r.options, f"{text(d.options)} here, {text(r.options)} in {rf.name}")
    rfield = {x.name: x for x in r.field}
    for x in d.field:
        n_fields += 1
        y = rfield.get(x.name)
        if y is None:
            check(f"{name}.{x.name}", False, f"no such field in {rf.name}")
            continue
        oneof_x = d.oneof_decl[x.oneof_index].name if x.HasField("oneof_index") else None
        oneof_y = r.oneof_decl[y.oneof_index].name if y.HasField("oneof_index") else None
        kind, label = descriptor_pb2.FieldDescriptorProto.Type.Name, descriptor_pb2.FieldDescriptorProto.Label.Name
        for what, a, b in (("number", x.number, y.number), ("type", kind(x.type), kind(y.type)),
                           ("label", label(x.label), label(y.label)), ("type name", x.type_name, y.type_name),
                           ("oneof", oneof_x, oneof_y), ("options", text(x.options), text(y.options))):
            check(f"{name}.{x.name} {what}", a == b, f"{a} here, {b} in {rf.name}")

check("declarations", n_fields > 40 and n_values > 20, f"{n_fields} fields, {n_values} enum values read back")
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"ok: {len(declared)} messages and enums, {n_fields} fields, {n_values} enum values agree with coremltools' schema")
