# Debian packages of Kiln, one per install component, built with CPack:
#
#   cmake --build build && (cd build && cpack -G DEB)
#
# gives kiln-runtime (the runtime library and its headers: what a compiled
# bundle needs, no LLVM), kiln (libkiln, kilnc, kiln-run, kiln-opt,
# kiln-rage, the C/C++ API headers and the CMake package) and python3-kiln
# (the `kiln` Python package), installed under /usr. Their dependencies on
# Debian's packages are written here rather than found by dpkg-shlibdeps,
# which would need a source package's debian/ folder; test/packaging checks
# them against what the installed files load.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kiln)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Kiln")
set(CPACK_PACKAGE_CONTACT "Kiln developers <kiln@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "ONNX model compiler (LLVM/MLIR) for x86-64, AArch64 and NVIDIA GPUs")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
endif()

set(CPACK_COMPONENTS_ALL runtime compiler)
if(TARGET kiln_python)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()

set(kiln_exact "(= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME kiln-runtime)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libc6, libstdc++6, libgcc-s1")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "Kiln runtime: the C-ABI library (ABI ${KILN_ABI_VERSION}) and headers that compiled Kiln models and bundles need; no LLVM")

set(CPACK_DEBIAN_COMPILER_PACKAGE_NAME kiln)
# libLLVM from libllvm22 (the default library path), libMLIR from
# libmlir-22 (/usr/lib/llvm-22/lib, in the binaries' RUNPATH); the ONNX
# importer reads protobuf through libonnx.
set(CPACK_DEBIAN_COMPILER_PACKAGE_DEPENDS
    "kiln-runtime ${kiln_exact}, libllvm22, libmlir-22, libonnx1, libprotobuf32, libc6, libstdc++6, libgcc-s1")
set(CPACK_COMPONENT_COMPILER_DESCRIPTION
    "Kiln compiler: kilnc, kiln-run, kiln-opt, kiln-rage, libkiln (JIT, C and C++ APIs) and the CMake package")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-kiln)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
# The extension module is built for one Python (cpython-3XY): that one.
set(kiln_python_dep python3)
if(PYTHON_EXECUTABLE)
  execute_process(COMMAND ${PYTHON_EXECUTABLE} -c
                    "import sys; print('%d.%d %d.%d' % (sys.version_info[:2] + (sys.version_info[0], sys.version_info[1] + 1)))"
                  OUTPUT_VARIABLE kiln_py OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE kiln_py_rc)
  if(kiln_py_rc EQUAL 0)
    separate_arguments(kiln_py)
    list(GET kiln_py 0 kiln_py_this)
    list(GET kiln_py 1 kiln_py_next)
    set(kiln_python_dep "python3 (>= ${kiln_py_this}), python3 (<< ${kiln_py_next})")
  endif()
endif()
# The module links libkiln and, through it, LLVM and MLIR directly.
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
    "kiln ${kiln_exact}, kiln-runtime ${kiln_exact}, ${kiln_python_dep}, python3-numpy, libllvm22, libmlir-22, libonnx1, libprotobuf32, libc6, libstdc++6, libgcc-s1")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION "Kiln's Python API (import kiln): compile and run ONNX models")

include(CPack)
