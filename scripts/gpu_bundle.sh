#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh runs into one archive, for a GPU machine
# that has the CUDA driver, cuBLAS and NCCL but neither Bazel nor Debian 12's
# libraries: the built binaries in bazel-bin's layout (tests find their
# shared libraries through $ORIGIN-relative runpaths into _solib_k8), and
# every shared library they load that such a machine may lack (OpenBLAS,
# oneDNN, SLEEF, Gloo, libuv, fmt, OpenSSL, ...). glibc, libstdc++, the
# driver, cuBLAS and NCCL are left out: the GPU machine's own are newer.
#
# Usage: scripts/gpu_bundle.sh OUT.tar.xz [--python-headers DIR]   (after gpu_check.sh's build)
# There: tar xJf OUT.tar.xz && LD_LIBRARY_PATH=$PWD/gpu_libs scripts/gpu_check.sh --no-build
#
# The extension trainrun/_C.so is built for Debian's Python 3.11. For a GPU
# machine with another Python, --python-headers names a folder holding that
# Python's headers as its /usr/include has them (python3.X/, and on
# Debian/Ubuntu x86_64-linux-gnu/python3.X/pyconfig.h) and pybind11/ (a
# release that knows that Python and NumPy 2); the bundle's _C.so is then
# built against them, and bazel-bin's own is rebuilt afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/gpu_bundle.sh OUT.tar.xz [--python-headers DIR]"
out=$(realpath -m "${1:?$usage}")
py_headers=""
if [ $# -gt 1 ]; then
  [ "$2" = "--python-headers" ] && [ -n "${3:-}" ] || { echo "$usage" >&2; exit 2; }
  py_headers=$(realpath "$3")
  compgen -G "$py_headers/python3.*/Python.h" >/dev/null ||
    { echo "gpu_bundle: no python3.*/Python.h under $py_headers" >&2; exit 2; }
  [ -f "$py_headers/pybind11/pybind11.h" ] || { echo "gpu_bundle: no pybind11/pybind11.h under $py_headers" >&2; exit 2; }
fi

mapfile -t binaries < <(scripts/gpu_check.sh --list-binaries)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bazel-bin" "$stage/gpu_libs"

for b in "${binaries[@]}"; do
  [ -f "bazel-bin/$b" ] || { echo "gpu_bundle: bazel-bin/$b is not built (run scripts/gpu_check.sh's build first)" >&2; exit 1; }
  mkdir -p "$stage/bazel-bin/$(dirname "$b")"
  cp -L "bazel-bin/$b" "$stage/bazel-bin/$b"
done
# The per-library shared objects that cc_test binaries link against.
cp -rL bazel-bin/_solib_k8 "$stage/bazel-bin/_solib_k8"

if [ -n "$py_headers" ]; then
  # The same target against the other Python: a stand-in for the
  # system_python repository (third_party/python.BUILD) over those headers.
  pyver=$(basename "$(dirname "$(ls "$py_headers"/python3.*/Python.h | head -1)")")
  repo="$stage/other_python"
  mkdir -p "$repo"
  cp -r "$py_headers" "$repo/include"
  touch "$repo/WORKSPACE"
  cat >"$repo/BUILD" <<BUILD_FILE
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "python_headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include/$pyver", "include"],
)
BUILD_FILE
  ./scripts/bazel.sh build //python:trainrun/_C.so --override_repository=system_python="$repo"
  cp -L bazel-bin/python/trainrun/_C.so "$stage/bazel-bin/python/trainrun/_C.so"
  ./scripts/bazel.sh build //python:trainrun/_C.so  # bazel-bin's own again
  echo "gpu_bundle: trainrun/_C.so built for $pyver"
fi

# System libraries: what ldd resolves outside the base system and CUDA.
keep_on_target='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+|libgcc_s|libcuda\.so|libcublas|libcublasLt|libnccl)'
for f in "${binaries[@]/#/bazel-bin/}" bazel-bin/_solib_k8/*.so; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $keep_on_target ]] && continue
  [[ "$path" == */bazel-* || "$path" == */_solib_k8/* ]] && continue
  cp -L "$path" "$stage/gpu_libs/$name"
done

tar -C "$stage" -cf - bazel-bin gpu_libs | xz -T0 -9 >"$out"
echo "gpu_bundle: $out ($(du -h "$out" | cut -f1)): ${#binaries[@]} binaries, $(ls "$stage/gpu_libs" | wc -l) libraries: $(ls "$stage/gpu_libs" | tr '\n' ' ')"
