#!/usr/bin/env bash
# The main job: set up, build, and train a digits classifier with
# DistributedDataParallel on 2 worker processes started by the trainrun
# launcher (examples/train_digits.cc; data from Debian's python3-sklearn).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# OpenBLAS misdetects this CPU and picks slow kernels; choose for it unless
# the caller already did.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-SkylakeX}"
./scripts/bazel.sh build //launcher:trainrun //examples:train_digits
status=0
./bazel-bin/launcher/trainrun --nproc-per-node 2 --no-python ./bazel-bin/examples/train_digits "$@" || status=$?
bazel shutdown >/dev/null 2>&1 || true
exit $status
