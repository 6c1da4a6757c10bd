#!/usr/bin/env bash
# The main job: set up, build, and train a byte-level GPT-style language model
# on the Python standard library's source with FSDP2 over 2 worker processes
# started by the trainrun launcher (examples/train_lm.py; about 2 minutes on
# 2 cores). It checkpoints to runs/train_lm/ckpt (pass --resume to continue)
# and ends with the held-out perplexity next to the unigram baseline and the
# loss curve in runs/train_lm/loss.png. examples/train_digits.py stays as the
# smallest example.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# OpenBLAS misdetects this CPU and picks slow kernels; choose for it unless
# the caller already did.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-SkylakeX}"
./scripts/bazel.sh build //launcher:trainrun //python:trainrun/_C.so
status=0
./bazel-bin/launcher/trainrun --nproc-per-node 2 examples/train_lm.py "$@" || status=$?
bazel shutdown >/dev/null 2>&1 || true
exit $status
