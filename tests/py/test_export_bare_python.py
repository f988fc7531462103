#!/usr/bin/env python3
"""`statelm export` needs no coremltools to build: a configuration whose SLM_PYTHON is a bare venv.

Configures the source tree again in a temporary folder, as the build under test was configured
(generator, compiler, build type, C flags, sanitizer options; SLM_TESTS=OFF), but with
SLM_PYTHON a fresh `python -m venv --without-pip`, in which coremltools is checked not to import.
Then: CMake reports "Core ML export: on"; the protobuf-c sources it generates (target slm_coreml_proto) are byte for byte those
of the build under test, and its compile commands of src/export/coreml.c are the same (build
folder aside) — so that build's exporter is what the bare configuration compiles, without
building everything twice. Finally the build under test exports the tiny llama, and coremltools
(this Python's) loads the package and rebuilds its program; test_export_coreml.py checks the
packages in full.
Usage: test_export_bare_python.py STATELM TESTS_DATA_DIR. Exit 77 = skipped."""
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

statelm, data = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
root = Path(__file__).resolve().parents[2]
build = statelm.parent
failures = []


def check(label, ok, detail=""):
    if not ok:
        failures.append(f"{label}: {detail}")


def cache_entries(path):
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith(("#", "//")) and "=" in line and ":" in line.split("=", 1)[0]:
            key, value = line.split("=", 1)
            out[key.split(":", 1)[0]] = value
    return out


def coreml_commands(build_dir):
    """The compile commands of src/export/coreml.c, build folder replaced by BUILD."""
    entries = json.loads((build_dir / "compile_commands.json").read_text())
    return sorted(e["command"].replace(str(build_dir), "BUILD") for e in entries
                  if Path(e["file"]) == root / "src/export/coreml.c")


cache = cache_entries(build / "CMakeCache.txt")
lacks = [what for what, ok in (("SLM_COREML=ON", cache.get("SLM_COREML") == "ON"),
                                ("protoc-c (protobuf-c-compiler)", not cache.get("SLM_PROTOC_C", "NOTFOUND").endswith("NOTFOUND")),
                                ("libprotobuf-c (libprotobuf-c-dev)", cache.get("PROTOBUF_C_FOUND") == "1")) if not ok]
if lacks:
    print(f"SKIPPED: this build has no Core ML export (without: {', '.join(lacks)})")
    sys.exit(77)
# the files the build generates (a build folder older than src/export/proto may hold others too)
generated = ["MIL.pb-c.c", "MIL.pb-c.h", "Model.pb-c.c", "Model.pb-c.h"]
check("build under test", all((build / "coreml-proto" / n).exists() for n in generated),
      sorted(p.name for p in (build / "coreml-proto").glob("*.pb-c.*")))

with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True)
    bare = tmp / "venv/bin/python"
    p = subprocess.run([str(bare), "-c", "import coremltools"], capture_output=True, text=True)
    check("bare venv", p.returncode != 0 and "coremltools" in p.stderr, "coremltools imports there")

    args = ["cmake", "-S", str(root), "-B", str(tmp / "b"), "-G", cache["CMAKE_GENERATOR"],
            f"-DSLM_PYTHON={bare}", "-DSLM_TESTS=OFF"]
    for key in ("CMAKE_C_COMPILER", "CMAKE_BUILD_TYPE", "CMAKE_C_FLAGS", "SLM_SANITIZE", "SLM_TSAN", "SLM_FUZZ",
                "SLM_COREML"):
        if key in cache:
            args.append(f"-D{key}={cache[key]}")
    conf = subprocess.run(args, capture_output=True, text=True)
    log = conf.stdout + conf.stderr
    coreml_line = [l for l in log.splitlines() if "Core ML export" in l]
    check("configure", conf.returncode == 0, log[-2000:])
    check("configure: Core ML export on", coreml_line == ["-- Core ML export: on"], coreml_line)

    gen = subprocess.run(["cmake", "--build", str(tmp / "b"), "--target", "slm_coreml_proto"],
                         capture_output=True, text=True)
    check("build slm_coreml_proto", gen.returncode == 0, (gen.stdout + gen.stderr)[-2000:])
    for name in generated:
        ours, theirs = tmp / "b/coreml-proto" / name, build / "coreml-proto" / name
        check(f"generated {name}", ours.exists() and ours.read_bytes() == theirs.read_bytes(),
              "differs from the build under test's")
    a, b = coreml_commands(build), coreml_commands(tmp / "b")
    check("coreml.c compile commands", a == b and len(a) >= 1 and all("-DSLM_HAVE_COREML=1" in c for c in a),
          f"\n  under test: {a}\n  bare: {b}")

    pkg = tmp / "llama.mlpackage"
    p = subprocess.run([str(statelm), "export", "-m", str(data / "tiny/llama/llama-f32.gguf"), "--target", "coreml",
                        "-o", str(pkg), "--ctx", "64", "--prefill-len", "8"], capture_output=True, text=True)
    check("export", p.returncode == 0 and (pkg / "Data/com.apple.CoreML/model.mlmodel").is_file()
          and (pkg / "Data/com.apple.CoreML/weights/weight.bin").is_file(), p.stdout + p.stderr)
    logging.disable(logging.WARNING)
    try:
        import coremltools as ct
        from coremltools.converters.mil.frontend.milproto import load as milproto
    except ImportError:
        ct = None
        print("note: coremltools is not installed here: the package was written, not read back")
    if ct is not None and p.returncode == 0:
        try:
            spec = ct.models.MLModel(str(pkg), skip_model_load=True).get_spec()
            check("package spec", spec.specificationVersion == 9 and spec.description.defaultFunctionName == "decode",
                  f"{spec.specificationVersion} {spec.description.defaultFunctionName}")
            prog = milproto.load(spec, specification_version=9, file_weights_dir=str(pkg / "Data/com.apple.CoreML/weights"))
            check("package program", sorted(prog.functions) == ["decode", "prefill"], sorted(prog.functions))
        except Exception as exc:  # noqa: BLE001 - any failure to read the package back is the finding
            check("package read back", False, repr(exc))

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("ok: a configuration without coremltools builds the same exporter; its export reads back")
