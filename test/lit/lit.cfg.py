# -*- Python -*-
import os
import sys
import lit.formats
from lit.llvm import llvm_config

config.name = "Kiln"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_binary_dir, "test", "lit")
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]

llvm_config.with_system_environment(["HOME", "TMPDIR", "ASAN_OPTIONS", "UBSAN_OPTIONS",
                                     "TSAN_OPTIONS", "LSAN_OPTIONS"])
llvm_config.use_default_substitutions()
config.substitutions.append(("%examples", config.kiln_examples_dir))
# The Python that runs lit (Debian's, with numpy), for tests' input makers.
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%onnx-node", "/usr/share/libonnx-testdata/data/node"))
# Compiling and linking a C program against Kiln's runtime (kilnc objects
# call kiln_parallel_for).
config.substitutions.append(
    ("%link-runtime",
     "-I{0}/runtime/include -L{1}/lib -Wl,-rpath,{1}/lib -lkiln_runtime".format(
         config.kiln_source_dir, config.kiln_binary_dir)
     # A sanitizer build's runtime needs the sanitizers' own runtimes.
     + (" -fsanitize=" + config.kiln_sanitizers if config.kiln_sanitizers else "")))
config.substitutions.append(
    ("%runtime-include", os.path.join(config.kiln_source_dir, "runtime", "include")))
config.substitutions.append(
    ("%encode-model", "protoc --encode=onnx.ModelProto -I/usr/include/onnx onnx.proto"))
config.substitutions.append(
    ("%encode-tensor", "protoc --encode=onnx.TensorProto -I/usr/include/onnx onnx.proto"))

llvm_config.add_tool_substitutions(
    ["kiln-opt", "kilnc", "kiln-run", "kiln-rage"], [config.kiln_tools_dir])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# kilnc and kiln-run verify the IR after every pass here (release builds
# verify once per pipeline): a pass that breaks the IR is named.
llvm_config.with_environment("KILN_VERIFY_EACH_PASS", "1")
