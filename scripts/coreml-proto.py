#!/usr/bin/env python3
"""coreml-proto.py — writes Core ML's protobuf schema as a FileDescriptorSet.

coremltools' PyPI wheels carry no .proto sources, but every coremltools.proto.*_pb2 module embeds
its file's serialized FileDescriptorProto. This collects Model.proto and everything it imports
(MIL.proto, FeatureTypes.proto, ...) into one FileDescriptorSet, which the build hands to
`protoc --descriptor_set_in=SET --c_out=DIR Model.proto MIL.proto ...` (protobuf-c) to generate the
C sources of statelm's Core ML exporter (src/export/). Nothing generated is committed.

usage: coreml-proto.py OUT.pb      writes the set; exit 1 when coremltools is not importable
       coreml-proto.py --list      prints the .proto names of the set (dependencies first), one a line
"""
import contextlib
import io
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: coreml-proto.py OUT.pb | --list", file=sys.stderr)
        return 2
    try:
        # coremltools announces on import that its native runtime is missing (Linux): not our news
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            from coremltools.proto import Model_pb2
        from google.protobuf import descriptor_pb2
    except Exception as exc:  # noqa: BLE001 - any import failure means "not available"
        print(f"coreml-proto: coremltools is not importable: {exc}", file=sys.stderr)
        return 1
    files, seen = [], set()

    def add(fd):
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            add(dep)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        files.append(proto)  # dependencies first, as protoc expects

    add(Model_pb2.DESCRIPTOR)
    if sys.argv[1] == "--list":
        print("\n".join(f.name for f in files))
        return 0
    fds = descriptor_pb2.FileDescriptorSet(file=files)
    with open(sys.argv[1], "wb") as f:
        f.write(fds.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
