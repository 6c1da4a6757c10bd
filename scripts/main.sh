#!/usr/bin/env bash
# The main job: set up, build, and run the tensor-core demo (a linear
# regression fitted with the tensor core). The launcher issue replaces this
# with `trainrun --nproc 2` training a model.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# OpenBLAS misdetects this CPU and picks slow kernels; choose for it unless
# the caller already did.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-SkylakeX}"
./scripts/bazel.sh build //examples:train_mlp
status=0
./bazel-bin/examples/train_mlp || status=$?
bazel shutdown >/dev/null 2>&1 || true
exit $status
