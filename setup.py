"""Builds the `kiln` Python package with CMake, offline, for setuptools.

pyproject.toml names setuptools as the backend (Debian's python3-setuptools:
no PyPI needed); this file adds one build step: CMake configures (when the
build folder is not configured yet) and builds the extension module in
KILN_CMAKE_BUILD_DIR (default: build/ beside this file, the README's build,
so an existing build is reused incrementally), installs the `python`,
`compiler` and `runtime` components into a staging folder (installed
copies carry the RPATHs for an installed layout), and copies the module
with libkiln.so and libkiln_runtime.so.N into the package, where the
module finds them ($ORIGIN). The version is read from CMakeLists.txt's
project(), the one place it is written.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    text = open(os.path.join(HERE, "CMakeLists.txt"), encoding="utf-8").read()
    return re.search(r"project\(kiln[^)]*VERSION\s+([0-9.]+)", text).group(1)


def run(cmd):
    print("kiln setup.py: " + " ".join(cmd), flush=True)
    subprocess.check_call(cmd)


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        build = os.path.abspath(os.environ.get("KILN_CMAKE_BUILD_DIR", os.path.join(HERE, "build")))
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            run(["cmake", "-S", HERE, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                 f"-DPYTHON_EXECUTABLE={sys.executable}"])
        # Everything the three components install, so that `cmake --install`
        # finds every file even in a folder that was only configured.
        run(["cmake", "--build", build, "--target", "kiln_python", "kiln_runtime",
             "kiln_runtime_static", "kiln", "kilnc", "kiln-run", "kiln-opt", "kiln-rage"])
        stage = os.path.join(os.path.abspath(self.build_lib), "..", "kiln-cmake-stage")
        shutil.rmtree(stage, ignore_errors=True)
        for component in ("runtime", "compiler", "python"):
            run(["cmake", "--install", build, "--prefix", stage, "--component", component])
        package = os.path.join(self.build_lib, "kiln")
        os.makedirs(package, exist_ok=True)
        found = glob.glob(os.path.join(stage, "lib*", "python3*", "*-packages", "kiln", "_kiln*.so"))
        found += glob.glob(os.path.join(stage, "lib*", "python3", "dist-packages", "kiln", "_kiln*.so"))
        if not found:
            sys.exit("kiln setup.py: the CMake build made no extension module "
                     "(is pybind11-dev installed?)")
        shutil.copy2(found[0], package)
        # CMAKE_INSTALL_LIBDIR may be lib, lib64 or lib/<multiarch>.
        libkiln = glob.glob(os.path.join(stage, "lib*", "libkiln.so")) + \
            glob.glob(os.path.join(stage, "lib*", "*", "libkiln.so"))
        if not libkiln:
            sys.exit("kiln setup.py: the CMake install has no libkiln.so")
        libdir = os.path.dirname(libkiln[0])
        shutil.copy2(os.path.join(libdir, "libkiln.so"), package)
        runtime = [p for p in glob.glob(os.path.join(libdir, "libkiln_runtime.so.*"))
                   if not os.path.islink(p)] or glob.glob(os.path.join(libdir, "libkiln_runtime.so.*"))
        for lib in runtime:
            shutil.copy2(lib, package, follow_symlinks=True)


class BinaryDistribution(Distribution):
    """A platform wheel: the package holds compiled code."""

    def has_ext_modules(self):
        return True


os.makedirs(os.path.join(HERE, "build", "setuptools"), exist_ok=True)
setup(
    version=version(),
    packages=["kiln"],
    package_dir={"": "python"},
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildWithCMake},
    # Not build/: that is CMake's folder.
    options={"build": {"build_base": os.path.join("build", "setuptools")},
             "egg_info": {"egg_base": os.path.join("build", "setuptools")}},
)
