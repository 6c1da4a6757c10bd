#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh runs into one archive, for a GPU machine
# that has the CUDA driver, cuBLAS and NCCL but neither Bazel nor Debian 12's
# libraries: the built binaries in bazel-bin's layout (tests find their
# shared libraries through $ORIGIN-relative runpaths into _solib_k8), and
# every shared library they load that such a machine may lack (OpenBLAS,
# oneDNN, SLEEF, Gloo, libuv, fmt, OpenSSL, ...). glibc, libstdc++, the
# driver, cuBLAS and NCCL are left out: the GPU machine's own are newer.
#
# Usage: scripts/gpu_bundle.sh OUT.tar.xz   (after gpu_check.sh's build)
# There: tar xJf OUT.tar.xz && LD_LIBRARY_PATH=$PWD/gpu_libs scripts/gpu_check.sh --no-build
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:?usage: scripts/gpu_bundle.sh OUT.tar.xz}")

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
