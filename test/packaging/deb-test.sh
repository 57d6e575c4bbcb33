#!/usr/bin/env bash
# Builds Kiln's Debian packages with CPack (cmake/Packaging.cmake), unpacks
# them into a scratch root (dpkg-deb -x, as the issue's "fresh machine"
# would get with dpkg -i), and checks that
#   * each package declares the Debian packages its programs and libraries
#     load directly (their NEEDED entries, resolved here, then dpkg -S), or
#     carries the library itself, or depends on the kiln package that does;
#   * kiln-runtime loads nothing of LLVM/MLIR;
#   * the unpacked copy works on its own: test/bundle/install-test.sh, run
#     against the root instead of a `cmake --install` prefix, builds the
#     bundle example against the packaged CMake package, runs the bundle and
#     the JIT program, and runs the packaged Python package from outside the
#     checkout (every tool and library loaded from the root, not the tree).
#   deb-test.sh BUILD_DIR SOURCE_DIR WORK_DIR C_COMPILER CXX_COMPILER
set -euo pipefail
build=$1 src=$2 work=$3 cc=$4 cxx=$5
rm -rf "$work" && mkdir -p "$work/debs" "$work/root"
fail() { echo "deb-test: FAIL: $*" >&2; exit 1; }
(cd "$build" && cpack -G DEB -B "$work/debs" >"$work/cpack.log") ||
  { cat "$work/cpack.log"; fail "cpack"; }
declare -A depends
for deb in "$work"/debs/*.deb; do
  name=$(dpkg-deb -f "$deb" Package)
  depends[$name]=$(dpkg-deb -f "$deb" Depends)
  dpkg-deb -x "$deb" "$work/root"
  dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$work/files.$name"
  echo "$name: Depends: ${depends[$name]}"
done
for want in kiln-runtime kiln python3-kiln; do
  [ -n "${depends[$want]+x}" ] || fail "no $want package"
done
# Which package (ours or Debian's) provides the file at `path`.
owner() {
  local path
  path=$(realpath -s "$1")
  case $path in
    "$work/root"/*)
      local rel=${path#"$work/root"}
      for n in "${!depends[@]}"; do
        grep -qxF "$rel" "$work/files.$n" && { echo "$n"; return; }
      done
      echo "?";;
    *) # The file itself (a symlink may belong to a -dev package), under
       # merged /usr too (/lib is /usr/lib), then the path as loaded.
      local real candidate
      real=$(realpath "$path")
      for candidate in "$real" "${real#/usr}" "/usr$real" "$path"; do
        if dpkg -S "$candidate" >/dev/null 2>&1; then
          dpkg -S "$candidate" | head -1 | cut -d: -f1
          return
        fi
      done
      echo "?";;
  esac
}
for name in "${!depends[@]}"; do
  while read -r rel; do
    file="$work/root$rel"
    [ -f "$file" ] && [ ! -L "$file" ] && head -c 4 "$file" | grep -q 'ELF' || continue
    resolved=$(ldd "$file" 2>/dev/null || true)
    for needed in $(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      case $needed in ld-linux*) continue;; esac # the loader itself (libc6's)
      path=$(awk -v n="$needed" '$1 == n && $2 == "=>" {print $3}' <<<"$resolved")
      [ -n "$path" ] && [ "$path" != "not" ] || fail "$rel: $needed is not found"
      pkg=$(owner "$path")
      [ "$pkg" != "?" ] || fail "$rel: $needed ($path) belongs to no package"
      [ "$pkg" = "$name" ] && continue
      tr ',' '\n' <<<"${depends[$name]}" | awk '{print $1}' | grep -qxF "$pkg" ||
        fail "$rel ($name) loads $needed from $pkg, which $name does not depend on"
    done
  done <"$work/files.$name"
done
# Wherever CMAKE_INSTALL_LIBDIR put them (lib, lib64, lib/<multiarch>).
runtime_so=$(find "$work/root/usr" -name libkiln_runtime.so -print -quit)
kiln_so=$(find "$work/root/usr" -name libkiln.so -print -quit)
[ -n "$runtime_so" ] && [ -n "$kiln_so" ] || fail "the packages hold no libkiln_runtime.so or libkiln.so"
if readelf -d "$runtime_so" | grep -Ei '(NEEDED|RUNPATH|RPATH).*(llvm|mlir)'; then
  fail "kiln-runtime loads LLVM/MLIR"
fi
loaded=$(ldd "$work/root/usr/bin/kiln-run" | awk '$1 == "libkiln.so" {print $3}')
[ -n "$loaded" ] && [ "$(realpath -s "$loaded")" = "$kiln_so" ] ||
  fail "the unpacked kiln-run does not load the unpacked libkiln ($loaded)"
# One version: the packages', kilnc's and the Python package's.
version=$(dpkg-deb -f "$work"/debs/kiln_*.deb Version)
"$work/root/usr/bin/kilnc" --version | grep -qF "kilnc (Kiln) $version" ||
  fail "kilnc --version does not say $version"
pyversion=$(cd "$work" && PYTHONPATH="$work/root/usr/lib/python3/dist-packages" /usr/bin/python3 -c \
  'import kiln; print(kiln.__version__)')
[ "$pyversion" = "$version" ] || fail "kiln.__version__ is $pyversion, the packages' $version"
KILN_INSTALLED_PREFIX="$work/root/usr" "$src/test/bundle/install-test.sh" \
  "$build" "$src" "$work/installed" "$cc" "$cxx" || fail "the unpacked packages do not work"
echo "deb-test: ok"
