#!/usr/bin/env bash
# The GPU checks in one run, for a machine with NVIDIA GPUs: every CUDA and
# NCCL test (they skip themselves elsewhere) with their output, the Python
# CUDA tests, bench/cuda's table, bench/compile.py's on CUDA (eager and
# compiled training steps: fused loops as NVRTC-built kernels) and
# bench/nccl.py's (NCCL allreduce next to the torch installed there).
# Usage: scripts/gpu_check.sh [--no-build] (--no-build runs binaries
# already in bazel-bin, e.g. unpacked from
# scripts/gpu_bundle.sh's archive on a machine without Bazel; --list-binaries
# prints their bazel-bin paths). PYTHON names the interpreter of the Python
# tests (default /usr/bin/python3). Exits non-zero when a test fails.
set -uo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-SkylakeX}"
tests=(tests/tensor/cuda/caching_allocator_test tests/tensor/cuda/no_gpu_test tests/tensor/cuda/kernel_elements_test
       tests/tensor/cuda/reducers_test tests/tensor/cuda/cuda_ops_test tests/tensor/cuda/cuda_nn_ops_test
       tests/tensor/cuda/cuda_runtime_test tests/c10d/nccl_test)
helpers=(bench/cuda python/trainrun/_C.so launcher/trainrun tests/c10d/nccl_worker)
if [ "${1:-}" = "--list-binaries" ]; then printf '%s\n' "${tests[@]}" "${helpers[@]}"; exit 0; fi
if [ "${1:-}" != "--no-build" ]; then
  targets=()
  for t in "${tests[@]}" "${helpers[@]}"; do
    case "$t" in python/*) targets+=("//python:${t#python/}") ;; *) targets+=("//${t%/*}:${t##*/}") ;; esac
  done
  ./scripts/bazel.sh build "${targets[@]}" || exit 1
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
failed=0
for t in "${tests[@]}"; do
  echo "=== $t"
  # nccl_test starts launcher/trainrun and tests/c10d/nccl_worker by relative path.
  # A hung kernel or collective must not hold the machine: each suite has a deadline.
  (cd bazel-bin && timeout -k 5 "${GPU_TEST_TIMEOUT:-300}" "./$t" --gtest_brief=1) || failed=1
done
python_tests=(tests/python/test_cuda.py tests/python/test_cuda_ipc.py tests/python/test_compile_cuda.py
              tests/python/test_cuda_flows.py)
echo "=== ${python_tests[*]}"
timeout -k 5 "${GPU_TEST_TIMEOUT:-300}" "${PYTHON:-/usr/bin/python3}" -m pytest -q "${python_tests[@]}" -rs || failed=1
echo "=== bench/cuda"
timeout -k 5 "${GPU_TEST_TIMEOUT:-300}" ./bazel-bin/bench/cuda || failed=1
echo "=== bench/compile.py --device cuda"
timeout -k 5 "${GPU_TEST_TIMEOUT:-300}" "${PYTHON:-/usr/bin/python3}" bench/compile.py --device cuda || failed=1
echo "=== bench/nccl.py"
"${PYTHON:-/usr/bin/python3}" bench/nccl.py --timeout "${GPU_TEST_TIMEOUT:-300}" || failed=1
exit $failed
